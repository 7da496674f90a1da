package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/brp/levering/broker"
	"github.com/brp/levering/cmd/internal/setup"
	"github.com/brp/levering/handeling"
	"github.com/brp/levering/internal/brptest"
	"github.com/brp/levering/internal/rig"
	"github.com/brp/levering/operate"
	"github.com/brp/levering/publicatie"
)

// The operator commands are tested in operate (CLI); here only that the binary reaches them
// and maps their errors to exit codes.
func TestOperatorCommandsExitCodes(t *testing.T) {
	db, dbURL := brptest.DB(t)
	if _, err := db.Exec(`insert into admhnd (id, soort, tsreg) values (1, 'VERHUIZING', now())`); err != nil {
		t.Fatal(err)
	}
	bin := brptest.Build(t, "cmd/publicatie")
	for _, c := range []struct {
		args   []string
		user   string // $USER; $SUDO_USER is empty
		code   int
		stderr string
	}{
		{[]string{"status"}, "", 0, ""},
		{[]string{"fout", "list"}, "", 0, ""},
		{[]string{"fout", "show", "-h"}, "", 0, ""},
		{[]string{"fout", "list", "--bogus"}, "", 2, "publicatie: bad usage: fout list: flag provided but not defined: -bogus\nusage:\n"},
		{[]string{"fout", "show", "abc"}, "", 2, `publicatie: bad usage: fout show: ID must be a handeling id (a number), not "abc"`},
		{[]string{"fout", "retry", "1"}, "", 2, "--door NAME is required"},
		{[]string{"fout", "retry", "1"}, "ops", 1, "publicatie: retry 1: operate: handeling is not in fout: it is te leveren (NULL)\n"},
		{[]string{"fout", "show", "999"}, "", 1, "publicatie: show 999: operate: handeling not found\n"},
		{[]string{"frobnicate"}, "", 2, "publicatie: usage: publicatie [migrate [status] | status | fout list|show|retry|release ... | --help | --version]\n"},
	} {
		t.Setenv("SUDO_USER", "")
		t.Setenv("USER", c.user)
		code, stderr := brptest.RunBad(t, bin, "BRP_DATABASE_URL", dbURL, c.args...)
		if code != c.code || !strings.Contains(stderr, c.stderr) || (c.stderr == "") != (stderr == "") {
			t.Errorf("publicatie %q: exit %d, want %d; stderr:\n%s", c.args, code, c.code, stderr)
		}
	}
}

func TestExitCode(t *testing.T) {
	for _, c := range []struct {
		err  error
		want int
	}{
		{nil, 0},
		{fmt.Errorf("%w: x", operate.ErrUsage), 2},
		{errUsage, 2},
		{fmt.Errorf("show 1: %w", operate.ErrNotFound), 1},
		{errors.New("database down"), 1},
	} {
		if got := exitCode(c.err); got != c.want {
			t.Errorf("exitCode(%v) = %d, want %d", c.err, got, c.want)
		}
	}
}

// --help shows the defaults that the packages own: publicatie's (the contract's, in handeling)
// and broker's, and the command's own from their tags.
func TestHelpShowsThePackagesDefaults(t *testing.T) {
	brptest.HelpShows(t, run,
		"BRP_LEVERING_ADMHNDPUBLICATIE_QUEUE "+handeling.PublicationQueue,
		"BRP_LEVERING_ADMHNDPUBLICATIE_EXCLUDED "+handeling.InitieleVulling,
		"BRP_LEVERING_ADMHNDPUBLICATIE_FOUTPOLICY "+string(handeling.Strict),
		"BRP_LEVERING_ADMHNDPUBLICATIE_CLUSTER "+handeling.Cluster,
		"BRP_LEVERING_ADMHNDPUBLICATIE_VIEWBYTES 32MiB",
		"BRP_LEVERING_ADMHNDPUBLICATIE_WARTEZEIT 10s",
		"BRP_LEVERING_ADMHNDPUBLICATIE_WAKEUP true",
		"BRP_LEVERING_ADMHNDPUBLICATIE_STANDALONE false",
		"BRP_STOMP_HEARTBEAT "+broker.DefaultHeartBeat.String(),
		"BRP_STOMP_TIMEOUT "+broker.DefaultOpTimeout.String(),
		"BRP_HTTP_ADDR 127.0.0.1:9464",
		"BRP_MIGRATE_WAIT 5m",
	)
}

// publicatie migrate against a database that does not answer gives up after BRP_MIGRATE_WAIT
// with exit 1 and one line naming what it waited for, the URL without its password, and the
// last error (not the deadline's).
func TestMigrateGivesUpOnAnUnreachableDatabase(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now: connection refused
	bin := brptest.Build(t, "cmd/publicatie")
	for _, wait := range []string{"2s", "2000"} { // a Go duration, or bare milliseconds
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := exec.CommandContext(ctx, bin, "migrate")
		cmd.Env = rig.Environ("BRP_DATABASE_URL=postgres://brp:s3cretpw@"+addr+"/brp?sslmode=disable", "BRP_MIGRATE_WAIT="+wait)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		start := time.Now()
		_ = cmd.Run()
		took := time.Since(start)
		cancel()
		if code := cmd.ProcessState.ExitCode(); code != 1 || took < 2*time.Second || took > 10*time.Second {
			t.Fatalf("BRP_MIGRATE_WAIT=%s: exit %d after %v, want 1 after about 2 s\n%s", wait, code, took, stderr.String())
		}
		var lines []string // what is not a JSON log line
		for _, line := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
			if !strings.HasPrefix(line, "{") {
				lines = append(lines, line)
			}
		}
		want := "publicatie: migrate: waited 2s (BRP_MIGRATE_WAIT) for the database at postgres://brp:xxxxx@" + addr + "/brp?sslmode=disable: "
		if len(lines) != 1 || !strings.HasPrefix(lines[0], want) || !strings.HasSuffix(lines[0], "connection refused") {
			t.Errorf("BRP_MIGRATE_WAIT=%s: want one line starting %q, got:\n%s", wait, want, stderr.String())
		}
		if out := stdout.String() + stderr.String(); strings.Contains(out, "s3cretpw") {
			t.Errorf("BRP_MIGRATE_WAIT=%s: the password is in the output:\n%s", wait, out)
		}
	}
}

// A binary newer than the database's schema refuses to start and says what to run; migrate
// status shows what is pending, migrate applies it.
func TestSchemaCheckAndMigrateStatus(t *testing.T) {
	db, dbURL := brptest.DB(t)
	db.MustExec(`delete from schema_migrations where version = (select max(version) from schema_migrations)`)
	db.MustExec(`update schema_definitions set sha256 = 'older' where name = 'horizon.sql'`)
	bin := brptest.Build(t, "cmd/publicatie")
	run := func(args ...string) (int, string, string) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "BRP_DATABASE_URL="+dbURL, "BRP_HTTP_ADDR=off", "BRP_LOG_FORMAT=text")
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
	}
	if code, out, _ := run("migrate", "status"); code != 0 || !strings.Contains(out, "pending\n") || !strings.Contains(out, "definitions/horizon.sql") ||
		!strings.Contains(out, "2 migrations and definitions files pending: run publicatie migrate") {
		t.Fatalf("migrate status: exit %d:\n%s", code, out)
	}
	if code, _, stderr := run(); code != 1 || !strings.Contains(stderr, "run publicatie migrate") {
		t.Fatalf("publicatie on an older schema: exit %d, stderr:\n%s", code, stderr)
	}
	if code, out, stderr := run("migrate"); code != 0 || !strings.Contains(out, "(2 migrations and definitions files applied now)") {
		t.Fatalf("migrate: exit %d:\n%s%s", code, out, stderr)
	}
	if code, out, _ := run("migrate", "status"); code != 0 || !strings.Contains(out, "schema up to date") || strings.Contains(out, "pending") {
		t.Fatalf("migrate status after migrate: exit %d:\n%s", code, out)
	}
}

// Every numeric setting has an upper bound: the command's own a max tag, checked at start,
// and the package's settings its Config's Validate, which the command names back (Explain).
func TestEveryNumericSettingHasABound(t *testing.T) {
	var c publicatie.Config
	if u := setup.Unbounded(&config{}, func() error { return c.Validate() }, vars(&c)...); len(u) > 0 {
		t.Errorf("numeric settings without a bound: %v", u)
	}
}

// A handeling a year ahead of the database clock, through the real publicatie: its Run loop
// logs it once, at WARN, without its person; /metrics counts it and keeps the oldest age at the
// handeling not in the future; publicatie status names it.
func TestFutureHandelingThroughTheBinary(t *testing.T) {
	db, dbURL := brptest.DB(t)
	db.MustExec(`insert into admhnd (id, soort, tsreg) values (1, 'GEBOORTE', now() + interval '1 year'),
		(2, 'GEBOORTE', now() - interval '1 minute')`)
	db.MustExec(`insert into admhnd_persoon (admhnd_id, persoon_id) values (1, 770077), (2, 2)`)
	bin := brptest.Build(t, "cmd/publicatie")
	p := brptest.Start(t, "publicatie", bin, rig.Env(brptest.Broker(), dbURL, brptest.NewQueues(t))...)
	const msg = "handeling registered in the future: it waits until its tsreg has passed"
	if l := p.WaitLog(30*time.Second, msg); l["level"] != "WARN" || l["admhnd_id"] != float64(1) || l["tsreg"] == nil {
		t.Errorf("log line %v, want WARN with admhnd_id 1 and its tsreg", l)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	m, err := p.Metrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m["brp_levering_future_handelingen"] != 1 || m["brp_levering_oldest_undelivered_age_seconds"] < 55 {
		t.Errorf("future_handelingen %v, oldest_undelivered_age_seconds %v: want 1 and the minute of handeling 2",
			m["brp_levering_future_handelingen"], m["brp_levering_oldest_undelivered_age_seconds"])
	}
	time.Sleep(publicatie.FutureCheckInterval + time.Second) // another check: nothing new to log
	if n := len(p.Lines(msg)); n != 1 {
		t.Errorf("%d log lines about the handeling in the future, want 1", n)
	}
	for _, l := range p.Output() {
		if !strings.Contains(l, `"level":"DEBUG"`) && strings.Contains(l, "770077") {
			t.Errorf("a log line above debug names the person: %s", l)
		}
	}
	cmd := exec.Command(bin, "status")
	cmd.Env = rig.Environ("BRP_DATABASE_URL=" + dbURL)
	out, err := cmd.Output()
	if err != nil || !strings.Contains(string(out), "\nin the future          1  ") || !strings.Contains(string(out), "\nfirst in the future 1 GEBOORTE") {
		t.Errorf("publicatie status (%v):\n%s", err, out)
	}
}

// After a clean handover (SIGTERM) the lease says so, through the real binaries: publicatie
// status shows nobody holding it, handed over a moment ago at the end of the stopped
// publisher's epoch, not "last activity never"; the next publicatie takes it at once, and then
// it shows that one leading.
func TestCleanHandoverShownByStatus(t *testing.T) {
	_, dbURL := brptest.DB(t)
	bin := brptest.Build(t, "cmd/publicatie")
	q := brptest.NewQueues(t)
	status := func() string {
		t.Helper()
		cmd := exec.Command(bin, "status")
		cmd.Env = rig.Environ("BRP_DATABASE_URL=" + dbURL)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("publicatie status: %v\n%s", err, out)
		}
		for _, l := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(l, "lease ") {
				return l
			}
		}
		t.Fatalf("publicatie status without a lease line:\n%s", out)
		return ""
	}
	a := brptest.Start(t, "publicatie-a", bin, rig.Env(brptest.Broker(), dbURL, q)...)
	a.WaitLeader(30 * time.Second)
	a.Signal(syscall.SIGTERM)
	if code, err := a.Wait(15 * time.Second); err != nil || code != 0 {
		t.Fatalf("after SIGTERM: exit %d, %v", code, err)
	}
	handedOver := regexp.MustCompile(`^lease +nobody holds it: handed over (\d+ms|\d+s) ago at the end of epoch 1; the next publicatie to poll takes it$`)
	if l := status(); !handedOver.MatchString(l) {
		t.Errorf("after a clean handover: %q", l)
	}
	b := brptest.Start(t, "publicatie-b", bin, rig.Env(brptest.Broker(), dbURL, q)...)
	b.WaitLeader(30 * time.Second)
	instance := fmt.Sprint(b.WaitLog(5*time.Second, "became leader")["instance"])
	leads := regexp.MustCompile(`^lease +` + regexp.QuoteMeta(instance) + ` leads, epoch 2, last activity (\d+ms|\d+s) ago$`)
	if l := status(); !leads.MatchString(l) {
		t.Errorf("after the next publicatie (%s) took over: %q", instance, l)
	}
}
