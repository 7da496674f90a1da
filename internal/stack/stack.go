// Package stack runs the project-owned PostgreSQL, ActiveMQ and RabbitMQ that development,
// the demo, the tests and CI use: installed from Debian packages when missing, with their
// data under a run directory, on loopback ports of their own, and on request the high
// availability topologies (an ActiveMQ master/slave pair, a network of brokers, a PostgreSQL
// standby). cmd/services (scripts/services.sh) is its command line; internal/brptest starts
// private instances through it.
//
// Every command is idempotent, and commands on one run directory wait for each other (a lock
// file). The brokers and databases it starts run in sessions of their own: they outlive the
// process that started them, until a down.
package stack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// Config says where the services live. Zero fields take the defaults in brackets; FromEnv
// reads them from the BRP_DEV_* variables that scripts/services.sh documents.
type Config struct {
	// RunDir holds every service's data and logs [<repo>/.run].
	RunDir string
	// PGPort is PostgreSQL's port [55432]; StompPort ActiveMQ's STOMP port [61613].
	PGPort, StompPort int
	// OpenWirePort, when set, adds an OpenWire listener (the JMS clients' protocol) to the
	// default ActiveMQ, for afnemers written in Java; zero: STOMP only.
	OpenWirePort int
	// PairPortA and PairPortB are the STOMP ports of the master/slave pair [61631, 61632].
	PairPortA, PairPortB int
	// NetPortA and NetPortB are the STOMP ports of the network of brokers [61641, 61642],
	// NetOpenWireA and NetOpenWireB their bridges' OpenWire ports [61643, 61644].
	NetPortA, NetPortB, NetOpenWireA, NetOpenWireB int
	// StandbyPort is the PostgreSQL standby's port [55433].
	StandbyPort int
	// ReplicationAddr is where the standby copies and streams from [the primary].
	ReplicationAddr string
	// PGAsync makes the standby asynchronous; by default the primary waits for it at every
	// commit (synchronous_standby_names = '*').
	PGAsync bool
	// ActiveMQHome is the ActiveMQ install [/usr/share/activemq, the Debian package].
	ActiveMQHome string
	// RabbitBin holds RabbitMQ's scripts [/usr/lib/rabbitmq/bin].
	RabbitBin string
	// RabbitStompPort [61614], RabbitDistPort (Erlang distribution) [25673] and
	// RabbitEPMDPort [4371] keep the project's RabbitMQ off a system one's ports.
	RabbitStompPort, RabbitDistPort, RabbitEPMDPort int
	// Log receives progress lines [os.Stderr].
	Log io.Writer
}

func (c Config) withDefaults() Config {
	def := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	def(&c.PGPort, 55432)
	def(&c.StompPort, 61613)
	def(&c.PairPortA, 61631)
	def(&c.PairPortB, 61632)
	def(&c.NetPortA, 61641)
	def(&c.NetPortB, 61642)
	def(&c.NetOpenWireA, 61643)
	def(&c.NetOpenWireB, 61644)
	def(&c.StandbyPort, 55433)
	def(&c.RabbitStompPort, 61614)
	def(&c.RabbitDistPort, 25673)
	def(&c.RabbitEPMDPort, 4371)
	if c.ReplicationAddr == "" {
		c.ReplicationAddr = "127.0.0.1:" + strconv.Itoa(c.PGPort)
	}
	if c.ActiveMQHome == "" {
		c.ActiveMQHome = "/usr/share/activemq"
	}
	if c.RabbitBin == "" {
		c.RabbitBin = "/usr/lib/rabbitmq/bin"
	}
	if c.Log == nil {
		c.Log = os.Stderr
	}
	return c
}

// FromEnv reads a Config from the environment (scripts/services.sh lists the variables);
// repo is the checkout, whose .run is the default run directory.
func FromEnv(repo string) (Config, error) {
	c := Config{RunDir: os.Getenv("BRP_RUN_DIR"), ReplicationAddr: os.Getenv("BRP_DEV_PG_REPLICATION_ADDR"),
		ActiveMQHome: os.Getenv("BRP_ACTIVEMQ_HOME"), RabbitBin: os.Getenv("BRP_RABBITMQ_BIN")}
	if c.RunDir == "" {
		c.RunDir = filepath.Join(repo, ".run")
	}
	for name, p := range map[string]*int{
		"BRP_DEV_PG_PORT": &c.PGPort, "BRP_DEV_STOMP_PORT": &c.StompPort, "BRP_DEV_OPENWIRE_PORT": &c.OpenWirePort,
		"BRP_DEV_PAIR_STOMP_PORT_A": &c.PairPortA, "BRP_DEV_PAIR_STOMP_PORT_B": &c.PairPortB,
		"BRP_DEV_NET_STOMP_PORT_A": &c.NetPortA, "BRP_DEV_NET_STOMP_PORT_B": &c.NetPortB,
		"BRP_DEV_NET_OPENWIRE_PORT_A": &c.NetOpenWireA, "BRP_DEV_NET_OPENWIRE_PORT_B": &c.NetOpenWireB,
		"BRP_DEV_PG_STANDBY_PORT": &c.StandbyPort, "BRP_DEV_RABBIT_STOMP_PORT": &c.RabbitStompPort,
		"BRP_DEV_RABBIT_DIST_PORT": &c.RabbitDistPort, "BRP_DEV_RABBIT_EPMD_PORT": &c.RabbitEPMDPort,
	} {
		if v := os.Getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 || n > 65535 {
				return c, fmt.Errorf("%s=%q: expected a port number", name, v)
			}
			*p = n
		}
	}
	switch v := os.Getenv("BRP_DEV_PG_SYNC"); v {
	case "", "on":
	case "off":
		c.PGAsync = true
	default:
		return c, fmt.Errorf("BRP_DEV_PG_SYNC=%q: expected on or off", v)
	}
	return c, nil
}

// ErrUsage is returned by Run for an unknown command.
var ErrUsage = errors.New("unknown command")

// ErrNotReady is returned by Run("status") when PostgreSQL or ActiveMQ is not ready.
var ErrNotReady = errors.New("not ready")

// Commands are Run's commands, in the order scripts/services.sh explains them.
var Commands = []string{"up", "down", "status", "env", "restart-db", "stop-db", "up-db", "restart-broker",
	"up-rabbitmq", "down-rabbitmq", "restart-rabbitmq", "up-amq-pair", "up-amq-network", "up-pg-standby",
	"promote-pg-standby", "down-amq-pair", "down-amq-network", "down-pg-standby"}

// Run runs one command on the services of cfg; status and env write to out, progress goes to
// cfg.Log.
func Run(ctx context.Context, cfg Config, cmd string, out io.Writer) error {
	s := &stack{cfg: cfg.withDefaults()}
	s.cfg.RunDir, _ = filepath.Abs(s.cfg.RunDir)
	t0 := time.Now()
	switch cmd {
	case "status":
		return s.status(out)
	case "env":
		return s.env(out)
	}
	unlock, err := s.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	switch cmd {
	case "up":
		if r := s.install(ctx, "pg", "amq"); r.err != nil {
			return r.err
		}
		if err := s.primary().start(ctx); err != nil {
			return err
		}
		if _, err := s.amq().start(ctx, false); err != nil {
			return err
		}
		s.logf("up in %d s; eval \"$(scripts/services.sh env)\" to use them", int(time.Since(t0).Seconds()))
		return nil
	case "down":
		return s.down(ctx)
	case "up-db":
		return s.install(ctx, "pg").then(func() error { return s.primary().start(ctx) })
	case "stop-db":
		return s.install(ctx, "pg").then(func() error { return s.primary().stop(ctx) })
	case "restart-db":
		return s.install(ctx, "pg").then(func() error { return s.primary().stop(ctx) }, func() error { return s.primary().start(ctx) })
	case "restart-broker":
		a := s.amq()
		return s.install(ctx, "amq").then(func() error { return a.stop(ctx, false) }, func() error { _, err := a.start(ctx, false); return err })
	case "up-rabbitmq":
		return s.install(ctx, "rmq").then(func() error { return s.rabbit().start(ctx) })
	case "down-rabbitmq":
		return s.rabbit().stop(ctx, false)
	case "restart-rabbitmq":
		r := s.rabbit()
		return s.install(ctx, "rmq").then(func() error { return r.stop(ctx, false) }, func() error { return r.start(ctx) })
	case "up-amq-pair":
		return s.install(ctx, "amq").then(func() error { return s.pairUp(ctx) })
	case "down-amq-pair":
		return s.pairDown(ctx, false)
	case "up-amq-network":
		return s.install(ctx, "amq").then(func() error { return s.networkUp(ctx) })
	case "down-amq-network":
		return s.networkDown(ctx, false)
	case "up-pg-standby":
		return s.install(ctx, "pg").then(func() error { return s.standbyStart(ctx) })
	case "promote-pg-standby":
		return s.promote(ctx)
	case "down-pg-standby":
		return s.standbyStop(ctx)
	}
	return fmt.Errorf("%w %q", ErrUsage, cmd)
}

// result lets a command read as a chain of steps: the first error ends it.
type result struct{ err error }

func (r result) then(steps ...func() error) error {
	if r.err != nil {
		return r.err
	}
	for _, f := range steps {
		if err := f(); err != nil {
			return err
		}
	}
	return nil
}

type stack struct {
	cfg Config
}

func (s *stack) logf(format string, args ...any) {
	fmt.Fprintf(s.cfg.Log, "services: "+format+"\n", args...)
}

// lock holds the run directory's lock file, so that concurrent commands do not race; it
// waits at most 5 minutes.
func (s *stack) lock(ctx context.Context) (func(), error) {
	if err := os.MkdirAll(s.cfg.RunDir, 0o755); err != nil {
		return nil, err
	}
	path := filepath.Join(s.cfg.RunDir, ".services.lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(5 * time.Minute)
	for syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		if time.Now().After(deadline) || ctx.Err() != nil {
			f.Close()
			return nil, fmt.Errorf("another services command is still busy on %s (lock %s)", s.cfg.RunDir, path)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return func() { f.Close() }, nil
}

func (s *stack) down(ctx context.Context) error {
	if err := s.rabbit().stop(ctx, true); err != nil {
		return err
	}
	if err := s.pairDown(ctx, true); err != nil {
		return err
	}
	if err := s.networkDown(ctx, true); err != nil {
		return err
	}
	if err := s.amq().stop(ctx, false); err != nil {
		return err
	}
	if _, err := pgBinDir(); err != nil {
		s.logf("postgres: not installed")
		return nil
	}
	if err := s.standbyStop(ctx); err != nil {
		return err
	}
	return s.primary().stop(ctx)
}

// status says whether each service runs: PostgreSQL and ActiveMQ always, the others only while
// they run. It returns ErrNotReady unless PostgreSQL and ActiveMQ are both ready.
func (s *stack) status(out io.Writer) error {
	var err error
	p := s.primary()
	switch {
	case !p.running():
		fmt.Fprintln(out, "postgres: stopped")
		err = ErrNotReady
	case p.ready():
		fmt.Fprintf(out, "postgres: running, ready on 127.0.0.1:%d (data %s)\n", p.port, p.data())
	default:
		fmt.Fprintf(out, "postgres: running but not answering on 127.0.0.1:%d\n", p.port)
		err = ErrNotReady
	}
	a := s.amq()
	if pid, ok := a.pid(); !ok {
		fmt.Fprintln(out, "activemq: stopped")
		err = ErrNotReady
	} else if stompPing(a.port, "localhost", "", "") {
		fmt.Fprintf(out, "activemq: running (pid %d), ready, stomp 127.0.0.1:%d (data %s)\n", pid, a.port, a.dataDir())
	} else {
		fmt.Fprintf(out, "activemq: running (pid %d) but not answering STOMP on 127.0.0.1:%d\n", pid, a.port)
		err = ErrNotReady
	}
	for _, n := range []*amqNode{s.pairNode("a"), s.pairNode("b"), s.netNode("a"), s.netNode("b")} {
		if pid, ok := n.pid(); ok {
			rel, _ := filepath.Rel(s.cfg.RunDir, n.base)
			if stompPing(n.port, "localhost", "", "") {
				fmt.Fprintf(out, "activemq %s: running (pid %d), ready, stomp 127.0.0.1:%d\n", rel, pid, n.port)
			} else {
				fmt.Fprintf(out, "activemq %s: running (pid %d), not answering STOMP on 127.0.0.1:%d (a slave waiting for the store lock?)\n", rel, pid, n.port)
			}
		}
	}
	if sb := s.standby(); sb.running() {
		fmt.Fprintf(out, "postgres standby: running on 127.0.0.1:%d (data %s)\n", sb.port, sb.data())
	}
	r := s.rabbit()
	if pid, ok := r.pid(); ok {
		if r.ping() {
			fmt.Fprintf(out, "rabbitmq: running (pid %d), ready, stomp 127.0.0.1:%d (data %s)\n", pid, r.cfg.RabbitStompPort, r.mnesia())
		} else {
			fmt.Fprintf(out, "rabbitmq: running (pid %d) but not answering STOMP on 127.0.0.1:%d\n", pid, r.cfg.RabbitStompPort)
			err = ErrNotReady
		}
	}
	return err
}

// env prints export lines for a shell: the database and broker, and the optional ones while
// they run.
func (s *stack) env(out io.Writer) error {
	fmt.Fprintf(out, "export BRP_DATABASE_URL='%s'\n", DatabaseURL(s.cfg.PGPort))
	fmt.Fprintf(out, "export BRP_STOMP_ADDR='127.0.0.1:%d'\n", s.cfg.StompPort)
	if _, ok := s.rabbit().pid(); ok {
		fmt.Fprintf(out, "export BRP_RABBITMQ_STOMP_ADDR='127.0.0.1:%d'\n", s.cfg.RabbitStompPort)
		fmt.Fprintf(out, "export BRP_RABBITMQ_STOMP_LOGIN='%s'\n", RabbitUser)
		fmt.Fprintf(out, "export BRP_RABBITMQ_STOMP_PASSCODE='%s'\n", RabbitPass)
		fmt.Fprintf(out, "export BRP_RABBITMQ_STOMP_HOST='%s'\n", RabbitVhost)
	}
	if _, ok := s.pairNode("a").pid(); ok {
		fmt.Fprintf(out, "export BRP_AMQ_PAIR_STOMP_ADDR='127.0.0.1:%d,127.0.0.1:%d'\n", s.cfg.PairPortA, s.cfg.PairPortB)
	}
	if _, ok := s.netNode("a").pid(); ok {
		fmt.Fprintf(out, "export BRP_AMQ_NETWORK_STOMP_ADDR='127.0.0.1:%d,127.0.0.1:%d'\n", s.cfg.NetPortA, s.cfg.NetPortB)
	}
	return nil
}

// DatabaseURL is the URL of the brp database of the PostgreSQL on port.
func DatabaseURL(port int) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/brp?sslmode=disable", port)
}
