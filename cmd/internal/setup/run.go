package setup

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"

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
