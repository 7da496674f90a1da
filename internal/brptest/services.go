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
	"syscall"
	"testing"
	"time"

	"github.com/brp/levering/broker"
)

// Services is a PostgreSQL and a broker of one test's own, for scenarios that restart them
// (restarting the shared ones would break every test running beside it).
type Services struct {
	t         testing.TB
	env       []string
	dir       string
	rabbit    bool
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
	return privateServices(t, false)
}

// PrivateRabbitMQ is PrivateServices with a RabbitMQ as the broker under test.
func PrivateRabbitMQ(t testing.TB) *Services {
	t.Helper()
	return privateServices(t, true)
}

func privateServices(t testing.TB, rabbit bool) *Services {
	dir := filepath.Join(repoDir(), ".run", "private", Name(t))
	s := &Services{t: t, dir: dir, rabbit: rabbit, PGPort: freePort(t), StompPort: freePort(t)}
	s.env = append(os.Environ(), "BRP_RUN_DIR="+dir,
		"BRP_DEV_PG_PORT="+strconv.Itoa(s.PGPort), "BRP_DEV_STOMP_PORT="+strconv.Itoa(s.StompPort))
	if rabbit {
		s.StompPort = freePort(t)
		s.env = append(s.env, "BRP_DEV_RABBIT_STOMP_PORT="+strconv.Itoa(s.StompPort),
			"BRP_DEV_RABBIT_DIST_PORT="+strconv.Itoa(freePort(t)), "BRP_DEV_RABBIT_EPMD_PORT="+strconv.Itoa(freePort(t)))
	}
	t.Cleanup(func() {
		s.run("down")
		_ = os.RemoveAll(dir)
	})
	s.run("up")
	if rabbit {
		s.run("up-rabbitmq")
	}
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
	if s.rabbit {
		b.Login, b.Passcode, b.Host = "brp", "brp", "/" // what services.sh up-rabbitmq creates
	}
	b.Addr = "127.0.0.1:" + strconv.Itoa(s.StompPort)
	return b
}

// RestartBroker stops and starts the private broker, keeping its data.
func (s *Services) RestartBroker() {
	if s.rabbit {
		s.run("restart-rabbitmq")
		return
	}
	s.run("restart-broker")
}

// StopBroker stops the private ActiveMQ (SIGTERM, as an operator would) and waits until it is
// gone; StartBroker brings it back with its data.
func (s *Services) StopBroker() {
	s.t.Helper()
	if s.rabbit {
		s.t.Fatal("brptest: StopBroker supports the private ActiveMQ only")
	}
	pidFile := filepath.Join(s.dir, "activemq", "activemq.pid")
	b, err := os.ReadFile(pidFile)
	if err != nil {
		s.t.Fatalf("broker pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		s.t.Fatalf("broker pid %q: %v", b, err)
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	for i := 0; i < 300 && syscall.Kill(pid, 0) == nil; i++ {
		time.Sleep(100 * time.Millisecond)
	}
}

// StartBroker starts the private ActiveMQ again (services.sh up leaves PostgreSQL alone).
func (s *Services) StartBroker() { s.run("up") }

// RestartDB stops and starts the private PostgreSQL, keeping its data.
func (s *Services) RestartDB() { s.run("restart-db") }

// Env is the environment for processes on the private services (see Env).
func (s *Services) Env(dbURL string, q Queues, extra ...string) []string {
	return EnvFor(s.Broker(), dbURL, q, extra...)
}
