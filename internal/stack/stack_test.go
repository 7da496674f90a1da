package stack

import (
	"context"
	"encoding/xml"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func TestFromEnv(t *testing.T) {
	// What it reads and then checks, set here: a developer's shell may have services on other
	// ports or in another run directory.
	t.Setenv("BRP_RUN_DIR", "")
	t.Setenv("BRP_DEV_STOMP_PORT", "")
	t.Setenv("BRP_DEV_PG_REPLICATION_ADDR", "")
	t.Setenv("BRP_DEV_PG_PORT", "55999")
	t.Setenv("BRP_DEV_PG_SYNC", "off")
	t.Setenv("BRP_DEV_PG_DURABLE", "off")
	c, err := FromEnv("/repo")
	if err != nil {
		t.Fatal(err)
	}
	c = c.withDefaults()
	if c.RunDir != "/repo/.run" || c.PGPort != 55999 || c.StompPort != 61613 || !c.PGAsync || !c.PGNotDurable || c.ReplicationAddr != "127.0.0.1:55999" {
		t.Errorf("FromEnv: %+v", c)
	}
	for name, bad := range map[string]string{"BRP_DEV_STOMP_PORT": "x", "BRP_DEV_PG_SYNC": "maybe", "BRP_DEV_PG_DURABLE": "no", "BRP_DEV_RABBIT_EPMD_PORT": "70000"} {
		t.Run(name, func(t *testing.T) {
			t.Setenv(name, bad)
			if _, err := FromEnv("/repo"); err == nil || !strings.Contains(err.Error(), name) {
				t.Errorf("%s=%s: %v, want an error naming it", name, bad, err)
			}
		})
	}
}

// The network's brokers get the bridge, advisories on and the audit off; a broker with only an
// OpenWire port gets the listener alone; the default broker the file as it is.
func TestActiveMQConfiguration(t *testing.T) {
	s := &stack{cfg: Config{RunDir: t.TempDir(), OpenWirePort: 61999}.withDefaults()}
	for _, c := range []struct {
		node          *amqNode
		want, wantNot []string
	}{
		{s.netNode("b"), []string{"networkConnector", `name="openwire"`, `advisorySupport="true"`, `enableAudit="false"`}, []string{`advisorySupport="false"`}},
		{s.amq(), []string{`name="openwire"`, `advisorySupport="false"`}, []string{"networkConnector"}},
		{s.pairNode("a"), []string{`advisorySupport="false"`}, []string{"networkConnector", `name="openwire"`}},
	} {
		if err := os.MkdirAll(c.node.conf(), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := c.node.writeConf(); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(c.node.conf(), "activemq.xml"))
		if err != nil {
			t.Fatal(err)
		}
		if err := wellFormed(b); err != nil {
			t.Errorf("%s: activemq.xml: %v", c.node.base, err)
		}
		for _, w := range c.want {
			if !strings.Contains(string(b), w) {
				t.Errorf("%s: no %s", c.node.base, w)
			}
		}
		for _, w := range c.wantNot {
			if strings.Contains(string(b), w) {
				t.Errorf("%s: %s", c.node.base, w)
			}
		}
	}
}

// An unknown command is ErrUsage and touches nothing (no lock file, no install).
var update = flag.Bool("update", false, "write deploy/activemq/activemq.xml again")

// compose.yaml's broker runs the configuration the tests run, rendered with the differences
// activemq.xml's template declares under .Deploy; -update renders it again.
func TestDeployConfiguration(t *testing.T) {
	got, err := renderConf(amqConf{Deploy: true})
	if err != nil {
		t.Fatal(err)
	}
	const path = "../../deploy/activemq/activemq.xml"
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := wellFormed(got); err != nil {
		t.Errorf("the deploy configuration: %v", err)
	}
	if string(got) != string(want) {
		t.Errorf("%s is not what internal/stack/activemq/activemq.xml renders to (go test ./internal/stack -run TestDeployConfiguration -update writes it again)", path)
	}
	for _, w := range []string{"simpleAuthenticationPlugin", `stomp://0.0.0.0:61613?`, "transport.tcpNoDelay=true", `import resource="jetty.xml"`,
		`${activemq.data}/kahadb`, `sharedDeadLetterStrategy processExpired="true" processNonPersistent="true"`} {
		if !strings.Contains(string(got), w) {
			t.Errorf("the deploy configuration has no %s", w)
		}
	}
	for _, w := range []string{"${brp.", "networkConnector", "{{"} {
		if strings.Contains(string(got), w) {
			t.Errorf("the deploy configuration has %s", w)
		}
	}
}

func TestUnknownCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	for _, name := range []string{"frobnicate", "", "help", "status"} {
		err := Run(context.Background(), Config{RunDir: dir}, name, nil)
		if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), strconv.Quote(name)) {
			t.Errorf("Run(%q) = %v, want ErrUsage naming it", name, err)
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an unknown command made the run directory: %v", err)
	}
}

// The help lists every command Run knows, each once with its line, in the table's order.
func TestUsageListsEveryCommand(t *testing.T) {
	var b strings.Builder
	if err := Usage(&b); err != nil {
		t.Fatal(err)
	}
	last := 0
	for _, c := range commands {
		re := regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(c.name) + ` +` + regexp.QuoteMeta(c.help) + `$`)
		loc := re.FindAllStringIndex(b.String(), -1)
		if len(loc) != 1 {
			t.Errorf("help lists %s %d times:\n%s", c.name, len(loc), b.String())
			continue
		}
		if loc[0][0] < last {
			t.Errorf("help lists %s out of order", c.name)
		}
		last = loc[0][0]
	}
}

// env only reads: it prints the shared services' addresses without a lock or an install.
func TestEnv(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	var b strings.Builder
	if err := Run(context.Background(), Config{RunDir: dir, PGPort: 55999}, "env", &b); err != nil {
		t.Fatal(err)
	}
	want := "export BRP_DATABASE_URL='postgres://postgres@127.0.0.1:55999/brp?sslmode=disable'\nexport BRP_STOMP_ADDR='127.0.0.1:61613'\n"
	if b.String() != want {
		t.Errorf("env printed %q, want %q", b.String(), want)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("env made the run directory: %v", err)
	}
}

// wellFormed reports whether b is well-formed XML.
func wellFormed(b []byte) error {
	d := xml.NewDecoder(strings.NewReader(string(b)))
	for {
		_, err := d.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
