package brptest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/brp/levering/broker"
	"github.com/brp/levering/internal/rig"
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
	// OpenWirePort is the broker's OpenWire listener (PrivateJMSServices), 0 when it has none.
	OpenWirePort int
}

func repoDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// freePort returns a loopback port that is free now, below Linux's ephemeral range when it
// can. A port from that range, free when picked, can become the local port of any outgoing
// connection (or sit in its TIME_WAIT) before the service binds it: ActiveMQ once exited
// during startup in TestDatabaseRestartedMidRun. A port is not handed out twice per process.
func freePort(t testing.TB) int {
	t.Helper()
	portMu.Lock()
	defer portMu.Unlock()
	if lo := ephemeralLow(); lo > minPort+1000 {
		for range 1000 {
			p := minPort + rand.IntN(lo-minPort)
			if portsOut[p] {
				continue
			}
			if l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p)); err == nil {
				l.Close()
				portsOut[p] = true
				return p
			}
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// minPort is the lowest port freePort picks: above the well-known services' ports.
const minPort = 20000

var (
	portMu   sync.Mutex
	portsOut = map[int]bool{}
)

// ephemeralLow is the first port of the ephemeral range (Linux: ip_local_port_range), or 0
// where that is not known.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	lo, _ := strconv.Atoi(f[0])
	return lo
}

// PrivateServices starts a PostgreSQL and an ActiveMQ on free loopback ports, with data in a
// directory of the test's own, and stops them when the test ends.
func PrivateServices(t testing.TB) *Services {
	t.Helper()
	return privateServices(t, false)
}

// PrivateJMSServices is PrivateServices whose ActiveMQ also listens on OpenWire, the protocol
// of ActiveMQ's JMS client, at OpenWirePort (services.sh BRP_DEV_OPENWIRE_PORT): the shared
// broker has only STOMP, and is not restarted for one test.
func PrivateJMSServices(t testing.TB) *Services {
	t.Helper()
	port := freePort(t)
	s := newPrivate(t, "BRP_DEV_OPENWIRE_PORT="+strconv.Itoa(port))
	s.OpenWirePort = port
	s.run("up")
	return s
}

// PrivateRabbitMQ is PrivateServices with a RabbitMQ as the broker under test.
func PrivateRabbitMQ(t testing.TB) *Services {
	t.Helper()
	return privateServices(t, true)
}

func privateServices(t testing.TB, rabbit bool) *Services {
	s := newPrivate(t)
	s.rabbit = rabbit
	if rabbit {
		s.StompPort = freePort(t)
		s.env = append(s.env, "BRP_DEV_RABBIT_STOMP_PORT="+strconv.Itoa(s.StompPort),
			"BRP_DEV_RABBIT_DIST_PORT="+strconv.Itoa(freePort(t)), "BRP_DEV_RABBIT_EPMD_PORT="+strconv.Itoa(freePort(t)))
	}
	s.run("up")
	if rabbit {
		s.run("up-rabbitmq")
	}
	return s
}

// newPrivate prepares scripts/services.sh for a test of its own: a run directory of its own,
// PostgreSQL and ActiveMQ on free ports, env (settings of services.sh) added; it starts
// nothing, and stops everything (services.sh down) and removes the directory when the test
// ends.
func newPrivate(t testing.TB, env ...string) *Services {
	dir := filepath.Join(repoDir(), ".run", "private", Name(t))
	s := &Services{t: t, dir: dir, PGPort: freePort(t), StompPort: freePort(t)}
	s.env = append(os.Environ(), "BRP_RUN_DIR="+dir,
		"BRP_DEV_PG_PORT="+strconv.Itoa(s.PGPort), "BRP_DEV_STOMP_PORT="+strconv.Itoa(s.StompPort))
	s.env = append(s.env, env...)
	t.Cleanup(func() {
		s.run("down")
		_ = os.RemoveAll(dir)
	})
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
	pid := s.pid(filepath.Join("activemq", "activemq.pid"))
	_ = syscall.Kill(pid, syscall.SIGTERM)
	for i := 0; i < 300 && syscall.Kill(pid, 0) == nil; i++ {
		time.Sleep(100 * time.Millisecond)
	}
}

// pid reads the first line of a pid file under the services' directory.
func (s *Services) pid(file string) int {
	s.t.Helper()
	b, err := os.ReadFile(filepath.Join(s.dir, file))
	if err != nil {
		s.t.Fatalf("brptest: pid: %v", err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil {
		s.t.Fatalf("brptest: pid in %s: %q: %v", file, first, err)
	}
	return pid
}

// PauseBroker freezes the private broker (SIGSTOP to it and every process it started), as a
// VM pause would: its sockets stay open and its kernel answers, but it reads and sends
// nothing. ResumeBroker lets it go on (SIGCONT).
func (s *Services) PauseBroker() { s.signalTree(s.BrokerPID(), syscall.SIGSTOP) }

// ResumeBroker ends PauseBroker.
func (s *Services) ResumeBroker() { s.signalTree(s.BrokerPID(), syscall.SIGCONT) }

// PauseDB freezes the private PostgreSQL (the postmaster and every backend) as PauseBroker
// does the broker; ResumeDB lets it go on.
func (s *Services) PauseDB() { s.signalTree(s.DBPID(), syscall.SIGSTOP) }

// ResumeDB ends PauseDB.
func (s *Services) ResumeDB() { s.signalTree(s.DBPID(), syscall.SIGCONT) }

// DBPID is the private PostgreSQL server's process (the postmaster; its backends are its
// children).
func (s *Services) DBPID() int { return s.pid(filepath.Join("pg", "data", "postmaster.pid")) }

// BrokerPID is the private broker's process.
func (s *Services) BrokerPID() int {
	if s.rabbit {
		return s.pid(filepath.Join("rabbitmq", "rabbitmq.pid"))
	}
	return s.pid(filepath.Join("activemq", "activemq.pid"))
}

// signalTree sends sig to pid and its descendants, parents first. The tree is read before
// the first signal: the children of a killed process are handed to init.
func (s *Services) signalTree(pid int, sig syscall.Signal) {
	s.t.Helper()
	tree := []int{pid}
	for i := 0; i < len(tree); i++ {
		tree = append(tree, rig.Children(tree[i])...)
	}
	for _, p := range tree {
		if err := syscall.Kill(p, sig); err != nil && p == pid {
			s.t.Fatalf("brptest: signal %v to %d: %v", sig, pid, err)
		}
	}
}

// StartBroker starts the private ActiveMQ again (services.sh up leaves PostgreSQL alone).
func (s *Services) StartBroker() { s.run("up") }

// StopDB stops the private PostgreSQL (fast shutdown: sessions are ended); StartDB brings it
// back with its data.
func (s *Services) StopDB() { s.run("stop-db") }

// StartDB starts the private PostgreSQL again (services.sh up leaves a running broker alone).
func (s *Services) StartDB() { s.run("up") }

// Env is the environment for processes on the private services (see Env).
func (s *Services) Env(dbURL string, q Queues, extra ...string) []string {
	return EnvFor(s.Broker(), dbURL, q, extra...)
}
