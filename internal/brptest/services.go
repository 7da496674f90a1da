package brptest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/brp/levering/broker"
)

// Services is a PostgreSQL and ActiveMQ of one test's own, for scenarios that restart them
// (restarting the shared ones would break every test running beside it).
type Services struct {
	t         testing.TB
	env       []string
	PGPort    int
	StompPort int
}

func repoDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// PrivateServices starts a PostgreSQL and an ActiveMQ on free loopback ports, with data in a
// directory of the test's own, and stops them when the test ends.
func PrivateServices(t testing.TB) *Services {
	t.Helper()
	dir := filepath.Join(repoDir(), ".run", "private", Name(t))
	s := &Services{t: t, PGPort: freePort(t), StompPort: freePort(t)}
	s.env = append(os.Environ(), "BRP_RUN_DIR="+dir,
		"BRP_DEV_PG_PORT="+strconv.Itoa(s.PGPort), "BRP_DEV_STOMP_PORT="+strconv.Itoa(s.StompPort))
	t.Cleanup(func() {
		s.run("down")
		_ = os.RemoveAll(dir)
	})
	s.run("up")
	return s
}

func (s *Services) run(cmd string) {
	s.t.Helper()
	c := exec.Command(filepath.Join(repoDir(), "scripts", "services.sh"), cmd)
	c.Env = s.env
	if out, err := c.CombinedOutput(); err != nil {
		s.t.Fatalf("services.sh %s: %v\n%s", cmd, err, out)
	}
}

// DatabaseURL is the private server's URL.
func (s *Services) DatabaseURL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/brp?sslmode=disable", s.PGPort)
}

// Broker is the private broker.
func (s *Services) Broker() broker.Config {
	b := Broker()
	b.Addr = "127.0.0.1:" + strconv.Itoa(s.StompPort)
	return b
}

// RestartBroker stops and starts the private ActiveMQ, keeping its data.
func (s *Services) RestartBroker() { s.run("restart-broker") }

// RestartDB stops and starts the private PostgreSQL, keeping its data.
func (s *Services) RestartDB() { s.run("restart-db") }

// Env is the environment for processes on the private services (see Env).
func (s *Services) Env(dbURL string, q Queues, extra ...string) []string {
	env := Env(dbURL, q, extra...)
	for i, kv := range env {
		if strings.HasPrefix(kv, "BRP_STOMP_ADDR=") {
			env[i] = "BRP_STOMP_ADDR=" + s.Broker().Addr
		}
	}
	return env
}
