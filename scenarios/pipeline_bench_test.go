package scenarios

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/brp/levering/broker"
	"github.com/brp/levering/handeling"
	"github.com/brp/levering/internal/brptest"
	"github.com/brp/levering/internal/load"
	"github.com/brp/levering/internal/rig"
	"github.com/brp/levering/levering"
)

// BenchmarkPipeline is the benchmark of docs/bench: scripts/bench.sh runs it and cmd/bench
// renders its output. It runs on a PostgreSQL and an ActiveMQ of its own, started afresh (a
// broker whose store held a test suite's leftovers spent up to 2.7x the CPU per message of a
// fresh one), a database of its own per measurement, and the real commands with their default
// settings. Sub-benchmarks, in the order they run:
//
//   - pair=I/pipeline, pair=I/raw, pair=I/raw_ack: the headline ratio, measured in turn
//     (BRP_BENCH_PAIRS times, default 5): the pipeline with 4 mutatielevering, then at once the
//     batched raw loop at the same concurrency, acking every item (the raw loop) and
//     acking once per batch (as the consumer does). This machine's speed drifts by ±15 %
//     within minutes (other tenants): taken in turn, drift moves both sides of a ratio alike.
//     They come first: after the single-item raw runs (~100,000 transactions) the pipeline
//     was measured 7-24 % slower than just before them, the raw loop not slower.
//   - pipeline/consumers=K: 1 publicatie and K mutatielevering (1, 2, 4, 8) deliver 20,000
//     handelingen over 5,000 persons (30 % multi-person, 5 % excluded), registered before the
//     processes start; the clock runs from starting them to the last tslev.
//   - chain/background=N: one person's chain of 100 handelingen registered at once, tsreg 1 ms
//     apart, with 4 mutatielevering: link i is tslev(i) - tslev(i-1), the first link from the
//     registration's commit; idle, then beside 5,000 others (BRP_BENCH_CHAIN_BACKGROUND)
//     registered just before it, interleaved in tsreg. Groups off (GROUPSIZE=1): a link is a
//     round trip, which a group would fold into one transaction.
//   - seed: the seed's polling, a round every DELAY only (WAKEUP=false and the notification
//     triggers disabled), 4 mutatielevering, 4,000 handelingen over 5,000 persons (candidates
//     below LIMIT: a full round would start the next at once), geleverd in a 15 s window.
//   - raw/batch=B/goroutines=G, and .../ack=batch: the raw ceiling, a bare loop in this
//     process doing per item only what the pipeline cannot avoid (receive a persistent
//     message, one UPDATE committed, one persistent send confirmed by a receipt, ack), no
//     ordering, on a table with admhnd's columns and none of its indexes and triggers; 1 and
//     20 items per transaction, at the workers of 1, 2, 4 and 8 consumer processes.
//   - scale/history=H: delivered history filled up to 10k, 1M and 10M rows, then a backlog
//     of 5,000 handelingen over 1,000 persons delivered by 1 publicatie and 4 mutatielevering
//     (round times in the pipeline), then full rounds of the publisher alone over the same
//     backlog (after each round the bench sets what it published back to te leveren).
//
// Before the first measurement two pipeline runs and one raw run warm the broker up,
// unmeasured: a broker that has just started runs its first minute of work through its
// interpreter, and one pipeline run was not enough (the next still took 40 % more broker CPU).
// A smoke run (BRP_BENCH_QUICK) leaves the warm-up out.
//
// Figures (b.ReportMetric): hps (handelingen or items per second); steady_hps (between the
// first and the last tslev), first_s; round_p50_ms, round_p95_ms, rounds and
// published_per_round from the publisher's debug log (rounds that published something);
// max_in_levering, geleverd, duplicates, order_violations, warnings (WARN and ERROR lines),
// publicatie_peak_MB and mutatielevering_peak_MB (the largest); the chain's link_*_ms and
// chain_ms; scale's rows, fill_s and full_round_*; and the CPU of each run from /proc:
// wall_s, cpu_publicatie_s, cpu_mutatielevering_s, cpu_broker_s, cpu_postgres_s (every
// backend), cpu_bench_s (this process: the raw loop), cpu_machine_s (all CPUs, everything)
// and cpu_ms, the measured parts' CPU milliseconds per handeling or item.
//
// BRP_BENCH_QUICK=1 makes every size small (a smoke run, not for comparison); BRP_BENCH_ENV
// adds settings (BRP_NAME=VALUE, space-separated) to every process, for experiments.
func BenchmarkPipeline(b *testing.B) {
	pb := newPipelineBench(b)
	s := pb.size
	raw := func(batch, goroutines int, ackPerBatch bool) func(*testing.B) {
		return measured(func(b *testing.B) figures { return pb.raw(b, batch, goroutines, ackPerBatch) })
	}
	at := s.at * levering.DefaultWorkers
	for i := 1; i <= s.pairs; i++ {
		b.Run(fmt.Sprintf("pair=%d", i), func(b *testing.B) {
			b.Run("pipeline", measured(func(b *testing.B) figures { return pb.pipeline(b, s.at) }))
			b.Run("raw", raw(s.rawBatch, at, false))
			b.Run("raw_ack", raw(s.rawBatch, at, true))
		})
	}
	for _, k := range s.consumers {
		b.Run(fmt.Sprintf("pipeline/consumers=%d", k), measured(func(b *testing.B) figures { return pb.pipeline(b, k) }))
	}
	b.Run("chain", pb.chain)
	b.Run("seed", measured(pb.seed))
	for _, batch := range []int{1, s.rawBatch} {
		for _, k := range s.consumers {
			b.Run(fmt.Sprintf("raw/batch=%d/goroutines=%d", batch, k*levering.DefaultWorkers), raw(batch, k*levering.DefaultWorkers, false))
		}
	}
	b.Run(fmt.Sprintf("raw/batch=%d/goroutines=%d/ack=batch", s.rawBatch, at), raw(s.rawBatch, at, true))
	b.Run("scale", pb.scale)
}

// figures are what one measurement reports, by unit.
type figures map[string]float64

// measured runs measure once per benchmark iteration (once with -benchtime 1x) and reports
// its figures.
func measured(measure func(b *testing.B) figures) func(*testing.B) {
	return func(b *testing.B) {
		for b.Loop() {
			for unit, v := range measure(b) {
				b.ReportMetric(v, unit)
			}
		}
	}
}

// benchSize is what BenchmarkPipeline measures.
type benchSize struct {
	n, personen                    int
	consumers                      []int
	at, pairs                      int // the headline's consumers; pairs
	chain, chainBackground         int
	seedN, seedPersonen, seedK     int
	seedWindow                     time.Duration
	rawBatch                       int
	history                        []int64
	backlog, backlogPersonen       int
	scaleConsumers, isolatedRounds int
	timeout                        time.Duration // one measurement at most
	// warmUp runs the unmeasured warm-up first. A smoke run (BRP_BENCH_QUICK) leaves it out:
	// its figures are not for comparison, and what it checks (every measurement runs, keeps
	// per-person order and is rendered) does not need a warm broker.
	warmUp bool
}

func benchSizes() benchSize {
	s := benchSize{n: 20_000, personen: 5_000, consumers: []int{1, 2, 4, 8}, at: 4, pairs: envInt("BRP_BENCH_PAIRS", 5),
		chain: 100, chainBackground: envInt("BRP_BENCH_CHAIN_BACKGROUND", 5_000), seedN: 4_000, seedPersonen: 5_000, seedK: 4, seedWindow: 15 * time.Second,
		rawBatch: 20, history: []int64{10_000, 1_000_000, 10_000_000}, backlog: 5_000, backlogPersonen: 1_000,
		scaleConsumers: 4, isolatedRounds: 20, timeout: 5 * time.Minute, warmUp: true}
	if os.Getenv("BRP_BENCH_QUICK") != "" {
		s.n, s.personen, s.consumers, s.at, s.pairs = 2_000, 500, []int{1, 2}, 2, 1
		s.chainBackground, s.seedWindow, s.history = 500, 10*time.Second, []int64{10_000, 100_000}
		s.backlog, s.backlogPersonen, s.timeout, s.warmUp = 2_000, 400, 2*time.Minute, false
	}
	return s
}

// pipelineBench is what BenchmarkPipeline's measurements share.
type pipelineBench struct {
	svc              *brptest.Services
	broker           broker.Config
	pubBin, conBin   string
	brokerPID, pgPID int
	size             benchSize
	extra            []string // BRP_BENCH_ENV
}

func newPipelineBench(b *testing.B) *pipelineBench {
	svc := brptest.PrivateServices(b)
	pb := &pipelineBench{svc: svc, broker: svc.Broker(), pubBin: brptest.Build(b, "cmd/publicatie"),
		conBin: brptest.Build(b, "cmd/mutatielevering"), brokerPID: svc.BrokerPID(), pgPID: svc.DBPID(),
		size: benchSizes(), extra: strings.Fields(os.Getenv("BRP_BENCH_ENV"))}
	db, _ := brptest.DBOn(b, svc.DatabaseURL())
	var pg string
	if err := db.Get(&pg, `select split_part(version(), ' on ', 1)`); err != nil {
		b.Fatal(err)
	}
	conn, err := broker.Dial(context.Background(), pb.broker)
	if err != nil {
		b.Fatal(err)
	}
	amq := conn.Server
	conn.Disconnect()
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	s := pb.size
	// Configuration lines of the benchmark format (key: value), for cmd/bench.
	fmt.Printf("cpus: %d\nkernel: %s\npostgres: %s\nbroker: %s\n", runtime.NumCPU(), strings.TrimSpace(string(kernel)), pg, amq)
	fmt.Printf("workload: %d handelingen over %d persons\npair-consumers: %d\nraw-batch: %d\nextra-env: %s\nquick: %t\n",
		s.n, s.personen, s.at, s.rawBatch, strings.Join(pb.extra, " "), os.Getenv("BRP_BENCH_QUICK") != "")
	if s.warmUp {
		for range 2 {
			b.Logf("warm-up (not measured): pipeline %.0f/s", pb.pipeline(b, s.at)["hps"])
		}
		b.Logf("warm-up (not measured): raw loop %.0f/s", pb.raw(b, s.rawBatch, s.at*levering.DefaultWorkers, false)["hps"])
	}
	return pb
}

// db is a fresh migrated database for one measurement, dropped when it ends. Its pool keeps
// a connection per raw loop worker: database/sql keeps 2 idle by default, and the others would
// connect anew for every statement.
func (pb *pipelineBench) db(b *testing.B) (*sqlx.DB, string) {
	db, url := brptest.DBOn(b, pb.svc.DatabaseURL())
	db.SetMaxOpenConns(80)
	db.SetMaxIdleConns(80)
	return db, url
}

// workload is the pipeline's handelingen from firstID on, registered from start on: the same
// ones in every run.
func workload(n, personen int, firstID int64, start time.Time) []load.Handeling {
	return load.Generate(load.Spec{N: n, Personen: personen, Multi: 0.3, Excluded: 0.05, FirstID: firstID,
		Seed: 20260101, Start: start})
}

// seed inserts hs as bijhouding would and refreshes the planner's statistics.
func seed(b *testing.B, db *sqlx.DB, hs []load.Handeling) {
	if err := load.Insert(context.Background(), db, hs); err != nil {
		b.Fatal(err)
	}
	if _, err := db.Exec(`analyze admhnd, admhnd_persoon`); err != nil {
		b.Fatal(err)
	}
}

// pipeline measures 1 publicatie and k mutatielevering over the pipeline's workload.
func (pb *pipelineBench) pipeline(b *testing.B, k int) figures {
	db, url := pb.db(b)
	hs := workload(pb.size.n, pb.size.personen, 1, time.Now().Add(-time.Hour))
	seed(b, db, hs)
	return pb.measure(b, db, url, hs, k, 0)
}

// seed measures the seed's fixed-delay polling for a window.
func (pb *pipelineBench) seed(b *testing.B) figures {
	s := pb.size
	db, url := pb.db(b)
	hs := workload(s.seedN, s.seedPersonen, 1, time.Now().Add(-time.Hour))
	seed(b, db, hs)
	// WAKEUP=false: the publisher listens for no notification (and its rounds keep
	// registrations from sending any: publicatie_state.sleeping false).
	f := pb.measure(b, db, url, hs, s.seedK, s.seedWindow, "BRP_LEVERING_ADMHNDPUBLICATIE_WAKEUP=false")
	// A round that reads LIMIT candidates makes the publisher run the next one at once, wake-ups
	// or not: that would not be the seed's behaviour.
	if most := int(s.seedWindow/(5*time.Second)) + 1; int(f["rounds"]) > most {
		b.Errorf("seed mode ran %.0f rounds in %v, more than one per DELAY: keep the seed workload below LIMIT", f["rounds"], s.seedWindow)
	}
	return f
}

type counts struct{ geleverd, fout, inLevering int }

// countRange counts the statuses of the handelingen with ids in [from, to] (a primary-key
// range scan: cheap however long the history).
func countRange(b *testing.B, db *sqlx.DB, from, to int64) counts {
	var c counts
	if err := db.QueryRow(`select count(*) filter (where statuslev = 'geleverd'),
		count(*) filter (where statuslev = 'fout'), count(*) filter (where statuslev = 'in_levering')
		from admhnd where id between $1 and $2`, from, to).Scan(&c.geleverd, &c.fout, &c.inLevering); err != nil {
		b.Fatal(err)
	}
	return c
}

// start starts k mutatielevering (info logs) and then a publicatie (debug logs: a line per
// round) on the database of dbURL and queues q; the publisher is the first returned.
func (pb *pipelineBench) start(b *testing.B, dbURL string, q rig.Queues, k int, extra ...string) []*brptest.Proc {
	env := func(more ...string) []string {
		return rig.Env(pb.svc.Broker(), dbURL, q, slices.Concat(pb.extra, extra, more)...)
	}
	var cons []*brptest.Proc
	for i := range k {
		cons = append(cons, brptest.Start(b, fmt.Sprintf("mutatielevering-%d", i+1), pb.conBin, env("BRP_LOG_LEVEL=info")...))
	}
	return append([]*brptest.Proc{brptest.Start(b, "publicatie", pb.pubBin, env()...)}, cons...)
}

func procs(ps []*brptest.Proc) []*rig.Proc {
	out := make([]*rig.Proc, len(ps))
	for i, p := range ps {
		out[i] = p.Proc
	}
	return out
}

// stop stops ps with SIGTERM; each must exit 0.
func stop(b *testing.B, ps []*brptest.Proc) {
	if err := rig.StopAll(20*time.Second, procs(ps)...); err != nil {
		b.Error(err)
	}
}

// measure starts 1 publicatie and k mutatielevering over hs (already in db), waits until every
// expected handeling is geleverd (or, with window > 0, for window), reads the processes'
// figures right before stopping them, then reads the verzending queue back and checks its order.
func (pb *pipelineBench) measure(b *testing.B, db *sqlx.DB, dbURL string, hs []load.Handeling, k int, window time.Duration, extra ...string) figures {
	want, from, to := load.Deliverable(hs), hs[0].ID, hs[len(hs)-1].ID
	q := brptest.NewQueues(b)
	f := figures{}
	m0 := rig.MarkCPU(pb.brokerPID, pb.pgPID)
	t0 := time.Now()
	ps := pb.start(b, dbURL, q, k, extra...)
	// Every poll counts over the whole workload (~3 ms of database CPU): at 100 ms that was
	// 2.5 % of the machine during the pipeline runs, which the raw loop does not pay. The rate
	// comes from tslev, not from when a poll saw the end.
	brptest.EventuallyEvery(b, pb.size.timeout, 250*time.Millisecond, func() error {
		c := countRange(b, db, from, to)
		f["max_in_levering"] = max(f["max_in_levering"], float64(c.inLevering))
		if window > 0 && time.Since(t0) >= window || window == 0 && c.geleverd+c.fout >= want {
			return nil
		}
		if err := rig.ExitedEarly(procs(ps)...); err != nil {
			b.Fatal(err)
		}
		return fmt.Errorf("geleverd %d of %d, in levering %d, fout %d", c.geleverd, want, c.inLevering, c.fout)
	})
	processFigures(b, f, m0, pb.brokerPID, pb.pgPID, ps)
	roundFigures(f, "", ps[0])
	stop(b, ps)

	var all int
	var first, last time.Time
	if err := db.QueryRow(`select count(*), coalesce(min(tslev), now()), coalesce(max(tslev), now()) from admhnd
		where id between $1 and $2 and statuslev = 'geleverd'`, from, to).Scan(&all, &first, &last); err != nil {
		b.Fatal(err)
	}
	var touched int
	if err := db.Get(&touched, `select count(*) from admhnd where id between $1 and $2 and soort = $3 and statuslev is not null`,
		from, to, load.ExcludedSoort); err != nil || touched > 0 {
		b.Errorf("%d excluded handelingen touched (%v)", touched, err)
	}
	geleverd, secs := all, last.Sub(t0).Seconds()
	if window > 0 {
		secs = window.Seconds()
		if err := db.Get(&geleverd, `select count(*) from admhnd where id between $1 and $2
			and statuslev = 'geleverd' and tslev <= $3`, from, to, t0.Add(window)); err != nil {
			b.Fatal(err)
		}
	} else if all < want {
		b.Errorf("%d of %d geleverd", all, want)
	}
	f["geleverd"], f["hps"], f["first_s"] = float64(geleverd), float64(geleverd)/secs, first.Sub(t0).Seconds()
	if d := last.Sub(first).Seconds(); d > 0 {
		f["steady_hps"] = float64(all) / d
	}
	f["cpu_ms"] = 1000 * cpuParts(f) / float64(geleverd)

	// The afnemer's view, read after the measurement so that reading costs it nothing.
	f.order(b, pb.drain(b, q.Verzending, all), hs, all)
	// What seed mode left in flight, and the dead-letter queue: emptied, not timed (a broker's
	// leftovers cost it CPU in later runs).
	pb.drain(b, q.Publicatie, 0)
	pb.drain(b, q.DLQ, 0)
	return f
}

// drain empties queue, expecting want messages, and returns their admhnd-ids (rig.Drain).
func (pb *pipelineBench) drain(b *testing.B, queue string, want int) []int64 {
	ids, err := rig.Drain(context.Background(), pb.broker, queue, want)
	if err != nil {
		b.Fatal(err)
	}
	return ids
}

// order checks the verzending queue's ids against hs: all geleverd there, persons in order.
func (f figures) order(b *testing.B, ids []int64, hs []load.Handeling, geleverd int) {
	rep := load.CheckOrder(ids, load.ByID(hs))
	f["duplicates"], f["order_violations"] = float64(rep.Duplicates), float64(len(rep.Violations))
	if rep.Distinct < geleverd {
		b.Errorf("verzending queue has %d distinct handelingen, database %d geleverd", rep.Distinct, geleverd)
	}
	if len(rep.Violations) > 0 {
		b.Errorf("per-person order violated: %v", rep.Violations)
	}
}

// processFigures records the CPU since m0 (wall time, each part's CPU seconds) and the
// processes' peak memory and warnings, right before they are stopped.
func processFigures(b *testing.B, f figures, m0 rig.CPUMark, brokerPID, pgPID int, ps []*brptest.Proc) {
	m := rig.MarkCPU(brokerPID, pgPID)
	f["wall_s"], f["cpu_broker_s"], f["cpu_postgres_s"] = m.At.Sub(m0.At).Seconds(), m.Broker-m0.Broker, m.Postgres-m0.Postgres
	f["cpu_bench_s"], f["cpu_machine_s"] = m.Self-m0.Self, m.Machine-m0.Machine
	for i, p := range ps {
		w := p.Warnings()
		if len(w) > 0 {
			b.Logf("%s: %d warnings, the first: %s", p.Name, len(w), w[0])
		}
		f["warnings"] += float64(len(w))
		if i == 0 && p.Name == "publicatie" {
			f["cpu_publicatie_s"], f["publicatie_peak_MB"] = p.CPUSeconds(), p.PeakRSSMB()
			continue
		}
		f["cpu_mutatielevering_s"] += p.CPUSeconds()
		f["mutatielevering_peak_MB"] = max(f["mutatielevering_peak_MB"], p.PeakRSSMB())
	}
}

// cpuParts is the CPU seconds of the measured parts: the commands, broker, database, bench.
func cpuParts(f figures) float64 {
	return f["cpu_publicatie_s"] + f["cpu_mutatielevering_s"] + f["cpu_broker_s"] + f["cpu_postgres_s"] + f["cpu_bench_s"]
}

// roundFigures records the publisher's rounds that published something, from its debug log
// ("round committed"), as prefix+round_p50_ms, round_p95_ms, round_max_ms, rounds and
// published_per_round.
func roundFigures(f figures, prefix string, pub *brptest.Proc) {
	var ms []float64
	phases := map[string][]float64{}
	published := 0.0
	for _, l := range pub.Lines("round committed") {
		if n, _ := l["published"].(float64); n > 0 {
			d, _ := l["duration_seconds"].(float64) // the commands log durations in seconds
			ms, published = append(ms, d*1e3), published+n
			for _, ph := range []string{"plan", "mark", "publish", "commit"} {
				if d, ok := l[ph+"_seconds"].(float64); ok { // builds from 2026-11-29 on log them
					phases[ph] = append(phases[ph], d*1e3)
				}
			}
		}
	}
	if len(ms) == 0 {
		return
	}
	slices.Sort(ms)
	f[prefix+"round_p50_ms"], f[prefix+"round_p95_ms"] = percentile(ms, 0.5), percentile(ms, 0.95)
	f[prefix+"round_max_ms"] = ms[len(ms)-1]
	f[prefix+"rounds"], f[prefix+"published_per_round"] = float64(len(ms)), published/float64(len(ms))
	for ph, ds := range phases {
		slices.Sort(ds)
		f[prefix+"round_"+ph+"_p50_ms"] = percentile(ds, 0.5)
	}
}

// percentile of sorted xs, interpolated linearly between the closest ranks.
func percentile(xs []float64, q float64) float64 {
	pos := q * float64(len(xs)-1)
	lo := int(pos)
	if lo+1 >= len(xs) {
		return xs[len(xs)-1]
	}
	return xs[lo] + (xs[lo+1]-xs[lo])*(pos-float64(lo))
}

// chain measures the per-link latency of one person's chain, idle and beside background work,
// on one pipeline of 4 mutatielevering. A link is the round trip from one handeling's delivery
// to the next one's, which groups (GROUPSIZE) would fold into one transaction: the chain runs
// with a publication per handeling, so that it measures the round trip as it did.
func (pb *pipelineBench) chain(b *testing.B) {
	db, url := pb.db(b)
	q := brptest.NewQueues(b)
	ps := pb.start(b, url, q, 4, "BRP_LEVERING_ADMHNDPUBLICATIE_GROUPSIZE=1")
	ps[0].WaitLeader(30 * time.Second)
	for _, c := range ps[1:] {
		c.WaitReady(30 * time.Second)
	}
	time.Sleep(300 * time.Millisecond) // the publisher's LISTEN connection is set up beside its first round
	var all []load.Handeling
	person := int64(pb.size.personen) + 1_000_000
	for i, bg := range []int{0, pb.size.chainBackground} {
		b.Run(fmt.Sprintf("background=%d", bg), measured(func(b *testing.B) figures {
			f, hs := pb.chainRun(b, db, int64(1+500_000*i), person+int64(i), bg)
			all = append(all, hs...)
			return f
		}))
	}
	stop(b, ps)
	figures{}.order(b, pb.drain(b, q.Verzending, load.Deliverable(all)), all, load.Deliverable(all))
	pb.drain(b, q.Publicatie, 0)
}

// chainRun registers the chain (after its background, if any), waits for it and returns its
// links' figures and what it registered.
func (pb *pipelineBench) chainRun(b *testing.B, db *sqlx.DB, firstID, person int64, background int) (figures, []load.Handeling) {
	n := pb.size.chain
	base := time.Now().Add(-2 * time.Second).Truncate(time.Millisecond)
	var hs []load.Handeling
	if background > 0 {
		// Interleaved in tsreg with the chain: the chain competes with work of the same age.
		hs = workload(background, pb.size.personen, firstID+1_000_000, base)
		if err := load.Insert(context.Background(), db, hs); err != nil {
			b.Fatal(err)
		}
	}
	chain := make([]load.Handeling, n)
	for i := range chain {
		chain[i] = load.Handeling{ID: firstID + int64(i), Soort: "VERHUIZING", Tsreg: base.Add(time.Duration(i+1) * time.Millisecond),
			Personen: []int64{person}}
	}
	if err := load.Insert(context.Background(), db, chain); err != nil {
		b.Fatal(err)
	}
	t0 := time.Now()
	last := firstID + int64(n) - 1
	brptest.Eventually(b, pb.size.timeout, func() error {
		if c := countRange(b, db, firstID, last); c.geleverd < n {
			return fmt.Errorf("%d of %d links geleverd", c.geleverd, n)
		}
		return nil
	})
	var tslev []time.Time
	if err := db.Select(&tslev, `select tslev from admhnd where id between $1 and $2 order by tsreg, id`, firstID, last); err != nil {
		b.Fatal(err)
	}
	links := make([]float64, len(tslev))
	prev, sum := t0, 0.0
	for i, t := range tslev {
		links[i] = float64(t.Sub(prev).Microseconds()) / 1000
		prev, sum = t, sum+links[i]
	}
	first := links[0]
	slices.Sort(links)
	f := figures{"link_p50_ms": percentile(links, 0.5), "link_p95_ms": percentile(links, 0.95),
		"link_p99_ms": percentile(links, 0.99), "link_max_ms": links[len(links)-1], "first_link_ms": first, "chain_ms": sum}
	if len(hs) > 0 {
		// Let the background finish so that the next measurement starts quiet.
		brptest.Eventually(b, pb.size.timeout, func() error {
			if c := countRange(b, db, hs[0].ID, hs[len(hs)-1].ID); c.geleverd+c.fout < load.Deliverable(hs) {
				return fmt.Errorf("background: %d of %d geleverd", c.geleverd, load.Deliverable(hs))
			}
			return nil
		})
	}
	return f, append(chain, hs...)
}

// raw measures the raw loop once over pipeline-sized work: batch items per database and
// broker transaction, goroutines workers connected as the consumer processes' are. With
// ackPerBatch each batch is acked with one cumulative ack, as the consumer does; else every
// item (client-individual), as the issue defines the loop.
func (pb *pipelineBench) raw(b *testing.B, batch, goroutines int, ackPerBatch bool) figures {
	ctx := context.Background()
	n := pb.size.n
	db, _ := pb.db(b)
	for _, stmt := range []string{
		`create table bench_raw (id bigint primary key, soort text not null, tsreg timestamptz not null, tslev timestamptz, statuslev text)`,
		`insert into bench_raw (id, soort, tsreg) select g, 'VERHUIZING', now() - interval '1 hour' + g * interval '1 ms'
			from generate_series(1, ` + strconv.Itoa(n) + `) g`,
		`vacuum analyze bench_raw`,
	} {
		if _, err := db.Exec(stmt); err != nil {
			b.Fatal(err)
		}
	}
	q := brptest.NewQueues(b)
	qin, qout := q.Publicatie, q.Verzending
	pb.prefill(b, qin, n)

	// Connections like the consumer processes': every worker receives on a connection of its
	// own, the default number of workers share one sending connection.
	type worker struct {
		sub  *broker.Subscription
		msgs <-chan *broker.Delivery
		send *broker.Conn
	}
	var ws []worker
	var conns []*broker.Conn
	dial := func() *broker.Conn {
		c, err := broker.Dial(ctx, pb.broker)
		if err != nil {
			b.Fatal(err)
		}
		conns = append(conns, c)
		return c
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := 0; i < goroutines; i += levering.DefaultWorkers {
		send := dial()
		for range min(levering.DefaultWorkers, goroutines-i) {
			recv := dial()
			subscribe := recv.Subscribe
			if ackPerBatch {
				subscribe = recv.SubscribeCumulative
			}
			sub, err := subscribe(ctx, qin, 2*batch)
			if err != nil {
				b.Fatal(err)
			}
			ws = append(ws, worker{sub: sub, msgs: rig.Pump(sub, 2*batch), send: send})
		}
	}
	m0 := rig.MarkCPU(pb.brokerPID, pb.pgPID)
	var processed atomic.Int64
	done := make(chan struct{})
	var doneOnce sync.Once
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, goroutines)
	var wg sync.WaitGroup
	t0 := time.Now()
	for _, w := range ws {
		wg.Go(func() {
			err := rawWorker(wctx, db, w.sub, w.msgs, w.send, qout, batch, ackPerBatch, func(k int) {
				if processed.Add(int64(k)) >= int64(n) {
					doneOnce.Do(func() { close(done) })
				}
			})
			if err != nil && wctx.Err() == nil {
				errc <- err
			}
		})
	}
	var runErr error
	select {
	case <-done:
	case runErr = <-errc:
	case <-time.After(pb.size.timeout):
		runErr = fmt.Errorf("%d of %d items after %v", processed.Load(), n, pb.size.timeout)
	}
	el := time.Since(t0).Seconds()
	f := figures{"hps": float64(n) / el}
	processFigures(b, f, m0, pb.brokerPID, pb.pgPID, nil)
	f["cpu_ms"] = 1000 * cpuParts(f) / float64(n)
	cancel()
	for _, c := range conns {
		c.Close()
	}
	wg.Wait()
	if runErr != nil {
		b.Fatal(runErr)
	}
	var verified int
	if err := db.Get(&verified, `select count(*) from bench_raw where statuslev = 'geleverd'`); err != nil || verified != n {
		b.Fatalf("%d of %d rows geleverd (%v)", verified, n, err)
	}
	// Empty the run's queues (not timed).
	if got := pb.drain(b, qout, n); len(got) < n {
		b.Fatalf("%d of %d messages on the out queue", len(got), n)
	}
	pb.drain(b, qin, 0)
	return f
}

// prefill puts n persistent publications on queue, 100 per broker transaction.
func (pb *pipelineBench) prefill(b *testing.B, queue string, n int) {
	conn, err := broker.Dial(context.Background(), pb.broker)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Disconnect()
	var msgs []broker.Message
	for i := 1; i <= n; i++ {
		body, _ := json.Marshal(handeling.Publication{ID: int64(i), Personen: []int64{int64(1 + i%pb.size.personen)}})
		msgs = append(msgs, broker.Message{Destination: queue, Header: handeling.IDHeaders(int64(i)), Body: body})
		if len(msgs) == 100 || i == n {
			if err := conn.Send(context.Background(), msgs...); err != nil {
				b.Fatal(err)
			}
			msgs = msgs[:0]
		}
	}
}

// rawWorker receives, updates (committed), sends (confirmed) and acks until ctx ends; with
// batch > 1 it gathers up to batch messages (waiting at most 5 ms for each next one) and
// handles them in one database and one broker transaction.
func rawWorker(ctx context.Context, db *sqlx.DB, sub *broker.Subscription, msgs <-chan *broker.Delivery, send *broker.Conn, qout string, batch int, ackPerBatch bool, done func(int)) error {
	recv := func(wait time.Duration) (*broker.Delivery, error) {
		var timeout <-chan time.Time
		if wait > 0 {
			t := time.NewTimer(wait)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timeout:
			return nil, nil
		case m, ok := <-msgs:
			if !ok {
				return nil, sub.Err()
			}
			return m, nil
		}
	}
	ids := make([]int64, 0, batch)
	pubs := map[int64]handeling.Publication{}
	for {
		m, err := recv(0)
		if err != nil {
			return err
		}
		ms := []*broker.Delivery{m}
		for len(ms) < batch {
			m, err := recv(5 * time.Millisecond)
			if err != nil {
				return err
			}
			if m == nil {
				break
			}
			ms = append(ms, m)
		}
		ids = ids[:0]
		clear(pubs)
		for _, m := range ms {
			p, err := handeling.DecodePublication(m.Body)
			if err != nil {
				return fmt.Errorf("raw: %w", err)
			}
			if h := m.Header(handeling.IDHeader); h != strconv.FormatInt(p.ID, 10) {
				return fmt.Errorf("raw: %s %q differs from body id %d", handeling.IDHeader, h, p.ID)
			}
			ids = append(ids, p.ID)
			pubs[p.ID] = p
		}
		// One statement, committed on its own: one database transaction for the batch.
		var rows []struct {
			ID    int64     `db:"id"`
			Soort string    `db:"soort"`
			Tsreg time.Time `db:"tsreg"`
			Tslev time.Time `db:"tslev"`
		}
		const set = `update bench_raw set statuslev = 'geleverd', tslev = now() `
		if len(ids) == 1 {
			err = db.SelectContext(ctx, &rows, set+`where id = $1 returning id, soort, tsreg, tslev`, ids[0])
		} else {
			err = db.SelectContext(ctx, &rows, set+`where id = any($1) returning id, soort, tsreg, tslev`, pq.Array(ids))
		}
		if err != nil {
			return fmt.Errorf("raw: update: %w", err)
		}
		var out []broker.Message
		for _, row := range rows {
			body, _ := json.Marshal(levering.Verzending{ID: row.ID, Soort: row.Soort, Tsreg: row.Tsreg, Tslev: row.Tslev, Personen: pubs[row.ID].Personen})
			out = append(out, broker.Message{Destination: qout, Header: handeling.IDHeaders(row.ID), Body: body})
		}
		// One message with a receipt, or one STOMP transaction committed with a receipt.
		if err := send.Send(ctx, out...); err != nil {
			return err
		}
		acks := ms
		if ackPerBatch {
			acks = ms[len(ms)-1:] // the subscription is cumulative: the last message acks the batch
		}
		for _, m := range acks {
			if err := sub.Ack(ctx, m); err != nil {
				return err
			}
		}
		done(len(ms))
	}
}

// scale measures the publisher's round time with a fixed backlog as the delivered history
// grows: delivered handelingen (one or two persons each over a million persons, the backlog's
// persons among them) up to each size, then the same backlog published at each.
func (pb *pipelineBench) scale(b *testing.B) {
	s := pb.size
	db, url := pb.db(b)
	base := time.Now().Add(-400 * 24 * time.Hour).Truncate(time.Second)
	var filled int64
	for i, h := range s.history {
		b.Run(fmt.Sprintf("history=%d", h), measured(func(b *testing.B) figures {
			t := time.Now()
			fillHistory(b, db, base, filled, h)
			filled = h
			var rows int64
			if err := db.Get(&rows, `select count(*) from admhnd`); err != nil {
				b.Fatal(err)
			}
			f := figures{"fill_s": time.Since(t).Seconds(), "rows": float64(rows)}
			first := 2_000_000_000 + int64(i)*10_000_000
			hs := workload(s.backlog, s.backlogPersonen, first, time.Now().Add(-time.Hour))
			seed(b, db, hs)
			for k, v := range pb.measure(b, db, url, hs, s.scaleConsumers, 0) {
				f[k] = v
			}
			pb.fullRounds(b, db, url, f, first+5_000_000)
			return f
		}))
	}
}

// fillHistory adds delivered handelingen number from..to-1 in chunks, then vacuums and
// analyzes (as autovacuum would in a real system) and checkpoints, so that the measurement
// does not pay for the fill. Their ids start at a billion, far from the workloads'.
func fillHistory(b *testing.B, db *sqlx.DB, base time.Time, from, to int64) {
	const chunk = 1_000_000
	for lo := from; lo < to; lo += chunk {
		hi := min(lo+chunk, to)
		tx, err := db.Beginx()
		if err != nil {
			b.Fatal(err)
		}
		// Every handeling one person of a million, 30 % a second one.
		_, err = tx.Exec(`insert into admhnd (id, soort, tsreg, tslev, statuslev, tspub)
			select 1000000000 + g, (array['GEBOORTE','VERHUIZING','HUWELIJK','NAAMSWIJZIGING','OVERLIJDEN'])[1 + g % 5],
			       $3::timestamptz + g * interval '10 ms', $3::timestamptz + g * interval '10 ms' + interval '2 s',
			       'geleverd', $3::timestamptz + g * interval '10 ms' + interval '1 s'
			from generate_series($1::bigint, $2::bigint - 1) g`, lo, hi, base)
		if err == nil {
			_, err = tx.Exec(`insert into admhnd_persoon (admhnd_id, persoon_id)
				select 1000000000 + g, 1 + g % 1000000 from generate_series($1::bigint, $2::bigint - 1) g
				union all
				select 1000000000 + g, 1 + (g * 7919 + 500000) % 1000000 from generate_series($1::bigint, $2::bigint - 1) g
				where g % 10 < 3 and (g * 7919 + 500000) % 1000000 <> g % 1000000`, lo, hi)
		}
		if err != nil {
			tx.Rollback()
			b.Fatalf("fill history: %v", err)
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	for _, stmt := range []string{`vacuum analyze admhnd, admhnd_persoon`, `checkpoint`} {
		if _, err := db.Exec(stmt); err != nil {
			b.Fatal(err)
		}
	}
}

// fullRounds measures isolatedRounds full rounds of the publisher alone (as full_round_*):
// it registers the backlog again from firstID, starts only a publisher, and after each round
// that published something sets those handelingen back to te leveren (which wakes the
// publisher), so that every round reads all candidates and publishes as many as the persons
// allow. Afterwards the backlog is set geleverd, so that it counts as history.
func (pb *pipelineBench) fullRounds(b *testing.B, db *sqlx.DB, dbURL string, f figures, firstID int64) {
	s := pb.size
	hs := workload(s.backlog, s.backlogPersonen, firstID, time.Now().Add(-time.Hour))
	seed(b, db, hs)
	from, to := hs[0].ID, hs[len(hs)-1].ID
	q := brptest.NewQueues(b)
	pub := pb.start(b, dbURL, q, 0)
	rounds := func() (n int, msgs int) {
		for _, l := range pub[0].Lines("round committed") {
			if p, _ := l["published"].(float64); p > 0 {
				n, msgs = n+1, msgs+int(p)
			}
		}
		return n, msgs
	}
	for i := 1; i <= s.isolatedRounds; i++ {
		brptest.Eventually(b, s.timeout, func() error {
			if n, _ := rounds(); n < i {
				return fmt.Errorf("%d of %d full rounds", n, s.isolatedRounds)
			}
			return rig.ExitedEarly(pub[0].Proc)
		})
		// Let the round that the publisher's own commit notification starts (it finds nothing
		// to do) pass, so that the next full round reads a consistent budget.
		time.Sleep(150 * time.Millisecond)
		if _, err := db.Exec(`update admhnd set statuslev = null, tspub = null
			where id between $1 and $2 and statuslev = 'in_levering'`, from, to); err != nil {
			b.Fatal(err)
		}
	}
	roundFigures(f, "full_", pub[0])
	stop(b, pub)
	if _, err := db.Exec(`update admhnd set statuslev = 'geleverd', tslev = now()
		where id between $1 and $2 and soort <> $3`, from, to, load.ExcludedSoort); err != nil {
		b.Fatal(err)
	}
	_, msgs := rounds()
	pb.drain(b, q.Publicatie, msgs)
}
