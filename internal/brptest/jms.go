package brptest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// JMSMessage is one message as a Java afnemer using ActiveMQ's JMS client saw it
// (testdata/JMSAfnemer.java).
type JMSMessage struct {
	// Type is the JMS message type: "TextMessage", "BytesMessage" or another class name.
	Type string
	// Persistent says JMSDeliveryMode was PERSISTENT.
	Persistent bool
	// PropertyType is the Java class of the admhnd-id property ("String"), "-" when missing.
	PropertyType string
	// AdmhndID is the admhnd-id property as read with getStringProperty.
	AdmhndID string
	// Body is a TextMessage's text, "-" for any other type.
	Body string
}

// jmsClasspath is what ActiveMQ's JMS client needs, from the Debian activemq package.
var jmsClasspath = []string{
	"/usr/share/java/activemq-client.jar",
	"/usr/share/java/geronimo-jms_1.1_spec.jar",
	"/usr/share/java/geronimo-j2ee-management-1.1-spec.jar",
	"/usr/share/java/hawtbuf.jar",
	"/usr/share/java/slf4j-api.jar",
}

var (
	jmsOnce sync.Once
	jmsDir  string
	jmsErr  error
)

// compileJMS compiles testdata/JMSAfnemer.java once per test process, into a directory of
// the process (processTempDir; tests of several packages share nothing).
func compileJMS(t testing.TB) string {
	t.Helper()
	jmsOnce.Do(func() {
		if _, err := exec.LookPath("javac"); err != nil {
			jmsErr = fmt.Errorf("javac not found (apt-get install default-jdk-headless; scripts/test.sh does): %w", err)
			return
		}
		for _, jar := range jmsClasspath {
			if _, err := os.Stat(jar); err != nil {
				jmsErr = fmt.Errorf("ActiveMQ's JMS client is incomplete (apt-get install activemq): %w", err)
				return
			}
		}
		dir, err := processTempDir("brp-jms-")
		if err != nil {
			jmsErr = err
			return
		}
		src := filepath.Join(repoDir(), "internal", "brptest", "testdata", "JMSAfnemer.java")
		out, err := exec.Command("javac", "-d", dir, "-cp", strings.Join(jmsClasspath, ":"), src).CombinedOutput()
		if err != nil {
			jmsErr = fmt.Errorf("javac %s: %w\n%s", src, err, out)
			return
		}
		jmsDir = dir
	})
	if jmsErr != nil {
		t.Fatalf("brptest: %v", jmsErr)
	}
	return jmsDir
}

// ReadJMS starts a Java afnemer that reads n messages from queue (a STOMP destination such as
// /queue/brp.levering.verzending) with ActiveMQ's JMS client over OpenWire at
// 127.0.0.1:openWirePort, each within wait. It returns at once; the returned function waits
// for the afnemer and returns what it read, in order, failing t when it read fewer than n.
func ReadJMS(t testing.TB, openWirePort int, queue string, n int, wait time.Duration) func() []JMSMessage {
	t.Helper()
	NeedsServices(t)
	dir := compileJMS(t)
	name := strings.TrimPrefix(queue, "/queue/")
	ctx, cancel := context.WithCancel(context.Background())
	cp := strings.Join(append([]string{dir}, jmsClasspath...), ":")
	cmd := exec.CommandContext(ctx, "java", "-Xmx128m", "-cp", cp, "JMSAfnemer",
		"tcp://127.0.0.1:"+strconv.Itoa(openWirePort), name, strconv.Itoa(n), strconv.Itoa(int(wait.Seconds())))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("brptest: start the JMS afnemer: %v", err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	var once sync.Once
	var got []JMSMessage
	finish := func() []JMSMessage {
		t.Helper()
		once.Do(func() {
			<-exited
			err := waitErr
			for _, line := range strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n") {
				if line == "" {
					continue
				}
				f := strings.SplitN(line, "\t", 5)
				if len(f) != 5 {
					t.Fatalf("brptest: JMS afnemer printed %q", line)
				}
				got = append(got, JMSMessage{Type: f[0], Persistent: f[1] == "PERSISTENT", PropertyType: f[2], AdmhndID: f[3], Body: f[4]})
			}
			if err != nil || len(got) != n {
				t.Fatalf("brptest: JMS afnemer read %d of %d messages from %s: %v\n%s", len(got), n, name, err, stderr.String())
			}
		})
		return got
	}
	t.Cleanup(func() { cancel(); <-exited })
	return finish
}
