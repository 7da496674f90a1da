// Command publicatie runs the publisher of administratieve handelingen; `publicatie migrate`
// applies the schema and exits. Settings come from the environment (docs/contract.md section 2).
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
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/brp/levering/broker"
	"github.com/brp/levering/cmd/internal/setup"
	"github.com/brp/levering/handeling"
	"github.com/brp/levering/internal/dbsession"
	"github.com/brp/levering/internal/fault"
	"github.com/brp/levering/operate"
	"github.com/brp/levering/publicatie"
	"github.com/brp/levering/schema"
)

// config is the environment the command owns; vars are the variables of package
// publicatie's settings.
type config struct {
	setup.Common
	setup.Operate
	// MigrateWait bounds how long `publicatie migrate` waits for the database to answer: a
	// deploy pipeline or Helm hook must fail, not hang, when it is unreachable.
	MigrateWait setup.Millis     `envconfig:"BRP_MIGRATE_WAIT" default:"5m" max:"24h"`
	HTTPAddr    setup.ListenAddr `envconfig:"BRP_HTTP_ADDR" default:"127.0.0.1:9464"`
	// The publisher takes the first broker node that answers, in the order listed.
	StompRandomize setup.Bool `envconfig:"BRP_STOMP_RANDOMIZE" default:"false"`

	pub publicatie.Config // what vars set
}

// vars binds the variables to pub's fields (and the broker's to pub.Broker's): unset, a field
// stays zero and publicatie.New takes its default. Package publicatie owns those defaults and
// the rules of their values.
func vars(pub *publicatie.Config) []setup.Var {
	const prefix = "BRP_LEVERING_ADMHNDPUBLICATIE_"
	return append(setup.BrokerVars(&pub.Broker), []setup.Var{
		{Name: prefix + "DELAY", Value: (*setup.Millis)(&pub.Delay)},
		{Name: prefix + "LIMIT", Value: (*setup.Positive)(&pub.Limit)},
		{Name: prefix + "MAXINLEVERING", Value: (*setup.Positive)(&pub.MaxInLevering)},
		{Name: prefix + "VIEWSIZE", Value: (*setup.Positive)(&pub.ViewSize)},
		{Name: prefix + "VIEWBYTES", Value: (*setup.Bytes)(&pub.ViewBytes)},
		{Name: prefix + "PERSONCAP", Value: (*setup.Positive)(&pub.PersonCap)},
		{Name: prefix + "GROUPSIZE", Value: (*setup.Positive)(&pub.GroupSize)},
		{Name: prefix + "GROUPBYTES", Value: (*setup.Bytes)(&pub.GroupBytes)},
		{Name: prefix + "QUEUE", Value: (*setup.Queue)(&pub.Queue)},
		{Name: prefix + "EXCLUDED", Value: (*setup.List)(&pub.Excluded)},
		{Name: prefix + "FOUTPOLICY", Value: (*setup.Text)(&pub.FoutPolicy)},
		{Name: prefix + "CLUSTER", Value: (*setup.Name)(&pub.Cluster)},
		{Name: prefix + "WARTEZEIT", Value: (*setup.Seconds)(&pub.LeaseTimeout)},
		{Name: prefix + "STANDALONE", Value: (*setup.Bool)(&pub.Standalone)},
		{Name: prefix + "REDELIVERYTIMEOUT", Value: (*setup.Seconds)(&pub.RedeliveryTimeout)},
		{Name: prefix + "MAXLEAD", Value: (*setup.Millis)(&pub.MaxLead)},
		{Name: prefix + "LEADCOVER", Value: (*setup.Share)(&pub.LeadCover)},
		{Name: prefix + "MAXWAIT", Value: (*setup.Millis)(&pub.MaxWait)},
		{Name: prefix + "PERSONLESSGRACE", Value: (*setup.Seconds)(&pub.PersonlessGrace)},
		{Name: prefix + "WAKEUP", Value: (*setup.Not)(&pub.FixedDelay)},
	}...)
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
	defaults := publicatie.Config{}.WithDefaults()
	defaults.Broker = defaults.Broker.WithDefaults()
	usage := strings.TrimPrefix(errUsage.Error(), "usage: ")
	if done, err := setup.HelpOrVersion(args, stdout, command, usage, &config{}, vars(&defaults)); done {
		return err
	}
	cfg := &config{}
	if err := setup.Load(cfg, vars(&cfg.pub)...); err != nil {
		return err
	}
	cfg.pub.Layout = handeling.Layout(cfg.Layout)
	if err := cfg.pub.Validate(); err != nil {
		return setup.Explain(err, &cfg.pub, vars(&cfg.pub)...)
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
			return operate.CLI{DB: db, Config: cfg.overview(), Actor: door()}.Run(ctx, args, stdout)
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
	return operate.OverviewConfig{Layout: p.Layout, Excluded: p.Excluded, FoutPolicy: p.FoutPolicy, Cluster: p.Cluster}
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
	applied, err := schema.MigrateWith(ctx, db.DB, schema.Config{Log: log, Layout: cfg.pub.Layout})
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	fmt.Fprintf(stdout, "schema up to date (%d migrations and definitions files applied now)\n", len(applied))
	for _, name := range applied {
		log.Info("migration applied", slog.String("migration", name))
	}
	return nil
}

// OperatorTimeout bounds how long an operator command (status, fout ..., migrate status) waits
// for its database: past it, the command gives up with exit 1, naming what it waited for.
const OperatorTimeout = 20 * time.Second

// operator runs an operator command's f on the database once it answered within
// OperatorTimeout: an operator waits for an answer, not for a database that is away. f itself
// is not cut off as a whole: each of its statements is bounded by the session's
// statement_timeout, and a bulk retry or release of 50,000 handelingen goes on, batch by
// batch, as long as it takes (an interrupt stops it between batches; what it did stays done).
func operator(ctx context.Context, cfg *config, log *slog.Logger, f func(context.Context, *sqlx.DB) error) error {
	octx, cancel := context.WithTimeout(ctx, OperatorTimeout)
	defer cancel()
	db, err := setup.OpenDB(octx, cfg.DatabaseURL, cfg.Session(command), log)
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
		return printMigrations(ctx, db, cfg.pub.Layout, stdout)
	})
}

func printMigrations(ctx context.Context, db *sqlx.DB, l handeling.Layout, stdout io.Writer) error {
	st, err := schema.Status(ctx, db.DB, l)
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
	for _, d := range st.StaleDefinitions {
		fmt.Fprintf(stdout, "      definitions/%-38s pending (its text changed)\n", d)
	}
	for _, ix := range st.InvalidIndexes {
		fmt.Fprintf(stdout, "invalid index %s (an interrupted build): publicatie migrate builds it again\n", ix)
	}
	if n := st.Pending(); n > 0 {
		fmt.Fprintf(stdout, "%d migrations and definitions files pending: run publicatie migrate\n", n)
	} else {
		fmt.Fprintln(stdout, "schema up to date")
	}
	return nil
}

func serve(ctx context.Context, cfg *config, log *slog.Logger) error {
	bcfg, err := cfg.Broker(cfg.pub.Broker)
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
	start := setup.Start{Command: command, Common: cfg.Common, HTTPAddr: cfg.HTTPAddr, Broker: bcfg, Log: log}
	return start.Run(ctx, func(ctx context.Context, db *sqlx.DB, reg *prometheus.Registry) (*setup.Service, error) {
		pcfg.Registerer = reg
		reg.MustRegister(publicatie.NewBacklogCollector(db, pcfg.Layout, pcfg.Excluded, pcfg.MaxInLevering))
		pub, err := publicatie.New(db, pcfg, log)
		if err != nil {
			return nil, err
		}
		checks, err := broker.NewDialer(bcfg)
		if err != nil {
			return nil, err
		}
		pages := operate.Handler(db, cfg.overview(), func() (string, bool) { return pub.Config().Instance, pub.Leader() }, log)
		return &setup.Service{
			Info: func() map[string]any {
				return map[string]any{"leader": pub.Leader(), "instance": pub.Config().Instance, "broker_node": pub.BrokerNode()}
			},
			Checks: []setup.Check{{Name: "broker", Check: setup.BrokerCheck(checks)}},
			Routes: func(mux *http.ServeMux) {
				mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
					st, err := pub.Status(r.Context())
					w.Header().Set("Content-Type", "application/json")
					if err != nil {
						w.WriteHeader(http.StatusServiceUnavailable)
					}
					_ = json.NewEncoder(w).Encode(st)
				})
				// The pages with persons have a listener of their own, behind authentication;
				// the probe listener (often open to the whole network for Prometheus) only says
				// where they went.
				mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
					http.Error(w, "The operator pages are served on BRP_OPERATE_ADDR, not here.", http.StatusNotFound)
				})
			},
			Run: func(ctx context.Context) error {
				if _, err := setup.ServeOperate(ctx, cfg.OperateAddr, guard, pages, log); err != nil {
					return err
				}
				return pub.Run(ctx)
			},
		}, nil
	})
}
