// Command mutatielevering runs one consumer process of the publication queue; run as many as
// you like. Settings come from the environment (CONTRACT.md section 2).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/brp/levering/cmd/internal/setup"
	"github.com/brp/levering/internal/fault"
	"github.com/brp/levering/levering"
	"github.com/brp/levering/schema"
)

// config is the environment. The variables after HTTPAddr set the fields of lev with the same
// name (setup.Explain relies on it); unset, a field stays zero and levering.New takes its
// default: package levering owns those defaults and the rules of their values.
type config struct {
	setup.Common
	HTTPAddr        setup.ListenAddr `envconfig:"BRP_HTTP_ADDR" default:"127.0.0.1:0"`
	Queue           *setup.Queue     `envconfig:"BRP_LEVERING_ADMHNDPUBLICATIE_QUEUE"`
	VerzendingQueue *setup.Queue     `envconfig:"BRP_LEVERING_VERZENDING_QUEUE"`
	DeadLetterQueue *setup.Queue     `envconfig:"BRP_LEVERING_MUTATIELEVERING_DLQ"`
	// The publisher's setting: a publication of an excluded soort is set aside, not delivered.
	Excluded *setup.List `envconfig:"BRP_LEVERING_ADMHNDPUBLICATIE_EXCLUDED"`
	// The publisher's setting: under the strict policy an unreleased fout holds back its
	// persons' later handelingen at the consumer's order check too.
	FoutPolicy   *string         `envconfig:"BRP_LEVERING_ADMHNDPUBLICATIE_FOUTPOLICY"`
	Workers      *setup.Positive `envconfig:"BRP_LEVERING_MUTATIELEVERING_WORKERS" max:"64"`
	Batch        *setup.Positive `envconfig:"BRP_LEVERING_MUTATIELEVERING_BATCH" max:"10000"`
	Prefetch     *setup.Positive `envconfig:"BRP_LEVERING_MUTATIELEVERING_PREFETCH" max:"100000"`
	BatchTimeout *setup.Seconds  `envconfig:"BRP_LEVERING_MUTATIELEVERING_BATCHTIMEOUT" max:"1h"`
	// Consumers subscribe on a random broker node, so that they spread over a network of
	// brokers (their verzending messages go to the first node that answers).
	StompRandomize setup.Bool `envconfig:"BRP_STOMP_RANDOMIZE" default:"true"`

	lev *levering.Config
}

// newConfig binds the variables to lev's fields (and the broker's to lev.Broker's).
func newConfig(lev *levering.Config) *config {
	c := &config{
		Queue:           (*setup.Queue)(&lev.Queue),
		VerzendingQueue: (*setup.Queue)(&lev.VerzendingQueue),
		DeadLetterQueue: (*setup.Queue)(&lev.DeadLetterQueue),
		Excluded:        (*setup.List)(&lev.Excluded),
		FoutPolicy:      (*string)(&lev.FoutPolicy),
		Workers:         (*setup.Positive)(&lev.Workers),
		Batch:           (*setup.Positive)(&lev.Batch),
		Prefetch:        (*setup.Positive)(&lev.Prefetch),
		BatchTimeout:    (*setup.Seconds)(&lev.BatchTimeout),
		lev:             lev,
	}
	c.BindBroker(&lev.Broker)
	return c
}

func main() { setup.Main("mutatielevering", run, exitCode) }

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
	if len(args) == 1 {
		switch args[0] {
		case "-h", "-help", "--help", "help":
			defaults := levering.Config{}.WithDefaults()
			defaults.Broker = defaults.Broker.WithDefaults()
			return setup.Usage(stdout, strings.TrimPrefix(errUsage.Error(), "usage: "), newConfig(&defaults))
		case "--version", "version":
			_, err := fmt.Fprintln(stdout, "mutatielevering", setup.BuildInfo())
			return err
		}
	}
	cfg := newConfig(&levering.Config{})
	if err := setup.Load(cfg); err != nil {
		return err
	}
	if err := cfg.lev.Validate(); err != nil {
		return setup.Explain(err, cfg)
	}
	if len(args) > 0 {
		return errUsage
	}
	log := cfg.Logger(stderr)
	bcfg, err := cfg.Broker()
	if err != nil {
		return err
	}
	bcfg.RandomStart = bool(cfg.StompRandomize)
	// The probe listener answers from the start: a liveness probe sees the process run while
	// it waits for its database and broker.
	probe := &setup.Starting{}
	probe.Waiting("database")
	if _, err := setup.Serve(ctx, cfg.HTTPAddr, probe, log); err != nil {
		return err
	}
	db, err := setup.OpenDB(ctx, cfg.DatabaseURL, cfg.Session("mutatielevering"), log)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer db.Close()
	if err := schema.Check(ctx, db.DB); err != nil {
		return err
	}
	probe.Waiting("broker")
	if err := setup.CheckBroker(ctx, bcfg, log); err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	lcfg := *cfg.lev
	lcfg.Registerer, lcfg.Broker = reg, bcfg
	lcfg.Hooks = levering.Hooks{
		AfterLock:       func(context.Context, []int64) error { fault.At("mutatielevering.after_lock"); return nil },
		AfterVerzending: func(context.Context, []int64) error { fault.At("mutatielevering.after_verzending"); return nil },
		AfterCommit:     func(context.Context, []int64) error { fault.At("mutatielevering.after_db_commit"); return nil },
	}
	c, err := levering.New(db, lcfg, log)
	if err != nil {
		return err
	}
	mux := setup.Mux(reg, func() map[string]any {
		subscribed, verzending := c.BrokerNodes()
		return map[string]any{"broker_node": subscribed, "verzending_node": verzending}
	}, setup.Check{Name: "database", Check: db.PingContext},
		setup.Check{Name: "broker", Check: func(context.Context) error {
			if !c.Connected() {
				return errors.New("not subscribed to the publication queue")
			}
			return nil
		}},
		setup.Check{Name: "batches", Check: func(context.Context) error { return c.Stuck() }})
	probe.Set(mux)
	return c.Run(ctx)
}
