package setup

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/brp/levering/broker"
	"github.com/brp/levering/handeling"
	"github.com/brp/levering/schema"
)

// HelpOrVersion answers the arguments --help (usage, then every variable with its default:
// give vars bound to a Config holding the package's defaults) and --version for command;
// done says it did, and the command has nothing else to do.
func HelpOrVersion(args []string, stdout io.Writer, command, usage string, tagged any, vars []Var) (done bool, err error) {
	if len(args) != 1 {
		return false, nil
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		return true, writeUsage(stdout, usage, tagged, vars...)
	case "--version", "version":
		_, err := fmt.Fprintln(stdout, command, BuildInfo())
		return true, err
	}
	return false, nil
}

// Service is a long-running command's work, made once its database and broker are there.
type Service struct {
	// Run does the work until ctx ends.
	Run func(ctx context.Context) error
	// Info adds to /readyz's body (nil: nothing).
	Info func() map[string]any
	// Checks are the service's readiness conditions, after the database's.
	Checks []Check
	// Routes adds the command's own handlers to the probe listener (nil: none).
	Routes func(*http.ServeMux)
}

// Start is how a long-running command starts.
type Start struct {
	// Command names the program in its database sessions (dbsession.AppName).
	Command string
	Common  Common
	// HTTPAddr is the probe listener's address (health, readiness, metrics).
	HTTPAddr ListenAddr
	Broker   broker.Config
	Log      *slog.Logger
}

// Run starts a long-running command and runs it until ctx ends. The probe listener comes
// first and answers from the first moment: a liveness probe sees the process run while it
// waits for its database and broker. Then the database, waited for (a ctx that ends meanwhile
// is a clean stop), its schema check and the broker check; build makes the service with the
// metrics registry (the command's collectors and hooks are its part); the probe listener's
// real handler goes in place (Mux: the database's and the service's checks) and the service
// runs.
func (s Start) Run(ctx context.Context, build func(ctx context.Context, db *sqlx.DB, reg *prometheus.Registry) (*Service, error)) error {
	probe := &startingProbe{}
	probe.Waiting("database")
	if _, err := serveProbe(ctx, s.HTTPAddr, probe, s.Log); err != nil {
		return err
	}
	db, err := OpenDB(ctx, s.Common.DatabaseURL, s.Common.Session(s.Command), s.Log)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer db.Close()
	if err := schema.Check(ctx, db.DB, handeling.Layout(s.Common.Layout)); err != nil {
		return err
	}
	if err := waitRights(ctx, db, handeling.Layout(s.Common.Layout), probe, s.Log); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	probe.Waiting("broker")
	if err := checkBroker(ctx, s.Broker, s.Log); err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	svc, err := build(ctx, db, reg)
	if err != nil {
		return err
	}
	mux := Mux(reg, svc.Info, append([]Check{{Name: "database", Check: db.PingContext}}, svc.Checks...)...)
	if svc.Routes != nil {
		svc.Routes(mux)
	}
	probe.Set(mux)
	return svc.Run(ctx)
}

// rightsRetry is how often a process that lacks rights looks again whether a DBA granted them.
const rightsRetry = 5 * time.Second

// waitRights waits until the session's role has every right the layout's grants file gives the
// runtime role (schema.MissingRights): until then the process is not ready, its /readyz and
// one log line (again when what is missing changes) name the missing grants. A process that
// started anyway would fail every round on "permission denied" and look like something else.
func waitRights(ctx context.Context, db *sqlx.DB, l handeling.Layout, probe *startingProbe, log *slog.Logger) error {
	var said string
	for {
		missing, err := schema.MissingRights(ctx, db.DB, l)
		if err != nil {
			return err
		}
		if len(missing) == 0 {
			if said != "" {
				log.Info("the database role has every right the service needs now")
			}
			return nil
		}
		names := make([]string, len(missing))
		for i, r := range missing {
			names[i] = "grant " + r.String()
		}
		list := strings.Join(names, "; ")
		probe.WaitingFor("database rights", "missing: "+list+"; see schema/grants")
		if list != said {
			var role string
			_ = db.GetContext(ctx, &role, `select current_user`)
			log.Error("the database role lacks rights the service needs; not ready until they are granted (schema/grants)",
				slog.String("role", role), slog.String("missing", list))
			said = list
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(rightsRetry):
		}
	}
}
