// Command mutatielevering runs one consumer process of the publication queue; run as many as
// you like. Settings come from the environment (docs/contract.md section 2).
package main

import (
	"context"
	"errors"
	"io"
	"strings"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/brp/levering/cmd/internal/setup"
	"github.com/brp/levering/handeling"
	"github.com/brp/levering/internal/fault"
	"github.com/brp/levering/levering"
)

// config is the environment the command owns; vars are the variables of package levering's
// settings.
type config struct {
	setup.Common
	HTTPAddr setup.ListenAddr `envconfig:"BRP_HTTP_ADDR" default:"127.0.0.1:0"`
	// Consumers subscribe on a random broker node, so that they spread over a network of
	// brokers (their verzending messages go to the first node that answers).
	StompRandomize setup.Bool `envconfig:"BRP_STOMP_RANDOMIZE" default:"true"`
}

// vars binds the variables to lev's fields (and the broker's to lev.Broker's): unset, a field
// stays zero and levering.New takes its default. Package levering owns those defaults and the
// rules of their values.
func vars(lev *levering.Config) []setup.Var {
	return append(setup.BrokerVars(&lev.Broker),
		setup.Var{Name: "BRP_LEVERING_ADMHNDPUBLICATIE_QUEUE", Value: (*setup.Queue)(&lev.Queue)},
		setup.Var{Name: "BRP_LEVERING_VERZENDING_QUEUE", Value: (*setup.Queue)(&lev.VerzendingQueue)},
		setup.Var{Name: "BRP_LEVERING_MUTATIELEVERING_DLQ", Value: (*setup.Queue)(&lev.DeadLetterQueue)},
		// The publisher's setting: a publication of an excluded soort is set aside, not delivered.
		setup.Var{Name: "BRP_LEVERING_ADMHNDPUBLICATIE_EXCLUDED", Value: (*setup.List)(&lev.Excluded)},
		// The publisher's setting: under the strict policy an unreleased fout holds back its
		// persons' later handelingen at the consumer's order check too.
		setup.Var{Name: "BRP_LEVERING_ADMHNDPUBLICATIE_FOUTPOLICY", Value: (*setup.Text)(&lev.FoutPolicy)},
		setup.Var{Name: "BRP_LEVERING_MUTATIELEVERING_WORKERS", Value: (*setup.Positive)(&lev.Workers)},
		setup.Var{Name: "BRP_LEVERING_MUTATIELEVERING_BATCH", Value: (*setup.Positive)(&lev.Batch)},
		setup.Var{Name: "BRP_LEVERING_MUTATIELEVERING_PREFETCH", Value: (*setup.Positive)(&lev.Prefetch)},
		setup.Var{Name: "BRP_LEVERING_MUTATIELEVERING_BATCHTIMEOUT", Value: (*setup.Seconds)(&lev.BatchTimeout)},
	)
}

func main() { setup.Main(command, run, exitCode) }

// command names this program in its database sessions (dbsession.AppName).
const command = "mutatielevering"

var errUsage = errors.New("usage: mutatielevering [--help | --version]")

func exitCode(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, setup.ErrConfig), errors.Is(err, errUsage), errors.Is(err, levering.ErrConfig):
		return 2
	}
	return 1
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	defaults := levering.Config{}.WithDefaults()
	defaults.Broker = defaults.Broker.WithDefaults()
	usage := strings.TrimPrefix(errUsage.Error(), "usage: ")
	if done, err := setup.HelpOrVersion(args, stdout, command, usage, &config{}, vars(&defaults)); done {
		return err
	}
	var cfg config
	var lev levering.Config
	if err := setup.Load(&cfg, vars(&lev)...); err != nil {
		return err
	}
	lev.Layout = handeling.Layout(cfg.Layout)
	if err := lev.Validate(); err != nil {
		return setup.Explain(err, &lev, vars(&lev)...)
	}
	if len(args) > 0 {
		return errUsage
	}
	log := cfg.Logger(stderr)
	bcfg, err := cfg.Broker(lev.Broker)
	if err != nil {
		return err
	}
	bcfg.RandomStart = bool(cfg.StompRandomize)
	start := setup.Start{Command: command, Common: cfg.Common, HTTPAddr: cfg.HTTPAddr, Broker: bcfg, Log: log}
	return start.Run(ctx, func(_ context.Context, db *sqlx.DB, reg *prometheus.Registry) (*setup.Service, error) {
		lev.Registerer, lev.Broker = reg, bcfg
		lev.Hooks = levering.Hooks{
			AfterLock:       func(context.Context, []int64) error { fault.At("mutatielevering.after_lock"); return nil },
			AfterVerzending: func(context.Context, []int64) error { fault.At("mutatielevering.after_verzending"); return nil },
			AfterCommit:     func(context.Context, []int64) error { fault.At("mutatielevering.after_db_commit"); return nil },
		}
		c, err := levering.New(db, lev, log)
		if err != nil {
			return nil, err
		}
		return &setup.Service{Run: c.Run,
			Info: func() map[string]any {
				subscribed, verzending := c.BrokerNodes()
				return map[string]any{"broker_node": subscribed, "verzending_node": verzending}
			},
			Checks: []setup.Check{
				{Name: "broker", Check: func(context.Context) error {
					if !c.Connected() {
						return errors.New("not subscribed to the publication queue")
					}
					return nil
				}},
				{Name: "batches", Check: func(context.Context) error { return c.Stuck() }},
			}}, nil
	})
}
