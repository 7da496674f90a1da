package brptest

import (
	"context"
	"io"
	"math/rand/v2"
	"net"
	"os"
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
	"github.com/brp/levering/internal/stack"
)

// Services is a PostgreSQL and a broker of one test's own, for scenarios that restart them
// (restarting the shared ones would break every test running beside it).
type Services struct {
	t         testing.TB
	cfg       stack.Config
	dir       string
	rabbit    bool
	log       strings.Builder
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
	NeedsServices(t)
	return privateServices(t, false)
}

// PrivateJMSServices is PrivateServices whose ActiveMQ also listens on OpenWire, the protocol
// of ActiveMQ's JMS client, at OpenWirePort (services.sh BRP_DEV_OPENWIRE_PORT): the shared
// broker has only STOMP, and is not restarted for one test.
func PrivateJMSServices(t testing.TB) *Services {
	t.Helper()
	NeedsServices(t)
	s := newPrivate(t)
	s.OpenWirePort = freePort(t)
	s.cfg.OpenWirePort = s.OpenWirePort
	s.run("up")
	return s
}

// PrivateRabbitMQ is PrivateServices with a RabbitMQ as the broker under test.
func PrivateRabbitMQ(t testing.TB) *Services {
	t.Helper()
	NeedsServices(t)
	return privateServices(t, true)
}

func privateServices(t testing.TB, rabbit bool) *Services {
	s := newPrivate(t)
	s.rabbit = rabbit
	if rabbit {
		s.StompPort = freePort(t)
		s.cfg.RabbitStompPort, s.cfg.RabbitDistPort, s.cfg.RabbitEPMDPort = s.StompPort, freePort(t), freePort(t)
	}
	s.run("up")
	if rabbit {
		s.run("up-rabbitmq")
	}
	return s
}

// newPrivate prepares services for a test of its own (package stack): a run directory of its
// own, PostgreSQL and ActiveMQ on free ports; it starts nothing, and stops everything (down)
// and removes the directory when the test ends.
func newPrivate(t testing.TB) *Services {
	dir := filepath.Join(repoDir(), ".run", "private", Name(t))
	s := &Services{t: t, dir: dir, PGPort: freePort(t), StompPort: freePort(t)}
	s.cfg = stack.Config{RunDir: dir, PGPort: s.PGPort, StompPort: s.StompPort, Log: &s.log}
	t.Cleanup(func() {
		if t.Failed() {
			s.logBrokerWarnings()
		}
		s.run("down")
		if os.Getenv("BRP_TEST_KEEP") == "" {
			_ = os.RemoveAll(dir)
		}
	})
	return s
}

// newPrivate's directory is removed when the test ends, unless BRP_TEST_KEEP is set (to read
// the servers' logs after a failure).

// logBrokerWarnings puts the WARN and ERROR lines of the test's ActiveMQ logs (the last 30 of
// each) into a failed test's output: the directory holding them is removed when it ends.
func (s *Services) logBrokerWarnings() {
	logs, _ := filepath.Glob(filepath.Join(s.dir, "*", "*", "activemq.log"))
	more, _ := filepath.Glob(filepath.Join(s.dir, "*", "*", "*", "activemq.log"))
	for _, path := range append(logs, more...) {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		var lines []string
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, "WARN") || strings.Contains(l, "ERROR") {
				lines = append(lines, l)
			}
		}
		total := len(lines)
		lines = lines[max(0, total-30):]
		rel, _ := filepath.Rel(s.dir, path)
		s.t.Logf("%s: %d warnings and errors, the last %d:\n%s", rel, total, len(lines), strings.Join(lines, "\n"))
	}
}

// run runs a command of package stack on the test's services; its progress lines are in the
// failure message.
func (s *Services) run(cmd string) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	s.log.Reset()
	if err := stack.Run(ctx, s.cfg, cmd, io.Discard); err != nil {
		s.t.Fatalf("services %s: %v\n%s", cmd, err, s.log.String())
	}
}

// DatabaseURL is the private server's URL.
func (s *Services) DatabaseURL() string {
	return stack.DatabaseURL(s.PGPort)
}

// Broker is the private broker.
func (s *Services) Broker() broker.Config {
	b := Broker()
	if s.rabbit {
		b.Login, b.Passcode, b.Host = stack.RabbitUser, stack.RabbitPass, stack.RabbitVhost
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
