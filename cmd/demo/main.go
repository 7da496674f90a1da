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
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/jmoiron/sqlx"
	_ "github.com/lib/pq" // the PostgreSQL driver

	"github.com/brp/levering/broker"
	"github.com/brp/levering/cmd/internal/setup"
	"github.com/brp/levering/internal/dbsession"
	"github.com/brp/levering/internal/load"
	"github.com/brp/levering/schema"
)

type options struct {
	n, personen, consumers int
	timeout                time.Duration
	logDir                 string
}

func main() {
	var o options
	flag.IntVar(&o.n, "n", 3000, "handelingen to load")
	flag.IntVar(&o.personen, "personen", 300, "distinct persons")
	flag.IntVar(&o.consumers, "consumers", 3, "mutatielevering processes")
	flag.DurationVar(&o.timeout, "timeout", 5*time.Minute, "give up after this long")
	flag.StringVar(&o.logDir, "logs", ".run/demo", "where the processes' logs go")
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
	if err := setup.Load(&common); err != nil {
		return err
	}
	bcfg, err := common.Broker()
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	// A database of the demo's own, made afresh, on the configured server.
	dbURL, err := demoDatabase(ctx, string(common.DatabaseURL), common.Session("demo"), log)
	if err != nil {
		return err
	}
	db, err := setup.OpenDB(ctx, setup.DatabaseURL(dbURL), common.Session("demo"), log)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := schema.Migrate(ctx, db.DB); err != nil {
		return err
	}
	hs := load.Generate(load.Spec{N: o.n, Personen: o.personen, Multi: 1.0 / 3, Excluded: 0.05, NoPerson: 3, Seed: uint64(time.Now().UnixNano())})
	if err := load.Insert(ctx, db, hs); err != nil {
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
	fmt.Fprintf(out, "loaded %d handelingen over %d persons (%d excluded, %d without persons) into %s\n",
		len(hs), o.personen, excluded, wantFout, redact(dbURL))

	run := strconv.FormatInt(time.Now().Unix(), 36)
	queue := "/queue/brp.demo." + run + ".admhndpublicatie"
	verzending := "/queue/brp.demo." + run + ".verzending"
	reader, err := readQueue(ctx, bcfg, verzending)
	if err != nil {
		return err
	}
	defer reader.close()

	if err := os.MkdirAll(o.logDir, 0o755); err != nil {
		return err
	}
	env := append(os.Environ(), "BRP_DATABASE_URL="+dbURL, "BRP_LEVERING_ADMHNDPUBLICATIE_QUEUE="+queue,
		"BRP_LEVERING_VERZENDING_QUEUE="+verzending, "BRP_LEVERING_MUTATIELEVERING_DLQ="+queue+".dlq",
		"BRP_HTTP_ADDR=127.0.0.1:0", "BRP_LOG_FORMAT=json")
	var procs []*proc
	defer func() { stopAll(procs, out) }()
	self, _ := os.Executable()
	bin := filepath.Dir(self)
	for i := range o.consumers {
		p, err := startProc(filepath.Join(bin, "mutatielevering"), env, filepath.Join(o.logDir, fmt.Sprintf("mutatielevering-%d.log", i+1)))
		if err != nil {
			return err
		}
		procs = append(procs, p)
	}
	p, err := startProc(filepath.Join(bin, "publicatie"), env, filepath.Join(o.logDir, "publicatie.log"))
	if err != nil {
		return err
	}
	procs = append(procs, p)
	fmt.Fprintf(out, "started 1 publicatie and %d mutatielevering processes (logs in %s)\n", o.consumers, o.logDir)

	start := time.Now()
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
		if st, err = readStatus(ctx, db); err != nil {
			fmt.Fprintf(out, "  (database: %v)\n", err)
			continue
		}
		el := time.Since(start).Seconds()
		fmt.Fprintf(out, "  %5.1fs  geleverd %5d/%d  in_levering %4d  fout %d  te leveren %5d  verzending read %5d  %6.0f/s\n",
			el, st.geleverd, want, st.inLevering, st.fout, st.open-excluded, reader.count(), float64(st.geleverd)/el)
		if st.geleverd == want && st.fout == wantFout && reader.count() >= want {
			break
		}
	}
	elapsed := time.Since(start)
	byID := map[int64]load.Handeling{}
	for _, h := range hs {
		byID[h.ID] = h
	}
	rep := load.CheckOrder(reader.ids(), byID)
	var touched int
	if err := db.GetContext(ctx, &touched, `select count(*) from admhnd where soort = $1 and statuslev is not null`, load.ExcludedSoort); err != nil {
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
elapsed                   %v (%.0f handelingen/s)
=====================================================================
`, len(hs), o.personen, st.geleverd, want, st.fout, wantFout, excluded-touched, excluded,
		rep.Messages, rep.Distinct, rep.Duplicates, verdict(rep.Violations), elapsed.Round(time.Millisecond),
		float64(st.geleverd)/elapsed.Seconds())
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

func readStatus(ctx context.Context, db *sqlx.DB) (status, error) {
	var s status
	err := db.QueryRowxContext(ctx, `select
		count(*) filter (where statuslev = 'geleverd'), count(*) filter (where statuslev = 'in_levering'),
		count(*) filter (where statuslev = 'fout'), count(*) filter (where statuslev is null) from admhnd`).
		Scan(&s.geleverd, &s.inLevering, &s.fout, &s.open)
	return s, err
}

// demoDatabase (re)creates the database brp_demo on the server of base and returns its URL.
func demoDatabase(ctx context.Context, base string, session dbsession.Settings, log *slog.Logger) (string, error) {
	admin, err := setup.OpenDB(ctx, setup.DatabaseURL(base), session, log)
	if err != nil {
		return "", err
	}
	defer admin.Close()
	if _, err := admin.ExecContext(ctx, `drop database if exists brp_demo with (force)`); err != nil {
		return "", fmt.Errorf("drop demo database: %w", err)
	}
	if _, err := admin.ExecContext(ctx, `create database brp_demo`); err != nil {
		return "", fmt.Errorf("create demo database: %w", err)
	}
	u, err := url.Parse(base)
	if err != nil {
		return "", fmt.Errorf("BRP_DATABASE_URL: %w", err)
	}
	u.Path = "/brp_demo"
	return u.String(), nil
}

func redact(u string) string {
	if p, err := url.Parse(u); err == nil {
		return p.Redacted()
	}
	return "(database)"
}

type proc struct {
	cmd  *exec.Cmd
	done chan error
}

func startProc(path string, env []string, logFile string) (*proc, error) {
	f, err := os.Create(logFile)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path)
	cmd.Env, cmd.Stdout, cmd.Stderr = env, f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s (build it with scripts/demo.sh): %w", path, err)
	}
	p := &proc{cmd: cmd, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait(); f.Close() }()
	return p, nil
}

// stopAll sends SIGTERM to every process and reports how each ended.
func stopAll(procs []*proc, out io.Writer) {
	for _, p := range procs {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range procs {
		select {
		case err := <-p.done:
			if err != nil {
				fmt.Fprintf(out, "%s ended: %v\n", filepath.Base(p.cmd.Path), err)
			}
		case <-time.After(15 * time.Second):
			_ = p.cmd.Process.Kill()
			fmt.Fprintf(out, "%s did not stop within 15s after SIGTERM; killed\n", filepath.Base(p.cmd.Path))
		}
	}
}

// queueReader is the demo's afnemer: it reads the verzending queue and remembers the order.
type queueReader struct {
	conn *broker.Conn
	mu   sync.Mutex
	got  []int64
}

func readQueue(ctx context.Context, cfg broker.Config, queue string) (*queueReader, error) {
	conn, err := broker.Dial(ctx, cfg)
	if err != nil {
		return nil, err
	}
	sub, err := conn.Subscribe(ctx, queue, 1)
	if err != nil {
		conn.Close()
		return nil, err
	}
	r := &queueReader{conn: conn}
	go func() {
		for m := range sub.C() {
			r.add(m)
			if sub.Ack(context.Background(), m) != nil {
				return
			}
		}
	}()
	return r, nil
}

func (r *queueReader) add(m *broker.Delivery) {
	r.mu.Lock()
	r.got = append(r.got, m.AdmhndID)
	r.mu.Unlock()
}

func (r *queueReader) count() int { r.mu.Lock(); defer r.mu.Unlock(); return len(r.got) }

func (r *queueReader) ids() []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int64(nil), r.got...)
}

func (r *queueReader) close() { r.conn.Close() }
