package scenarios

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/brp/levering/handeling"
	"github.com/brp/levering/internal/brptest"
	"github.com/brp/levering/internal/load"
	"github.com/brp/levering/internal/rig"
)

// BenchmarkFreshness measures what afnemers feel: the time from a registration's commit to its
// arrival on the verzending queue, while bijhouding registers at a steady rate and the service
// runs (issue 32). One publicatie and four mutatielevering with their default settings, on a
// PostgreSQL and an ActiveMQ of its own, a fresh database per measurement; each handeling is
// registered in a bijhouding transaction of its own (the handeling, then its persons) by sixteen
// registering connections that keep to the schedule (registration i is due at i/rate); an
// afnemer reads the verzending queue and notes when each message arrives. Persons: 20,000, 10 %
// of the handelingen touch two. The afnemer reads as a JMS client does, the broker pushing up to
// BRP_FRESH_PREFETCH messages (default 1,000, ActiveMQ's default for a JMS client on a queue)
// ahead of its acks. With a prefetch of 1 every message waited for the ack of the one before,
// and beside a CPU hog that reader fell behind: its backlog was a large part of what was
// measured (docs/performance.md, "The afnemer's prefetch").
//
// tsreg takes three forms: now (the database's now(): the transaction's start), client (the
// registering host's clock, read before the transaction begins, as an application server does)
// and client_behind (the same clock 0.5 s behind the database's).
//
// Sub-benchmarks rep=R/rate=N/tsreg=F/version=V, alternating the versions inside each rate and
// form, each rep starting with the next one. BRP_FRESH_VERSIONS lists them, comma-separated:
// "head" is this tree's commands, NAME=DIR a directory holding publicatie and mutatielevering
// binaries of another build (whose own `publicatie migrate` creates its schema). BRP_FRESH_RATES (default 500,2000),
// BRP_FRESH_FORMS (default now,client,client_behind), BRP_FRESH_SECONDS (measured seconds per
// run, default 20, after 3 s unmeasured), BRP_FRESH_REPS (default 1), BRP_FRESH_HISTORY
// (handelingen already geleverd before each run starts, default 200,000: delivered);
// BRP_FRESH_BACKLOG=N adds,
// in each rep, backlog=N/version=V: N handelingen over N/4 persons (30 % multi-person)
// registered before the processes start, delivered at full speed (hps), the versions' raw
// throughput beside each other; for experiments
// BRP_FRESH_ENV adds settings (BRP_NAME=VALUE, space-separated) to every process and
// BRP_FRESH_SQL runs on each database after the migration; BRP_FRESH_STATS=1 logs each run's
// trigger functions (calls and time, with track_functions on, for example through BRP_FRESH_SQL)
// and its tables' scans and writes: where a registration's or a round's time goes.
// BRP_FRESH_ENV=BRP_LOG_LEVEL=debug adds the publisher's rounds that published (round_p50_ms,
// round_p95_ms, rounds, published_per_round, and the p50 of each phase of a round:
// round_plan_p50_ms, round_mark_p50_ms, round_publish_p50_ms, round_commit_p50_ms). BRP_FRESH_HELD lists numbers of persons held
// behind fout before the processes start (default 0; heldBehindFout), alternated inside each
// rate and form (issue 39). BRP_FRESH_HOG=N keeps N cores busy throughout (N shell loops, real
// processes beside the benchmark's): freshness on a busy machine (issue 51). BRP_FRESH_LOGDIR
// keeps every process's log of every run there, one file each. The warm-up, by the first
// version, is BRP_FRESH_WARMUP_SECONDS (default 15) at BRP_FRESH_WARMUP_RATE (default 2000);
// the first measured run after it still pays the broker's warm-up, whichever build it is
// (docs/performance.md), which is why each rep starts with the next version.
//
// Figures: offered_hps (registrations per second committed in the measured window),
// delivered_ratio (verzending arrivals in that window over registrations in it: 1 keeps up),
// p50_ms, p90_ms, p95_ms, p99_ms, max_ms (commit to arrival, every registration of the window,
// waited for after the window ends), reg_p50_ms (bijhouding's transaction), lead_p50_ms,
// lead_p99_ms, lead_p999_ms and lead_max_ms (tsreg to the transaction's start: what the lead
// margin follows), pickup_p50_ms and pickup_p99_ms (commit to the consumer's transaction
// start, the verzending's tslev: the margin, the round, the publication queue), onward_p50_ms
// and onward_p99_ms (from there to arrival: the consumer and the verzending queue),
// queued_p50_ms and queued_p99_ms (the broker's timestamp of the verzending, when it took it
// in, to arrival: the verzending queue and the afnemer, in whole milliseconds), margin_p50_ms
// and margin_max_ms (the leader's lead margin, sampled every half second, and logged a second
// apart over the run), order_violations, warnings, and the CPU milliseconds per handeling of
// each part over the whole run (cpu_publicatie_ms, cpu_mutatielevering_ms, cpu_broker_ms,
// cpu_postgres_ms, cpu_bench_ms: registering and reading, cpu_machine_ms: everything).
func BenchmarkFreshness(b *testing.B) {
	svc := brptest.PrivateServices(b)
	versions := binVersions(b, "BRP_FRESH_VERSIONS")
	rates := envList("BRP_FRESH_RATES", "500,2000")
	forms := envList("BRP_FRESH_FORMS", "now,client,client_behind")
	secs := envInt("BRP_FRESH_SECONDS", 20)
	reps := envInt("BRP_FRESH_REPS", 1)
	var held []int
	for _, h := range envList("BRP_FRESH_HELD", "0") {
		n, err := strconv.Atoi(h)
		if err != nil || n < 0 {
			b.Fatalf("BRP_FRESH_HELD: %q is not a number of persons", h)
		}
		held = append(held, n)
	}
	for _, f := range forms {
		if _, ok := tsregForms[f]; !ok {
			b.Fatalf("BRP_FRESH_FORMS: unknown tsreg form %q", f)
		}
	}
	cpuHog(b, envInt("BRP_FRESH_HOG", 0))
	// A fresh broker runs its first minute of work through its interpreter (docs/performance.md).
	warm := freshRun(b, svc, versions[0], envInt("BRP_FRESH_WARMUP_RATE", 2000), "now",
		time.Duration(envInt("BRP_FRESH_WARMUP_SECONDS", 15))*time.Second, 0)
	b.Logf("warm-up (not measured): %s p50 %.1f ms, p99 %.1f ms", versions[0].name, warm["p50_ms"], warm["p99_ms"])
	for rep := 1; rep <= reps; rep++ {
		// Each rep starts with the next version: whichever runs first after the warm-up or
		// another rate pays more, and none should always be it.
		versions := slices.Concat(versions[(rep-1)%len(versions):], versions[:(rep-1)%len(versions)])
		if n := envInt("BRP_FRESH_BACKLOG", 0); n > 0 {
			for _, v := range versions {
				b.Run(fmt.Sprintf("rep=%d/backlog=%d/version=%s", rep, n, v.name), measured(func(b *testing.B) figures {
					return backlogRun(b, svc, v, n)
				}))
			}
		}
		for _, rate := range rates {
			r, err := strconv.Atoi(rate)
			if err != nil || r <= 0 {
				b.Fatalf("BRP_FRESH_RATES: %q is not a rate", rate)
			}
			for _, form := range forms {
				for _, h := range held {
					for _, v := range versions {
						name := fmt.Sprintf("rep=%d/rate=%d/tsreg=%s/version=%s", rep, r, form, v.name)
						if len(held) > 1 || h > 0 {
							name = fmt.Sprintf("rep=%d/rate=%d/tsreg=%s/held=%d/version=%s", rep, r, form, h, v.name)
						}
						b.Run(name, measured(func(b *testing.B) figures {
							return freshRun(b, svc, v, r, form, time.Duration(secs)*time.Second, h)
						}))
					}
				}
			}
		}
	}
}

// backlogRun registers n handelingen, starts v's processes and reports how fast they deliver
// them (hps, from the first delivery to the last) and the CPU per handeling.
func backlogRun(b *testing.B, svc *brptest.Services, v binVersion, n int) figures {
	b.Helper()
	db, dbURL := versionDB(b, svc, v)
	hs := load.Generate(load.Spec{N: n, Personen: n / 4, Multi: 0.3, Seed: 21, Start: time.Now().Add(-time.Hour)})
	db.MustExec(`analyze ` + registerAll(b, db, v.layout, hs))
	q := brptest.NewQueues(b)
	verzending := brptest.ReadFrom(b, svc.Broker(), q.Verzending)
	env := append(append([]string{"BRP_LOG_LEVEL=info"}, strings.Fields(os.Getenv("BRP_FRESH_ENV"))...), v.env()...)
	m0 := rig.MarkCPU(svc.BrokerPID(), svc.DBPID())
	var ps []*brptest.Proc
	for i := range 4 {
		ps = append(ps, brptest.Start(b, fmt.Sprintf("mutatielevering-%d", i+1), v.con, rig.Env(svc.Broker(), dbURL, q, env...)...))
	}
	ps = append([]*brptest.Proc{brptest.Start(b, "publicatie", v.pub, rig.Env(svc.Broker(), dbURL, q, env...)...)}, ps...)
	rep := verifyDeliveredWithin(b, db, hs, verzending, 10*time.Minute)
	f := figures{}
	processFigures(b, f, m0, svc.BrokerPID(), svc.DBPID(), ps)
	var secs float64
	// From the first delivery to the last: the kern layout keeps no tspub of a delivered one.
	if err := db.Get(&secs, `select extract(epoch from max(tslev) - min(tslev)) from admhnd where statuslev = 'geleverd'`); err != nil {
		b.Fatal(err)
	}
	f["hps"] = float64(rep.Distinct) / secs
	for _, part := range []string{"publicatie", "mutatielevering", "broker", "postgres", "bench", "machine"} {
		f["cpu_"+part+"_ms"] = 1000 * f["cpu_"+part+"_s"] / float64(rep.Distinct)
		delete(f, "cpu_"+part+"_s")
	}
	var procs []*rig.Proc
	for _, p := range ps {
		procs = append(procs, p.Proc)
	}
	if err := rig.StopAll(20*time.Second, procs...); err != nil {
		b.Log(err)
	}
	b.Logf("%s: %d geleverd at %.0f/s", v.name, rep.Distinct, f["hps"])
	return f
}

// binVersion is a build of the two commands.
type binVersion struct {
	name, pub, con string
	layout         handeling.Layout // the database layout it runs on (NAME@kern)
	settings       []string         // its processes' own settings (NAME+VAR=VALUE)
}

// env is what v's processes need beside the common settings.
func (v binVersion) env() []string {
	if v.layout == handeling.Kern {
		return append([]string{"BRP_DATABASE_LAYOUT=kern"}, v.settings...)
	}
	return v.settings
}

// binVersions returns the builds the variable env lists (comma-separated): "head" is this
// tree's commands, NAME=DIR a directory holding publicatie and mutatielevering binaries of
// another build. A name ending in @kern runs that build on the kern layout (a database with
// rig.BijhoudingKern's tables, registrations written to them): "head,head@kern" compares the
// layouts. Settings of its own follow a version as +VAR=VALUE, the publicatie's without
// their prefix: "head,head+LEADCOVER=1" compares a setting's two values on one build.
func binVersions(b *testing.B, env string) []binVersion {
	var out []binVersion
	for _, v := range envList(env, "head") {
		v, own, _ := strings.Cut(v, "+")
		var settings []string
		if own != "" {
			for _, s := range strings.Split(own, "+") {
				settings = append(settings, "BRP_LEVERING_ADMHNDPUBLICATIE_"+s)
			}
		}
		name, dir, ok := strings.Cut(v, "=")
		var layout handeling.Layout
		if _, l, kern := strings.Cut(name, "@"); kern {
			var err error
			if layout, err = handeling.ParseLayout(l); err != nil {
				b.Fatalf("%s: %s: %v", env, name, err)
			}
		}
		if own != "" {
			name += "+" + own
		}
		if !ok {
			out = append(out, binVersion{name: name, pub: brptest.Build(b, "cmd/publicatie"), con: brptest.Build(b, "cmd/mutatielevering"),
				layout: layout, settings: settings})
			continue
		}
		bv := binVersion{name: name, pub: filepath.Join(dir, "publicatie"), con: filepath.Join(dir, "mutatielevering"), layout: layout, settings: settings}
		for _, f := range []string{bv.pub, bv.con} {
			if _, err := os.Stat(f); err != nil {
				b.Fatalf("%s: %v", env, err)
			}
		}
		out = append(out, bv)
	}
	return out
}

func envList(name, def string) []string {
	v := os.Getenv(name)
	if v == "" {
		v = def
	}
	return strings.Split(v, ",")
}

// tsregForms are the tsreg expressions of a registration; klok is the client's clock, read
// before the transaction began.
var tsregForms = map[string]string{
	"now":           `now()`,
	"client":        `klok`,
	"client_behind": `klok - interval '500 ms'`,
}

// registration is one handeling as the registering side saw it.
type registration struct {
	h      load.Handeling
	begin  time.Time // before the clock was read for tsreg
	commit time.Time // when the commit returned
	lead   float64   // seconds from tsreg to the transaction's start (the database's now())
}

// freshRun runs one measurement: a fresh database migrated by v's publicatie, held persons
// held behind fout (heldBehindFout), v's processes, registrations at rate for 3 s unmeasured
// and then d measured, and the latency of each.
func freshRun(b *testing.B, svc *brptest.Services, v binVersion, rate int, form string, d time.Duration, held int) figures {
	b.Helper()
	db, dbURL := versionDB(b, svc, v)
	delivered(b, db, v.layout, envInt("BRP_FRESH_HISTORY", 200_000))
	heldBehindFout(db, held)
	q := brptest.NewQueues(b)
	verzending := brptest.ReadAheadFrom(b, svc.Broker(), q.Verzending, envInt("BRP_FRESH_PREFETCH", 1000))
	env := func(extra ...string) []string {
		extra = append(v.env(), extra...)
		return rig.Env(svc.Broker(), dbURL, q, append(append([]string{"BRP_LOG_LEVEL=info"}, strings.Fields(os.Getenv("BRP_FRESH_ENV"))...), extra...)...)
	}
	if sql := os.Getenv("BRP_FRESH_SQL"); sql != "" { // an experiment's change to the schema
		db.MustExec(sql)
	}
	pub := brptest.Start(b, "publicatie", v.pub, env()...)
	ps := []*brptest.Proc{pub}
	for i := range 4 {
		c := brptest.Start(b, fmt.Sprintf("mutatielevering-%d", i+1), v.con, env()...)
		c.WaitReady(time.Minute)
		ps = append(ps, c)
	}
	pub.WaitLeader(time.Minute)
	defer func() {
		var procs []*rig.Proc
		for _, p := range ps {
			procs = append(procs, p.Proc)
		}
		if err := rig.StopAll(20*time.Second, procs...); err != nil {
			b.Log(err)
		}
	}()
	m0 := rig.MarkCPU(svc.BrokerPID(), svc.DBPID())
	f := figures{}

	warmup := 3 * time.Second
	margins := sampleMargin(pub)
	regs := register(b, db, v.layout, rate, form, warmup+d)
	start := regs[0].begin
	from, until := start.Add(warmup), start.Add(warmup+d)
	if ms := margins(); len(ms) > 0 {
		// The horizon lies this far behind the clock: a registration waits for it (issue 40).
		var series []string
		for i := 0; i < len(ms); i += 2 {
			series = append(series, fmt.Sprintf("%.0f", 1000*ms[i]))
		}
		b.Logf("%s margin ms, a second apart: %s", v.name, strings.Join(series, " "))
		slices.Sort(ms)
		f["margin_p50_ms"], f["margin_max_ms"] = 1000*ms[len(ms)/2], 1000*ms[len(ms)-1]
	}

	// Wait for every registration to arrive, then match.
	byID := map[int64]registration{}
	hs := map[int64]load.Handeling{}
	for _, r := range regs {
		byID[r.h.ID] = r
		hs[r.h.ID] = r.h
	}
	arrived := map[int64]time.Time{}
	tslev := map[int64]time.Time{} // the consumer's transaction start, from the verzending
	sent := map[int64]time.Time{}  // when the broker took the verzending in (its timestamp)
	brptest.EventuallyEvery(b, 3*time.Minute, 200*time.Millisecond, func() error {
		for _, m := range verzending.Messages() {
			if _, seen := arrived[m.AdmhndID]; !seen {
				arrived[m.AdmhndID] = m.At
				var body struct {
					Tslev time.Time `json:"tslev"`
				}
				if json.Unmarshal(m.Body, &body) == nil {
					tslev[m.AdmhndID] = body.Tslev
				}
				if ms, err := strconv.ParseInt(m.Header["timestamp"], 10, 64); err == nil {
					sent[m.AdmhndID] = time.UnixMilli(ms)
				}
			}
		}
		if len(arrived) < len(regs) {
			return fmt.Errorf("%d of %d registrations on the verzending queue", len(arrived), len(regs))
		}
		return nil
	})
	processFigures(b, f, m0, svc.BrokerPID(), svc.DBPID(), ps)
	if dir := os.Getenv("BRP_FRESH_LOGDIR"); dir != "" {
		for _, p := range ps {
			name := strings.ReplaceAll(b.Name(), "/", "_") + "." + p.Name + ".log"
			if err := os.WriteFile(filepath.Join(dir, name), []byte(strings.Join(p.Output(), "\n")), 0o644); err != nil {
				b.Fatalf("BRP_FRESH_LOGDIR: %v", err)
			}
		}
	}
	roundFigures(f, "", pub) // with BRP_FRESH_ENV=BRP_LOG_LEVEL=debug: the rounds' own log
	logSlowRounds(b, pub, from)
	if os.Getenv("BRP_FRESH_STATS") != "" {
		var lines, tabs []string
		err := db.Select(&lines, `select funcname || ' calls=' || calls || ' total_ms=' || round(total_time::numeric,1) || ' self_ms=' || round(self_time::numeric,1) from pg_stat_user_functions order by total_time desc`)
		if err == nil {
			err = db.Select(&tabs, `select relname || ' seq=' || seq_scan || ' seq_tup=' || seq_tup_read || ' idx=' || coalesce(idx_scan,0) || ' ins=' || n_tup_ins || ' upd=' || n_tup_upd || ' hot=' || n_tup_hot_upd || ' del=' || n_tup_del || ' dead=' || n_dead_tup from pg_stat_user_tables order by seq_tup_read desc`)
		}
		if err != nil {
			b.Fatalf("BRP_FRESH_STATS: %v", err)
		}
		b.Logf("functions:\n%s\ntables:\n%s", strings.Join(lines, "\n"), strings.Join(tabs, "\n"))
	}
	for _, part := range []string{"publicatie", "mutatielevering", "broker", "postgres", "bench", "machine"} {
		f["cpu_"+part+"_ms"] = 1000 * f["cpu_"+part+"_s"] / float64(len(regs))
		delete(f, "cpu_"+part+"_s")
	}
	rep := load.CheckOrder(verzending.IDs(), hs)
	if rep.Distinct != len(regs) {
		b.Fatalf("verzending holds %d distinct handelingen, %d registered", rep.Distinct, len(regs))
	}
	var lat, reg, leads, pickup, onward, queued []float64
	offered, delivered := 0, 0
	for id, r := range byID {
		at := arrived[id]
		if !at.Before(from) && !at.After(until) {
			delivered++
		}
		if r.commit.Before(from) || r.commit.After(until) {
			continue
		}
		offered++
		lat = append(lat, float64(at.Sub(r.commit))/float64(time.Millisecond))
		reg = append(reg, float64(r.commit.Sub(r.begin))/float64(time.Millisecond))
		leads = append(leads, 1000*r.lead)
		if t, ok := tslev[id]; ok {
			pickup = append(pickup, float64(t.Sub(r.commit))/float64(time.Millisecond))
			onward = append(onward, float64(at.Sub(t))/float64(time.Millisecond))
		}
		if t, ok := sent[id]; ok {
			queued = append(queued, float64(at.Sub(t))/float64(time.Millisecond))
		}
	}
	slices.Sort(lat)
	slices.Sort(reg)
	slices.Sort(leads)
	pct := func(xs []float64, p float64) float64 { return xs[min(len(xs)-1, int(p*float64(len(xs))))] }
	if len(pickup) > 0 {
		slices.Sort(pickup)
		slices.Sort(onward)
		f["pickup_p50_ms"], f["pickup_p99_ms"] = pct(pickup, 0.5), pct(pickup, 0.99)
		f["onward_p50_ms"], f["onward_p99_ms"] = pct(onward, 0.5), pct(onward, 0.99)
	}
	if len(queued) > 0 {
		slices.Sort(queued)
		f["queued_p50_ms"], f["queued_p99_ms"] = pct(queued, 0.5), pct(queued, 0.99)
	}
	for k, v := range map[string]float64{
		"offered_hps":      float64(offered) / d.Seconds(),
		"delivered_ratio":  float64(delivered) / float64(offered),
		"p50_ms":           pct(lat, 0.5),
		"p90_ms":           pct(lat, 0.9),
		"p95_ms":           pct(lat, 0.95),
		"p99_ms":           pct(lat, 0.99),
		"max_ms":           lat[len(lat)-1],
		"reg_p50_ms":       pct(reg, 0.5),
		"lead_p50_ms":      pct(leads, 0.5),
		"lead_p99_ms":      pct(leads, 0.99),
		"lead_p999_ms":     pct(leads, 0.999),
		"lead_max_ms":      leads[len(leads)-1],
		"order_violations": float64(len(rep.Violations)),
	} {
		f[k] = v
	}
	b.Logf("%s rate %d tsreg %s: offered %.0f/s, delivered %.3f, p50 %.1f ms, p95 %.1f ms, p99 %.1f ms, max %.1f ms, %d duplicates",
		v.name, rate, form, f["offered_hps"], f["delivered_ratio"], f["p50_ms"], f["p95_ms"], f["p99_ms"], f["max_ms"], rep.Duplicates)
	if len(rep.Violations) > 0 {
		b.Errorf("per-person order violated:\n%s", strings.Join(rep.Violations, "\n"))
	}
	return f
}

// sampleMargin reads pub's lead margin every half second until the returned function is
// called, which returns the samples (seconds).
func sampleMargin(pub *brptest.Proc) func() []float64 {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan []float64)
	go func() {
		var out []float64
		for {
			mctx, c := context.WithTimeout(ctx, 2*time.Second)
			m, err := pub.Proc.Metrics(mctx)
			c()
			if v, ok := m[leadMarginMetric]; ok && err == nil {
				out = append(out, v)
			}
			select {
			case <-ctx.Done():
				done <- out
				return
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	return func() []float64 {
		cancel()
		return <-done
	}
}

// logSlowRounds logs the five slowest rounds of pub's debug log (the rounds that published),
// with when they ended relative to from: where a run's tail comes from.
func logSlowRounds(b *testing.B, pub *brptest.Proc, from time.Time) {
	rounds := pub.Lines("round committed")
	slices.SortFunc(rounds, func(x, y map[string]any) int {
		dx, _ := x["duration_seconds"].(float64)
		dy, _ := y["duration_seconds"].(float64)
		return cmp.Compare(dy, dx)
	})
	var out []string
	for _, l := range rounds[:min(5, len(rounds))] {
		d, _ := l["duration_seconds"].(float64)
		out = append(out, fmt.Sprintf("%.0f ms at %+.1f s (published %v, taken in %v, candidates %v)",
			d*1e3, lineTime(l).Sub(from).Seconds(), l["published"], l["taken_in"], l["candidates"]))
	}
	if len(out) > 0 {
		b.Logf("slowest rounds: %s", strings.Join(out, "; "))
	}
}

// heldBehindFout registers n persons from 1,000,000 on, each with a fout handeling and a later
// one still to be delivered (ids from 10,000,000 on), an hour before the measured
// registrations: issue 39's work that a fout holds back, beside which they must flow.
func heldBehindFout(db *sqlx.DB, n int) {
	if n == 0 {
		return
	}
	db.MustExec(`
		with f as (
			insert into admhnd (id, soort, tsreg, statuslev, foutreden)
			select 10000000 + i, 'VERHUIZING', now() - interval '1 hour' + make_interval(secs => i / 100000.0), 'fout', 'bench'
			from generate_series(1, $1::int) i returning id
		), l as (
			insert into admhnd (id, soort, tsreg)
			select id + $1::int, 'VERHUIZING', now() - interval '30 minutes' + make_interval(secs => (id - 10000000) / 100000.0)
			from f returning id
		)
		insert into admhnd_persoon (admhnd_id, persoon_id)
		select id, 990000 + id - 10000000 from f union all select id, 990000 + id - 10000000 - $1::int from l`, n)
	db.MustExec(`analyze admhnd, admhnd_persoon`)
}

// delivered gives the database a history before the processes start: n handelingen already
// geleverd, of the persons register picks from (10 % of them of two), ids from
// historyFirstID, registered in the three hours before, then vacuumed and analysed. A
// production database has its history, and plans made on empty tables are not those of
// production: a statement prepared while a table was nearly empty kept a sequential scan of it
// for the rest of a run, and a person's history is what the consumer's check reads.
func delivered(b *testing.B, db *sqlx.DB, layout handeling.Layout, n int) {
	b.Helper()
	if n == 0 {
		return
	}
	hs := load.Generate(load.Spec{N: n, Personen: benchPersonen, Multi: 0.1, Seed: 11,
		FirstID: historyFirstID, Start: time.Now().Add(-3 * time.Hour)})
	tables := registerAll(b, db, layout, hs)
	setDelivered, records := `update admhnd set statuslev = 'geleverd', tslev = tsreg + interval '1 second' where id >= $1`,
		[]string{`delete from publicatie_nakomer`, `delete from publicatie_herlees`}
	if layout == handeling.Kern {
		setDelivered, records = `update kern.admhnd set statuslev = 4, tslev = tsreg + interval '1 second' where id >= $1`,
			[]string{`delete from brp_levering.publicatie_nakomer`, `delete from brp_levering.publicatie_herlees`}
	}
	db.MustExec(setDelivered, historyFirstID)
	for _, st := range records { // what the registration triggers recorded of the old tsregs
		db.MustExec(st)
	}
	db.MustExec(`vacuum analyze ` + tables)
}

// registerAll registers hs as bijhouding does in layout l (load.InsertIn) and
// returns the tables that wrote, for analyze.
func registerAll(b *testing.B, db *sqlx.DB, l handeling.Layout, hs []load.Handeling) (tables string) {
	b.Helper()
	if err := load.InsertIn(context.Background(), db, l, hs); err != nil {
		b.Fatal(err)
	}
	if l == handeling.Kern {
		return `kern.admhnd, kern.pers, kern.actie, kern.his_persafgeleidadministrati`
	}
	return `admhnd, admhnd_persoon`
}

// historyFirstID is the first id of delivered's history, far above the registrations' ids.
const historyFirstID = 50_000_000

// bareDB is a fresh database with nothing in it, dropped when b ends.
func bareDB(b *testing.B, svc *brptest.Services) (*sqlx.DB, string) {
	b.Helper()
	name := "f_" + brptest.Name(b)
	db, url, err := rig.CreateBareDB(context.Background(), svc.DatabaseURL(), name, "")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		db.Close()
		_ = rig.DropDB(context.Background(), svc.DatabaseURL(), name)
	})
	return db, url
}

// benchPersonen is the number of persons register picks from.
const benchPersonen = 20_000

// register registers handelingen at rate for d, each in a transaction of its own, on sixteen
// connections, and returns them in id order. A registration is one call of a function the
// benchmark creates (bench_register: the handeling, then its persons, in the call's
// transaction), through a statement prepared on each connection: one round trip, so that the
// registering side spends the machine's CPU as little as an application server's would.
func register(b *testing.B, db *sqlx.DB, layout handeling.Layout, rate int, form string, d time.Duration) []registration {
	b.Helper()
	const workers, personen = 16, benchPersonen
	db.SetMaxOpenConns(workers)
	db.SetMaxIdleConns(workers)
	tsreg, ok := tsregForms[form]
	if !ok {
		b.Fatalf("tsreg form %q", form)
	}
	body := `insert into admhnd (id, soort, tsreg) values (nr, 'VERHUIZING', ` + tsreg + `) returning tsreg into ts;
			insert into admhnd_persoon (admhnd_id, persoon_id) select nr, unnest(personen);`
	if layout == handeling.Kern {
		// As bijhouding does: the handeling (status 1), its persons where new, an actie, and
		// a his row per person.
		body = `insert into kern.admhnd (id, srt, partij, tsreg, statuslev) values (nr, 1, 1, ` + tsreg + `, 1) returning tsreg into ts;
			insert into kern.pers (id) select unnest(personen) on conflict do nothing;
			insert into kern.actie (admhnd, tsreg) values (nr, ts) returning id into a;
			insert into kern.his_persafgeleidadministrati (pers, tsreg, actieinh, admhnd, tslaatstewijz, sorteervolgorde)
				select p, ts, a, nr, ts, 1 from unnest(personen) p;`
	}
	db.MustExec(`create or replace function public.bench_register(nr bigint, klok timestamptz, personen bigint[], out ts timestamptz, out lead float8)
		language plpgsql as $$
		declare a bigint;
		begin
			` + body + `
			lead := extract(epoch from now() - ts);
		end $$`)
	total := int(float64(rate) * d.Seconds())
	out := make([]registration, total)
	var next atomic.Int64
	start := time.Now().Add(50 * time.Millisecond)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := db.Connx(context.Background())
			if err != nil {
				errs <- err
				return
			}
			defer conn.Close()
			stmt, err := conn.PreparexContext(context.Background(), `select ts, lead from public.bench_register($1, $2, $3)`)
			if err != nil {
				errs <- err
				return
			}
			defer stmt.Close()
			r := rand.New(rand.NewPCG(uint64(w), 32))
			for {
				i := int(next.Add(1) - 1)
				if i >= total {
					return
				}
				time.Sleep(time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(rate))))
				ps := []int64{int64(1 + r.IntN(personen))}
				if r.IntN(10) == 0 {
					if p := int64(1 + r.IntN(personen)); p != ps[0] {
						ps = append(ps, p)
					}
				}
				slices.Sort(ps)
				reg := registration{h: load.Handeling{ID: int64(i + 1), Soort: "VERHUIZING", Personen: ps}, begin: time.Now()}
				if err := stmt.QueryRowx(reg.h.ID, reg.begin, pq.Array(ps)).Scan(&reg.h.Tsreg, &reg.lead); err != nil {
					errs <- err
					return
				}
				reg.commit = time.Now()
				out[i] = reg
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatalf("bijhouding: %v", err)
	}
	return out
}

// cpuHog keeps n cores busy until b ends: n shell loops, processes of their own as another
// tenant's work would be.
func cpuHog(b *testing.B, n int) {
	for range n {
		cmd := exec.Command("sh", "-c", "while :; do :; done")
		if err := cmd.Start(); err != nil {
			b.Fatalf("BRP_FRESH_HOG: %v", err)
		}
		b.Cleanup(func() {
			cmd.Process.Kill() //nolint:errcheck // gone already is fine
			cmd.Wait()         //nolint:errcheck // killed
		})
	}
	if n > 0 {
		b.Logf("%d cores kept busy by shell loops throughout", n)
	}
}
