// Command services runs the project-owned PostgreSQL, ActiveMQ and RabbitMQ (package
// internal/stack) for development, the demo, the tests and CI. scripts/services.sh builds and
// runs it; `scripts/services.sh help` prints the usage below.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"

	"github.com/brp/levering/internal/stack"
)

const usage = `usage: scripts/services.sh COMMAND

  up              install what is missing, start PostgreSQL and ActiveMQ, wait until ready
  down            stop both (and whatever else of the list below runs)
  status          print whether each runs (exit 0 only if both are ready, else 3)
  env             print export lines: eval "$(scripts/services.sh env)"
  restart-db      stop and start PostgreSQL only (data kept)
  stop-db         stop PostgreSQL only (up starts it again)
  up-db           start PostgreSQL only
  restart-broker  stop and start ActiveMQ only (data kept)
  up-rabbitmq     optional second STOMP broker: install, start RabbitMQ
  down-rabbitmq   stop RabbitMQ (and its epmd)
  restart-rabbitmq  stop and start RabbitMQ (data kept)
  up-amq-pair     ActiveMQ master/slave: two brokers on one store, two ports
  up-amq-network  two ActiveMQ brokers joined by network connectors
  up-pg-standby   a streaming standby of PostgreSQL (pg_basebackup)
  promote-pg-standby  make the standby a primary (failover)
  down-amq-pair | down-amq-network | down-pg-standby  stop them (a standby's copy of the
                  data is removed)

Every command is idempotent. State lives in ${BRP_RUN_DIR:-.run}: pg/ (owned by the postgres
user), activemq/, rabbitmq/, amq-pair/, amq-network/, pg-standby/, each with its logs.
Everything listens on 127.0.0.1. Ports: BRP_DEV_PG_PORT (55432), BRP_DEV_STOMP_PORT (61613);
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
Progress goes to stderr; only env and status write to stdout.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case err == nil:
	case errors.Is(err, stack.ErrNotReady):
		os.Exit(3)
	case errors.Is(err, stack.ErrUsage):
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	default:
		fmt.Fprintf(os.Stderr, "services: ERROR: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 1 && slices.Contains([]string{"help", "-h", "--help"}, args[0]) {
		_, err := fmt.Fprint(stdout, usage)
		return err
	}
	if len(args) != 1 {
		return stack.ErrUsage
	}
	repo, err := os.Getwd()
	if err != nil {
		return err
	}
	cfg, err := stack.FromEnv(repo)
	if err != nil {
		return err
	}
	cfg.Log = stderr
	return stack.Run(ctx, cfg, args[0], stdout)
}
