// Command demo is the project's main job on a developer machine: it loads a demo workload into
// a database of its own, starts one publicatie and several mutatielevering processes (the real
// binaries, found next to this one), shows progress, reads the verzending queue back as an
// afnemer would and ends with a one-screen summary and the contract's checks. scripts/demo.sh
// starts the services, builds the binaries and runs it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/brp/levering/broker"
	"github.com/brp/levering/cmd/internal/setup"
	"github.com/brp/levering/handeling"
	"github.com/brp/levering/internal/load"
	"github.com/brp/levering/internal/rig"
	"github.com/brp/levering/publicatie"
	"github.com/brp/levering/schema"
)

type options struct {
	n, personen, consumers int
	timeout                time.Duration
	logDir                 string
	layout                 string
}

func main() {
	var o options
	flag.IntVar(&o.n, "n", 3000, "handelingen to load")
	flag.IntVar(&o.personen, "personen", 300, "distinct persons")
	flag.IntVar(&o.consumers, "consumers", 3, "mutatielevering processes")
	flag.DurationVar(&o.timeout, "timeout", 5*time.Minute, "give up after this long")
	flag.StringVar(&o.logDir, "logs", ".run/demo", "where the processes' logs go")
	flag.StringVar(&o.layout, "layout", "contract", "database layout: contract (admhnd, admhnd_persoon) or kern (the BRP kern schema, docs/kern.md)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options, out io.Writer) error {
	var common setup.Common
	var bcfg broker.Config
	if err := setup.Load(&common, setup.BrokerVars(&bcfg)...); err != nil {
		return err
	}
	bcfg, err := common.Broker(bcfg)
	if err != nil {
		return err
	}

	layout, err := handeling.ParseLayout(o.layout)
	if err != nil {
		return fmt.Errorf("-layout: %w", err)
	}
	db, dbURL, err := demoDB(ctx, string(common.DatabaseURL), layout)
	if err != nil {
		return err
	}
	defer db.Close()
	hs := load.Generate(load.Spec{N: o.n, Personen: o.personen, Multi: 1.0 / 3, Excluded: 0.05, NoPerson: 3, Seed: uint64(time.Now().UnixNano())})
	insert := load.Insert
	if layout == handeling.Kern {
		insert = load.InsertKern
	}
	if err := insert(ctx, db, hs); err != nil {
		return err
	}
	want, wantFout, excluded := 0, 0, 0
	for _, h := range hs {
		switch {
		case h.Soort == load.ExcludedSoort:
			excluded++
		case len(h.Personen) == 0:
			wantFout++
		default:
			want++
		}
	}
	fmt.Fprintf(out, "loaded %d handelingen over %d persons (%d excluded, %d without persons) into %s, %s layout\n",
		len(hs), o.personen, excluded, wantFout, rig.Redact(dbURL), layout.Or())

	q := rig.QueuesNamed("/queue/brp.demo." + strconv.FormatInt(time.Now().Unix(), 36))
	reader, err := rig.Read(bcfg, q.Verzending)
	if err != nil {
		return err
	}
	defer reader.Close()

	if err := os.MkdirAll(o.logDir, 0o755); err != nil {
		return err
	}
	env := rig.Env(bcfg, dbURL, q, append(rig.Inherit("BRP_"), "BRP_DATABASE_LAYOUT="+string(layout.Or()))...)
	var procs []*rig.Proc
	defer func() { stopAll(procs, out) }()
	self, _ := os.Executable()
	bin := filepath.Dir(self)
	start := time.Now()
	launch := func(name, command string) error {
		p, err := rig.Cmd{Name: name, Bin: filepath.Join(bin, command), Env: env, LogFile: filepath.Join(o.logDir, name+".log")}.Start()
		if err != nil {
			return fmt.Errorf("%w (build it with scripts/demo.sh)", err)
		}
		procs = append(procs, p)
		return nil
	}
	for i := range o.consumers {
		if err := launch(fmt.Sprintf("mutatielevering-%d", i+1), "mutatielevering"); err != nil {
			return err
		}
	}
	if err := launch("publicatie", "publicatie"); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for _, p := range procs {
		if err := p.WaitReady(wctx); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "started 1 publicatie and %d mutatielevering processes, all ready (logs in %s)\n", o.consumers, o.logDir)

	deadline := time.After(o.timeout)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	var st status
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return fmt.Errorf("not done after %v: %+v", o.timeout, st)
		case <-tick.C:
		}
		if st, err = readStatus(ctx, db, layout); err != nil {
			fmt.Fprintf(out, "  (database: %v)\n", err)
			continue
		}
		el := time.Since(start).Seconds()
		fmt.Fprintf(out, "  %5.1fs  geleverd %5d/%d  in_levering %4d  fout %d  te leveren %5d  verzending read %5d  %6.0f/s\n",
			el, st.geleverd, want, st.inLevering, st.fout, st.open-excluded, reader.Count(), float64(st.geleverd)/el)
		if st.geleverd == want && st.fout == wantFout && reader.Count() >= want {
			break
		}
	}
	elapsed := time.Since(start)
	byID := map[int64]load.Handeling{}
	for _, h := range hs {
		byID[h.ID] = h
	}
	rep := load.CheckOrder(reader.IDs(), byID)
	var touched int
	args := []any{load.ExcludedSoort}
	if layout == handeling.Kern {
		args = nil // soort 37
	}
	if err := db.GetContext(ctx, &touched, statusSQL[layout.Or()].touched, args...); err != nil {
		return err
	}
	stopAll(procs, out)
	procs = nil

	ok := len(rep.Violations) == 0 && touched == 0 && rep.Distinct == want
	fmt.Fprintf(out, `
== summary ==========================================================
handelingen loaded        %d (%d persons, a third multi-person)
geleverd                  %d of %d
fout (no persons)         %d of %d
excluded, untouched       %d of %d
verzending messages       %d (%d distinct, %d duplicates)
per-person order          %s
groups                    %s
elapsed                   %v (%.0f handelingen/s)
=====================================================================
`, len(hs), o.personen, st.geleverd, want, st.fout, wantFout, excluded-touched, excluded,
		rep.Messages, rep.Distinct, rep.Duplicates, verdict(rep.Violations), groupSize(),
		elapsed.Round(time.Millisecond), float64(st.geleverd)/elapsed.Seconds())
	if !ok {
		return errors.New("the contract's checks failed (see summary)")
	}
	return nil
}

func verdict(v []string) string {
	if len(v) == 0 {
		return "OK: every person's handelingen arrived oldest first"
	}
	return fmt.Sprintf("VIOLATED: %v", v)
}

type status struct{ geleverd, inLevering, fout, open int }

// statusSQL are the demo's own reads per layout: the counts by status (te leveren counts the
// excluded soort too) and how many of the excluded soort the service touched (the kern layout
// registers it as soort 37 in status 2).
var statusSQL = map[handeling.Layout]struct{ counts, touched string }{
	handeling.Contract: {
		counts: `select count(*) filter (where statuslev = 'geleverd'), count(*) filter (where statuslev = 'in_levering'),
	count(*) filter (where statuslev = 'fout'), count(*) filter (where statuslev is null)
from admhnd`,
		touched: `select count(*) from admhnd where soort = $1 and statuslev is not null`,
	},
	handeling.Kern: {
		counts: `select count(*) filter (where statuslev = 4), count(*) filter (where statuslev = 3),
	count(*) filter (where statuslev = 5), count(*) filter (where statuslev in (1, 2))
from kern.admhnd`,
		touched: `select count(*) from kern.admhnd where srt = 37 and (statuslev <> 2 or tslev is not null)`,
	},
}

func readStatus(ctx context.Context, db *sqlx.DB, l handeling.Layout) (status, error) {
	var s status
	err := db.QueryRowxContext(ctx, statusSQL[l.Or()].counts).Scan(&s.geleverd, &s.inLevering, &s.fout, &s.open)
	return s, err
}

// demoDB makes a database of the demo's own afresh on the server of serverURL, with the
// service's schema: on the kern layout over the kern tables bijhouding has
// (rig.BijhoudingKern), as publicatie migrate would.
func demoDB(ctx context.Context, serverURL string, l handeling.Layout) (*sqlx.DB, string, error) {
	if l.Or() == handeling.Contract {
		return rig.CreateDB(ctx, serverURL, "brp_demo")
	}
	db, dbURL, err := rig.CreateBareDB(ctx, serverURL, "brp_demo", rig.BijhoudingKern)
	if err != nil {
		return nil, "", err
	}
	if _, err := schema.MigrateWith(ctx, db.DB, schema.Config{Layout: l}); err != nil {
		db.Close()
		return nil, "", err
	}
	return db, dbURL, nil
}

// stopAll sends SIGTERM to every process and reports how each ended.
func stopAll(procs []*rig.Proc, out io.Writer) {
	if err := rig.StopAll(15*time.Second, procs...); err != nil {
		fmt.Fprintln(out, err)
	}
}

// groupSize says how many handelingen a publication carried at most: the setting the demo's
// processes inherit, or the publisher's default.
func groupSize() string {
	const name = "BRP_LEVERING_ADMHNDPUBLICATIE_GROUPSIZE"
	if v := os.Getenv(name); v != "" {
		return "up to " + v + " handelingen a publication (" + name + ")"
	}
	return fmt.Sprintf("up to %d handelingen a publication (the default; %s=1 sends each alone)", publicatie.DefaultGroupSize, name)
}
