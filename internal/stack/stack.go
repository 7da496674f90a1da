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
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
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
	// PGNotDurable runs PostgreSQL without fsync: what it commits survives its own crash but
	// not the machine's. For a throwaway cluster only (the full test lane's:
	// docs/performance.md, "The full lane"); by default fsync is on.
	PGNotDurable bool
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
	for name, p := range map[string]*bool{"BRP_DEV_PG_SYNC": &c.PGAsync, "BRP_DEV_PG_DURABLE": &c.PGNotDurable} {
		switch v := os.Getenv(name); v {
		case "", "on":
		case "off":
			*p = true
		default:
			return c, fmt.Errorf("%s=%q: expected on or off", name, v)
		}
	}
	return c, nil
}

// ErrUsage is returned by Run for an unknown command.
var ErrUsage = errors.New("unknown command")

// command is one of Run's commands: its name and the line Usage prints for it, the components
// it installs first when they are missing (pg, amq, rmq; see install), whether it only reads
// (env: no lock, no install), and what it does.
type command struct {
	name, help string
	installs   []string
	reads      bool
	run        func(ctx context.Context, s *stack, out io.Writer) error
}

// commands are Run's commands, in the order Usage explains them.
var commands = []command{
	{name: "up", help: "install what is missing, start PostgreSQL and ActiveMQ, wait until ready", installs: []string{"pg", "amq"},
		run: func(ctx context.Context, s *stack, _ io.Writer) error {
			if err := s.primary().start(ctx); err != nil {
				return err
			}
			if _, err := s.amq().start(ctx, false); err != nil {
				return err
			}
			s.logf("up in %d s; eval \"$(scripts/services.sh env)\" to use them", int(time.Since(s.started).Seconds()))
			return nil
		}},
	{name: "down", help: "stop everything of this list that runs (a standby's copy of the data is removed)",
		run: func(ctx context.Context, s *stack, _ io.Writer) error { return s.down(ctx) }},
	{name: "env", help: `print export lines: eval "$(scripts/services.sh env)"`, reads: true,
		run: func(_ context.Context, s *stack, out io.Writer) error { return s.env(out) }},
	{name: "up-db", help: "start PostgreSQL only", installs: []string{"pg"},
		run: func(ctx context.Context, s *stack, _ io.Writer) error { return s.primary().start(ctx) }},
	{name: "stop-db", help: "stop PostgreSQL only (up starts it again, data kept)", installs: []string{"pg"},
		run: func(ctx context.Context, s *stack, _ io.Writer) error { return s.primary().stop(ctx) }},
	{name: "restart-broker", help: "stop and start ActiveMQ only (data kept)", installs: []string{"amq"},
		run: func(ctx context.Context, s *stack, _ io.Writer) error {
			a := s.amq()
			if err := a.stop(ctx, false); err != nil {
				return err
			}
			_, err := a.start(ctx, false)
			return err
		}},
	{name: "up-rabbitmq", help: "optional second STOMP broker: install, start RabbitMQ", installs: []string{"rmq"},
		run: func(ctx context.Context, s *stack, _ io.Writer) error { return s.rabbit().start(ctx) }},
	{name: "restart-rabbitmq", help: "stop and start RabbitMQ (data kept)", installs: []string{"rmq"},
		run: func(ctx context.Context, s *stack, _ io.Writer) error {
			r := s.rabbit()
			if err := r.stop(ctx, false); err != nil {
				return err
			}
			return r.start(ctx)
		}},
	{name: "up-amq-pair", help: "ActiveMQ master/slave: two brokers on one store, two ports", installs: []string{"amq"},
		run: func(ctx context.Context, s *stack, _ io.Writer) error { return s.pairUp(ctx) }},
	{name: "up-amq-network", help: "two ActiveMQ brokers joined by network connectors", installs: []string{"amq"},
		run: func(ctx context.Context, s *stack, _ io.Writer) error { return s.networkUp(ctx) }},
	{name: "up-pg-standby", help: "a streaming standby of PostgreSQL (pg_basebackup)", installs: []string{"pg"},
		run: func(ctx context.Context, s *stack, _ io.Writer) error { return s.standbyStart(ctx) }},
	{name: "promote-pg-standby", help: "make the standby a primary (failover)",
		run: func(ctx context.Context, s *stack, _ io.Writer) error { return s.promote(ctx) }},
}

// Run runs one command on the services of cfg; env writes to out, progress goes to cfg.Log.
// Commands that change something hold the run directory's lock and first install what they
// need.
func Run(ctx context.Context, cfg Config, name string, out io.Writer) error {
	i := slices.IndexFunc(commands, func(c command) bool { return c.name == name })
	if i < 0 {
		return fmt.Errorf("%w %q", ErrUsage, name)
	}
	c := commands[i]
	s := &stack{cfg: cfg.withDefaults(), started: time.Now()}
	s.cfg.RunDir, _ = filepath.Abs(s.cfg.RunDir)
	if c.reads {
		return c.run(ctx, s, out)
	}
	unlock, err := s.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	if err := s.install(ctx, c.installs...); err != nil {
		return err
	}
	return c.run(ctx, s, out)
}

// Usage writes what `scripts/services.sh help` says: every command of Run and the settings.
func Usage(w io.Writer) error {
	var b strings.Builder
	b.WriteString("usage: scripts/services.sh COMMAND\n\n")
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "  help\tthis text\n")
	for _, c := range commands {
		fmt.Fprintf(tw, "  %s\t%s\n", c.name, c.help)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	b.WriteString(usageNotes)
	_, err := io.WriteString(w, b.String())
	return err
}

const usageNotes = `
Every command is idempotent. State lives in ${BRP_RUN_DIR:-.run}: pg/ (owned by the postgres
user), activemq/, rabbitmq/, amq-pair/, amq-network/, pg-standby/, each with its logs.
Everything listens on 127.0.0.1. Ports: BRP_DEV_PG_PORT (55432), BRP_DEV_STOMP_PORT (61613);
BRP_DEV_PG_DURABLE=off (read by up) runs PostgreSQL without fsync, for a throwaway cluster
such as the test lane's (scripts/test.sh); on by default.
BRP_DEV_OPENWIRE_PORT, when set, adds an OpenWire listener (the JMS clients' protocol) to the
default broker. BRP_ACTIVEMQ_HOME (/usr/share/activemq) may point at another ActiveMQ.
The broker configurations are versioned in internal/stack/activemq and internal/stack/rabbitmq.

High availability (for the tests of docs/operations.md "High availability"; down stops them):
- up-amq-pair: a master on BRP_DEV_PAIR_STOMP_PORT_A (61631) and a slave on
  BRP_DEV_PAIR_STOMP_PORT_B (61632) sharing one KahaDB store; the slave opens its port only
  when the master is gone.
- up-amq-network: brokers brp-net-a and brp-net-b, STOMP on BRP_DEV_NET_STOMP_PORT_A/_B
  (61641/61642), their bridges' OpenWire on BRP_DEV_NET_OPENWIRE_PORT_A/_B (61643/61644).
- up-pg-standby: a hot standby on BRP_DEV_PG_STANDBY_PORT (55433), copied from and streaming
  from BRP_DEV_PG_REPLICATION_ADDR (the primary); BRP_DEV_PG_SYNC=on (default) makes the
  primary wait for it at every commit, off: asynchronous.

RabbitMQ (rabbitmq-server with rabbitmq_stomp) runs only after up-rabbitmq, off its default
ports: STOMP BRP_DEV_RABBIT_STOMP_PORT (61614), no AMQP listener, Erlang distribution
BRP_DEV_RABBIT_DIST_PORT (25673), epmd BRP_DEV_RABBIT_EPMD_PORT (4371), user brp/brp, vhost /;
env adds BRP_RABBITMQ_STOMP_* while it runs.
Progress goes to stderr; only env writes to stdout.
`

type stack struct {
	cfg     Config
	started time.Time // when Run began
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
