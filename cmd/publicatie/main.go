// Command publicatie runs the publisher of administratieve handelingen; `publicatie migrate`
// applies the schema and exits. Settings come from the environment (CONTRACT.md section 2).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/brp/levering/broker"
	"github.com/brp/levering/cmd/internal/setup"
	"github.com/brp/levering/internal/dbsession"
	"github.com/brp/levering/internal/fault"
	"github.com/brp/levering/operate"
	"github.com/brp/levering/publicatie"
	"github.com/brp/levering/schema"
)

// config is the environment. The variables after HTTPAddr set the fields of pub with the same
// name (setup.Explain relies on it); unset, a field stays zero and publicatie.New takes its
// default: package publicatie owns those defaults and the rules of their values.
type config struct {
	setup.Common
	setup.Operate
	// MigrateWait bounds how long `publicatie migrate` waits for the database to answer: a
	// deploy pipeline or Helm hook must fail, not hang, when it is unreachable.
	MigrateWait       setup.Millis     `envconfig:"BRP_MIGRATE_WAIT" default:"5m" max:"24h"`
	HTTPAddr          setup.ListenAddr `envconfig:"BRP_HTTP_ADDR" default:"127.0.0.1:9464"`
	Delay             *setup.Millis    `envconfig:"BRP_LEVERING_ADMHNDPUBLICATIE_DELAY" max:"1h"`
	Limit             *setup.Positive  `envconfig:"BRP_LEVERING_ADMHNDPUBLICATIE_LIMIT" max:"1000000"`
	MaxInLevering     *setup.Positive  `envconfig:"BRP_LEVERING_ADMHNDPUBLICATIE_MAXINLEVERING" max:"1000000"`
	ViewSize          *setup.Positive  `envconfig:"BRP_LEVERING_ADMHNDPUBLICATIE_VIEWSIZE" max:"10000000"`
	ViewBytes         *setup.Bytes     `envconfig:"BRP_LEVERING_ADMHNDPUBLICATIE_VIEWBYTES" max:"68719476736"`
	PersonCap         *setup.Positive  `envconfig:"BRP_LEVERING_ADMHNDPUBLICATIE_PERSONCAP" max:"10000000"`
	GroupSize         *setup.Positive  `envconfig:"BRP_LEVERING_ADMHNDPUBLICATIE_GROUPSIZE" max:"10000"`
	GroupBytes        *setup.Bytes     `envconfig:"BRP_LEVERING_ADMHNDPUBLICATIE_GROUPBYTES" max:"67108864"`
	Queue             *setup.Queue     `envconfig:"BRP_LEVERING_ADMHNDPUBLICATIE_QUEUE"`
	Excluded          *setup.List      `envconfig:"BRP_LEVERING_ADMHNDPUBLICATIE_EXCLUDED"`
	FoutPolicy        *string          `envconfig:"BRP_LEVERING_ADMHNDPUBLICATIE_FOUTPOLICY"`
	Cluster           *setup.Name      `envconfig:"BRP_LEVERING_ADMHNDPUBLICATIE_CLUSTER"`
	Wartezeit         *setup.Seconds   `envconfig:"BRP_LEVERING_ADMHNDPUBLICATIE_WARTEZEIT" max:"1h"`
	Standalone        *setup.Bool      `envconfig:"BRP_LEVERING_ADMHNDPUBLICATIE_STANDALONE"`
	RedeliveryTimeout *setup.Seconds   `envconfig:"BRP_LEVERING_ADMHNDPUBLICATIE_REDELIVERYTIMEOUT" max:"24h"`
	MaxLead           *setup.Millis    `envconfig:"BRP_LEVERING_ADMHNDPUBLICATIE_MAXLEAD" max:"1m"`
	FixedDelay        *setup.Not       `envconfig:"BRP_LEVERING_ADMHNDPUBLICATIE_WAKEUP"`
	// The publisher takes the first broker node that answers, in the order listed.
	StompRandomize setup.Bool `envconfig:"BRP_STOMP_RANDOMIZE" default:"false"`

	pub *publicatie.Config
}

// newConfig binds the variables to pub's fields (and the broker's to pub.Broker's).
func newConfig(pub *publicatie.Config) *config {
	c := &config{
		Delay:             (*setup.Millis)(&pub.Delay),
		Limit:             (*setup.Positive)(&pub.Limit),
		MaxInLevering:     (*setup.Positive)(&pub.MaxInLevering),
		ViewSize:          (*setup.Positive)(&pub.ViewSize),
		ViewBytes:         (*setup.Bytes)(&pub.ViewBytes),
		PersonCap:         (*setup.Positive)(&pub.PersonCap),
		GroupSize:         (*setup.Positive)(&pub.GroupSize),
		GroupBytes:        (*setup.Bytes)(&pub.GroupBytes),
		Queue:             (*setup.Queue)(&pub.Queue),
		Excluded:          (*setup.List)(&pub.Excluded),
		FoutPolicy:        (*string)(&pub.FoutPolicy),
		Cluster:           (*setup.Name)(&pub.Cluster),
		Wartezeit:         (*setup.Seconds)(&pub.Wartezeit),
		Standalone:        (*setup.Bool)(&pub.Standalone),
		RedeliveryTimeout: (*setup.Seconds)(&pub.RedeliveryTimeout),
		MaxLead:           (*setup.Millis)(&pub.MaxLead),
		FixedDelay:        (*setup.Not)(&pub.FixedDelay),
		pub:               pub,
	}
	c.BindBroker(&pub.Broker)
	return c
}

func main() { setup.Main(command, run, exitCode) }

// command names this program in its database sessions (dbsession.AppName).
const command = "publicatie"

var errUsage = errors.New("usage: publicatie [migrate [status] | status | fout list|show|retry|release ... | --help | --version]")

func exitCode(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, setup.ErrConfig), errors.Is(err, errUsage), errors.Is(err, operate.ErrUsage),
		errors.Is(err, publicatie.ErrConfig):
		return 2
	}
	return 1
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 1 {
		switch args[0] {
		case "-h", "-help", "--help", "help":
			defaults := publicatie.Config{}.WithDefaults()
			defaults.Broker = defaults.Broker.WithDefaults()
			return setup.Usage(stdout, strings.TrimPrefix(errUsage.Error(), "usage: "), newConfig(&defaults))
		case "--version", "version":
			_, err := fmt.Fprintln(stdout, command, setup.BuildInfo())
			return err
		}
	}
	cfg := newConfig(&publicatie.Config{})
	if err := setup.Load(cfg); err != nil {
		return err
	}
	if err := cfg.pub.Validate(); err != nil {
		return setup.Explain(err, cfg)
	}
	log := cfg.Logger(stderr)
	cmd := ""
	if len(args) > 0 {
		cmd = args[0]
	}
	switch {
	case cmd == "migrate" && len(args) == 1:
		return migrate(ctx, cfg, log, stdout)
	case cmd == "migrate" && len(args) == 2 && args[1] == "status":
		return migrateStatus(ctx, cfg, log, stdout)
	case cmd == "" || cmd == "run":
		return serve(ctx, cfg, log)
	case cmd == "status" || cmd == "fout":
		return operator(ctx, cfg, log, func(ctx context.Context, db *sqlx.DB) error {
			return operate.CLI{DB: db, Config: cfg.overview(), Door: door()}.Run(ctx, args, stdout)
		})
	}
	return errUsage
}

// door names who runs an operator command: $SUDO_USER, else $USER.
func door() string {
	if d := os.Getenv("SUDO_USER"); d != "" {
		return d
	}
	return os.Getenv("USER")
}

func (cfg *config) overview() operate.OverviewConfig {
	p := cfg.pub.WithDefaults()
	return operate.OverviewConfig{Excluded: p.Excluded, FoutPolicy: p.FoutPolicy, Cluster: p.Cluster}
}

// migrate runs without statement and lock timeouts: a migration may build an index on a large
// table, and waits for a concurrent migrate's advisory lock. It waits for the database to
// answer at most BRP_MIGRATE_WAIT (the migration itself is not bounded by it), then fails
// with one line naming the database, its URL without the password.
func migrate(ctx context.Context, cfg *config, log *slog.Logger, stdout io.Writer) error {
	session := cfg.Session(command)
	session.StatementTimeout, session.LockTimeout = 0, 0
	wait := time.Duration(cfg.MigrateWait)
	wctx, cancel := context.WithTimeout(ctx, wait)
	db, err := setup.OpenDB(wctx, cfg.DatabaseURL, session, log)
	cancel()
	if err != nil {
		if ctx.Err() == nil && errors.Is(wctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("migrate: waited %s (BRP_MIGRATE_WAIT) for the database at %s: %w",
				wait, dbsession.Redact(string(cfg.DatabaseURL)), err)
		}
		return err
	}
	defer db.Close()
	applied, err := schema.MigrateWith(ctx, db.DB, schema.Config{Log: log})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "schema up to date (%d migrations applied now)\n", len(applied))
	for _, name := range applied {
		log.Info("migration applied", slog.String("migration", name))
	}
	return nil
}

// OperatorTimeout bounds an operator command (status, fout ..., migrate status): past it, the
// command gives up with exit 1, naming what it waited for.
const OperatorTimeout = 20 * time.Second

// operator runs an operator command's f on the database, all of it within OperatorTimeout:
// an operator waits for an answer, not for a database that is away.
func operator(ctx context.Context, cfg *config, log *slog.Logger, f func(context.Context, *sqlx.DB) error) error {
	ctx, cancel := context.WithTimeout(ctx, OperatorTimeout)
	defer cancel()
	db, err := setup.OpenDB(ctx, cfg.DatabaseURL, cfg.Session(command), log)
	if err != nil {
		return err
	}
	defer db.Close()
	return f(ctx, db)
}

// migrateStatus prints which migrations the database has, and any index an interrupted build
// left invalid (the next migrate builds it again).
func migrateStatus(ctx context.Context, cfg *config, log *slog.Logger, stdout io.Writer) error {
	return operator(ctx, cfg, log, func(ctx context.Context, db *sqlx.DB) error {
		return printMigrations(ctx, db, stdout)
	})
}

func printMigrations(ctx context.Context, db *sqlx.DB, stdout io.Writer) error {
	st, err := schema.Status(ctx, db.DB)
	if err != nil {
		return err
	}
	for _, m := range st.Migrations {
		at := "pending"
		if !m.AppliedAt.IsZero() {
			at = "applied " + m.AppliedAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(stdout, "%04d  %-50s %s\n", m.Version, m.Name, at)
	}
	if st.Current > st.Latest {
		fmt.Fprintf(stdout, "database at %04d, ahead of this binary (%04d): a newer release migrated it\n", st.Current, st.Latest)
	}
	for _, ix := range st.InvalidIndexes {
		fmt.Fprintf(stdout, "invalid index %s (an interrupted build): publicatie migrate builds it again\n", ix)
	}
	if n := st.Pending(); n > 0 {
		fmt.Fprintf(stdout, "%d migrations pending: run publicatie migrate\n", n)
	} else {
		fmt.Fprintln(stdout, "schema up to date")
	}
	return nil
}

// brokerCheck dials the broker through d (at most every 2 s, within 2 s; in between it
// repeats the last answer): the publisher holds a connection only while it publishes, so
// readiness asks the broker itself. d is a Dialer of its own, so that the nodes a check
// reaches do not move the publisher's.
func brokerCheck(d *broker.Dialer) func(context.Context) error {
	var mu sync.Mutex
	var last time.Time
	var lastErr error
	return func(ctx context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		if time.Since(last) < 2*time.Second {
			return lastErr
		}
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		c, err := d.Dial(ctx)
		if err == nil {
			c.Disconnect()
		}
		last, lastErr = time.Now(), err
		return err
	}
}

func serve(ctx context.Context, cfg *config, log *slog.Logger) error {
	bcfg, err := cfg.Broker()
	if err != nil {
		return err
	}
	bcfg.RandomStart = bool(cfg.StompRandomize)
	guard, err := cfg.Operate.Guard(log)
	if err != nil {
		return err
	}
	session := cfg.Session(command)
	listenDSN, err := dbsession.DSN(string(cfg.DatabaseURL), session)
	if err != nil {
		return fmt.Errorf("%w: BRP_DATABASE_URL: %s", setup.ErrConfig, dbsession.Redact(err.Error()))
	}
	pcfg := cfg.pub.WithDefaults()
	pcfg.ListenURL, pcfg.ListenDialer, pcfg.Broker = listenDSN, dbsession.ListenerDialer(session), bcfg
	pcfg.Hooks = publicatie.Hooks{
		AfterMark:         func(context.Context, []int64) error { fault.At("publicatie.after_mark"); return nil },
		AfterBrokerCommit: func(context.Context, []int64) error { fault.At("publicatie.after_broker_commit"); return nil },
		RoundCommitted:    func([]int64) { fault.At("publicatie.after_db_commit") },
	}
	// The probe listener answers from the start: a liveness probe sees the process run while
	// it waits for its database and broker.
	probe := &setup.Starting{}
	probe.Waiting("database")
	if _, err := setup.Serve(ctx, cfg.HTTPAddr, probe, log); err != nil {
		return err
	}
	db, err := setup.OpenDB(ctx, cfg.DatabaseURL, session, log)
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
	pcfg.Registerer = reg
	reg.MustRegister(publicatie.NewBacklogCollector(db, pcfg.Excluded, pcfg.MaxInLevering))
	pub, err := publicatie.New(db, pcfg, log)
	if err != nil {
		return err
	}
	checks, err := broker.NewDialer(bcfg)
	if err != nil {
		return err
	}
	mux := setup.Mux(reg, func() map[string]any {
		return map[string]any{"leader": pub.Leader(), "instance": pub.Config().Instance, "broker_node": pub.BrokerNode()}
	}, setup.Check{Name: "database", Check: db.PingContext}, setup.Check{Name: "broker", Check: brokerCheck(checks)})
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		st, err := pub.Status(r.Context())
		w.Header().Set("Content-Type", "application/json")
		if err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_ = json.NewEncoder(w).Encode(st)
	})
	// The pages with persons have a listener of their own, behind authentication; the probe
	// listener (often open to the whole network for Prometheus) only says where they went.
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "The operator pages are served on BRP_OPERATE_ADDR, not here.", http.StatusNotFound)
	})
	probe.Set(mux)
	pages := operate.Handler(db, cfg.overview(), func() (string, bool) { return pub.Config().Instance, pub.Leader() }, log)
	if _, err := setup.ServeOperate(ctx, cfg.OperateAddr, guard, pages, log); err != nil {
		return err
	}
	return pub.Run(ctx)
}
