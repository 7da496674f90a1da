package setup_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/brp/levering/cmd/internal/setup"
	"github.com/brp/levering/internal/brptest"
	"github.com/brp/levering/internal/rig"
)

// withURL returns the tests' database URL changed by f.
func withURL(t *testing.T, f func(u *url.URL)) string {
	t.Helper()
	u, err := url.Parse(brptest.DatabaseURL())
	if err != nil {
		t.Fatal(err)
	}
	f(u)
	return u.String()
}

// A setting that can never work stops the command at its first connection with exit 2 and
// one line naming the variable, and no line ever carries the password.
func TestPermanentMisconfigurationExits2(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"unknown database": withURL(t, func(u *url.URL) { u.Path = "/no_such_database_x" }),
		"unknown role":     withURL(t, func(u *url.URL) { u.User = url.UserPassword("no_such_role_x", "s3cretpw") }),
		"bad sslmode":      withURL(t, func(u *url.URL) { u.RawQuery = "sslmode=bogus" }),
		"unreadable sslrootcert": withURL(t, func(u *url.URL) {
			u.RawQuery = "sslmode=verify-full&sslrootcert=/nonexistent/ca.pem"
		}),
		"unparsable, with a password": "postgres://brp:s3cretpw@db:notaport/brp",
	}
	for _, bin := range []string{"cmd/publicatie", "cmd/mutatielevering"} {
		bin := brptest.Build(t, bin)
		for name, dbURL := range cases {
			code, stderr := brptest.RunBad(t, bin, "BRP_DATABASE_URL", dbURL)
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			last := lines[len(lines)-1]
			if code != 2 || !strings.Contains(last, "BRP_DATABASE_URL") {
				t.Errorf("%s: %s: exit %d, want 2 and a line naming BRP_DATABASE_URL:\n%s", bin, name, code, stderr)
			}
			if strings.Contains(stderr, "s3cretpw") {
				t.Errorf("%s: %s: the password is in the output:\n%s", bin, name, stderr)
			}
		}
	}
}

// A database that is merely away is waited for (with a log line saying so), not a reason to
// exit; an operator command gives up after OperatorTimeout with exit 1 and says why.
func TestDatabaseAwayIsWaitedForAndOperatorCommandsGiveUp(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close() // nothing listens there now: connection refused
	away := withURL(t, func(u *url.URL) { u.Host = net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) })
	for _, bin := range []string{"cmd/publicatie", "cmd/mutatielevering"} {
		p := brptest.Start(t, bin, brptest.Build(t, bin), "BRP_DATABASE_URL="+away)
		p.WaitLog(20*time.Second, "database unavailable, waiting")
		time.Sleep(2 * time.Second)
		if p.Exited() {
			t.Errorf("%s exited while the database was away", bin)
		}
		// Its probes answer meanwhile: alive (a liveness probe must not restart it), not ready.
		for path, want := range map[string]int{"/healthz": http.StatusOK, "/readyz": http.StatusServiceUnavailable} {
			resp, err := http.Get("http://" + p.HTTPAddr() + path)
			if err != nil {
				t.Fatalf("%s %s while waiting for the database: %v", bin, path, err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != want || !strings.Contains(string(b), "waiting for the database") {
				t.Errorf("%s %s while waiting for the database: %s %s, want %d", bin, path, resp.Status, b, want)
			}
		}
		resp, err := http.Get("http://" + p.HTTPAddr() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "brp_levering_starting 1") ||
			!strings.Contains(string(b), `brp_levering_dependency_up{dependency="database"} 0`) {
			t.Errorf("%s /metrics while waiting for the database: %s\n%s", bin, resp.Status, b)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	cmd := exec.CommandContext(ctx, brptest.Build(t, "cmd/publicatie"), "status")
	cmd.Env = rig.Environ("BRP_DATABASE_URL=" + away)
	out, _ := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(string(out), "database not reachable") {
		t.Fatalf("publicatie status with the database away: exit %d after %v:\n%s", code, time.Since(start).Round(time.Second), out)
	}
	t.Logf("publicatie status gave up after %v", time.Since(start).Round(time.Second))
}

// A broker that refuses the login stops the command at start with exit 2 naming the
// variables, without the passcode in any line.
func TestBrokerRefusingTheLoginExits2(t *testing.T) {
	t.Parallel()
	rabbit := brptest.RabbitMQ(t)
	_, dbURL := brptest.DB(t)
	for _, bin := range []string{"cmd/publicatie", "cmd/mutatielevering"} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := exec.CommandContext(ctx, brptest.Build(t, bin))
		cmd.Env = rig.Environ("BRP_DATABASE_URL="+dbURL, "BRP_STOMP_ADDR="+rabbit.Addr,
			"BRP_STOMP_LOGIN="+rabbit.Login, "BRP_STOMP_PASSCODE=wrong-s3cretpw", "BRP_STOMP_HOST="+rabbit.Host)
		out, _ := cmd.CombinedOutput()
		cancel()
		if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(string(out), "BRP_STOMP_PASSCODE") {
			t.Errorf("%s with a wrong passcode: exit %d, want 2 naming BRP_STOMP_PASSCODE:\n%s", bin, code, out)
		}
		if strings.Contains(string(out), "s3cretpw") {
			t.Errorf("%s: the passcode is in the output:\n%s", bin, out)
		}
	}
}

// --help lists every variable with its default and --version says the build, both with exit
// 0 and without a database or broker (the settings point nowhere, and may even be bad).
func TestHelpAndVersionTouchNothing(t *testing.T) {
	t.Parallel()
	for _, bin := range []string{"cmd/publicatie", "cmd/mutatielevering"} {
		path := brptest.Build(t, bin)
		for _, args := range [][]string{{"--help"}, {"-h"}, {"--version"}} {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			cmd := exec.CommandContext(ctx, path, args...)
			cmd.Env = rig.Environ("BRP_DATABASE_URL=postgres://nobody@127.0.0.1:1/none", "BRP_STOMP_ADDR=127.0.0.1:1",
				"BRP_LOG_LEVEL=loud")
			out, err := cmd.Output()
			cancel()
			if err != nil {
				t.Fatalf("%s %v: %v\n%s", bin, args, err, out)
			}
			if args[0] == "--version" {
				if !strings.Contains(string(out), "dev revision") {
					t.Errorf("%s --version: %s", bin, out)
				}
				continue
			}
			for _, v := range []string{"BRP_DATABASE_URL", "BRP_DATABASE_PASSWORD_FILE", "BRP_STOMP_PASSCODE_FILE", "BRP_STOMP_TLS_CERT", "BRP_LOG_LEVEL  "} {
				if !strings.Contains(string(out), v) {
					t.Errorf("%s %v lists no %s:\n%s", bin, args, v, out)
				}
			}
		}
	}
}

// The secrets can come from files (a Kubernetes Secret): the password goes into the database
// URL, the passcode beside the login; a file that cannot be read, or a secret given twice,
// exits 2 naming the variables.
func TestSecretsFromFiles(t *testing.T) { // not parallel: it sets the environment
	dir := t.TempDir()
	pw := dir + "/password"
	if err := os.WriteFile(pw, []byte("s3cretpw\n"), 0o400); err != nil {
		t.Fatal(err)
	}
	var c setup.Common
	t.Setenv("BRP_DATABASE_URL", "postgres://brp@db:5432/brp?sslmode=verify-full")
	t.Setenv("BRP_DATABASE_PASSWORD_FILE", pw)
	t.Setenv("BRP_STOMP_PASSCODE_FILE", pw)
	if err := setup.Load(&c); err != nil {
		t.Fatal(err)
	}
	if string(c.DatabaseURL) != "postgres://brp:s3cretpw@db:5432/brp?sslmode=verify-full" || c.StompPasscode != "s3cretpw" {
		t.Fatalf("loaded %q and passcode %q", c.DatabaseURL, c.StompPasscode)
	}
	for _, bad := range [][2]string{
		{"BRP_DATABASE_PASSWORD_FILE", dir + "/missing"},
		{"BRP_DATABASE_URL", "postgres://brp:other@db/brp"},
		{"BRP_STOMP_PASSCODE", "other"},
	} {
		t.Run(bad[0], func(t *testing.T) {
			t.Setenv(bad[0], bad[1])
			var c setup.Common
			err := setup.Load(&c)
			if !errors.Is(err, setup.ErrConfig) || !strings.Contains(err.Error(), bad[0]) || strings.Contains(err.Error(), "s3cretpw") {
				t.Fatalf("%s=%s: %v, want ErrConfig naming it, without the secret", bad[0], bad[1], err)
			}
		})
	}
}
