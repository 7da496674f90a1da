package scenarios

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/brp/levering/broker"
	"github.com/brp/levering/handeling"
	"github.com/brp/levering/internal/brptest"
	"github.com/brp/levering/internal/load"
	"github.com/brp/levering/internal/rig"
)

// BenchmarkDisturbances measures how long handelingen wait when something outside the service
// disturbs it (issue 40, "Nothing outside the service holds delivery back for long"), as a new
// user would see it: one publicatie and three mutatielevering with their default settings (and
// BRP_LOG_LEVEL=info), on a PostgreSQL and an ActiveMQ of its own, a fresh database per case.
// Bijhouding is an application server (load.App): a pool of 16 connections, each request reads
// the server's clock for tsreg before it gets a connection and begins, then registers one
// handeling of one or two of 20,000 persons (one in ten two) in a transaction of its own; 300
// per second, keeping to the schedule. Each case runs 30 s of that load (before), the
// disturbance (during), and an after-phase, then waits (at most 5 minutes, failing after) until
// everything registered is geleverd, fout, or held behind a fout:
//
//   - case=burst: for 20 s the server wants 3,000/s, more than the machine takes, so requests
//     wait for a connection; one that waited more than 1.5 s since it read the clock is dropped
//     (a request timeout: nothing registered; the server has this timeout throughout). Then
//     120 s at 300/s.
//   - case=lagging_clock: a second application server whose clock is 1.5 s behind (tsreg = its
//     clock - 1.5 s) registers at 300/s for 20 s beside the healthy one; then 110 s with the
//     healthy one alone.
//   - case=long_writer: a session of the same database (application_name report) does `begin;
//     create temporary table r as select 1 as x;` (it holds a transaction id) and stays open
//     60 s, then commits; then 60 s more.
//
// The delay of a handeling is tslev - tsreg, from the database after delivery; a phase is the
// registrations whose request read the clock in it. The output has a table per case, one line per
// 10 s of registration time (from_s: the bucket's start relative to the disturbance's start):
// registered, dropped, fout, the delay's p50, p99 and max in ms of those geleverd, the
// publisher's lead margin (brp_levering_publicatie_tsreg_lead_margin_seconds, scraped every
// second) as its highest and last value in that bucket's wall time, and in the lagging case
// the healthy server's registrations and delays alone; reg_p99_ms is the p99 of the requests'
// time from reading the clock to their commit (how long they waited for a connection: the
// leads the margin learns from). The table goes to the standard output, indented: a
// benchmark's own log keeps only ten lines.
//
// Figures: before_, during_, after_ (the whole after-phase) and after_30s_ (from 30 s after the
// disturbance ended to the end) p50_ms, p99_ms, max_ms; in the lagging case also healthy_during_
// and healthy_after_ (the healthy server's handelingen) and lagging_server_ (the lagging one's,
// whose tsreg lies 1.5 s back); counts: registered, dropped, geleverd, fout, overtaken (foutreden
// ingehaald...), held (still te leveren at the end because a fout holds them back:
// handeling.ReadHeld), lost (registered but neither geleverd nor fout nor held: must be 0),
// order_violations (the verzending queue read back, load.CheckOrder: must be 0), warnings (the
// processes' WARN and ERROR lines); margin_during_max_ms (the margin's highest value during the
// disturbance), margin_max_ms (over the run), margin_end_ms (its value at the end of the
// after-phase); register_before_p99_ms and register_during_p99_ms (a request's clock reading
// to its commit: how long requests waited); for the long writer registered_while_open and
// delivered_while_open (registrations committed while the writer was open, up to 2 s before
// its commit, and of those the ones geleverd in a consumer transaction that began before it
// committed, its tslev: publication does not stop).
//
// Sub-benchmarks case=C/version=V, the versions alternating inside each case. BRP_DIST_CASES
// chooses the cases (comma-separated, default burst,lagging_clock,long_writer; steady is a
// control without a disturbance). BRP_DIST_SCALE (default 1) multiplies every phase, the 30 s
// of after_30s and the table's 10 s (0.25: a quick run of about three minutes).
// BRP_DIST_VERSIONS lists the builds as BRP_FRESH_VERSIONS does: "head" is this tree's
// commands, NAME=DIR a directory with publicatie and mutatielevering binaries of another build
// (whose own `publicatie migrate` creates its schema). BRP_DIST_RATE (default 300) and
// BRP_DIST_BURST (default 3000) are the rates; BRP_DIST_ENV adds settings (BRP_NAME=VALUE,
// space-separated) to every process; BRP_DIST_WARMUP (seconds, default 15, scaled; 0: none)
// first runs the first version at 1,000/s on a database of its own, unmeasured, so that the
// fresh broker's first minute of work (docs/performance.md) is not the first case's baseline.
//
//	go test -run '^$' -bench BenchmarkDisturbances -benchtime 1x -timeout 60m ./scenarios/
func BenchmarkDisturbances(b *testing.B) {
	svc := brptest.PrivateServices(b)
	versions := binVersions(b, "BRP_DIST_VERSIONS")
	scale := 1.0
	if v := os.Getenv("BRP_DIST_SCALE"); v != "" {
		s, err := strconv.ParseFloat(v, 64)
		if err != nil || s <= 0 {
			b.Fatalf("BRP_DIST_SCALE: %q is not a positive number", v)
		}
		scale = s
	}
	cases := envList("BRP_DIST_CASES", "burst,lagging_clock,long_writer")
	for _, c := range cases {
		if !slices.Contains(distKinds, c) {
			b.Fatalf("BRP_DIST_CASES: unknown case %q (known: %s)", c, strings.Join(distKinds, ", "))
		}
	}
	warm := 15.0
	if v := os.Getenv("BRP_DIST_WARMUP"); v != "" {
		w, err := strconv.ParseFloat(v, 64)
		if err != nil || w < 0 {
			b.Fatalf("BRP_DIST_WARMUP: %q is not a number of seconds", v)
		}
		warm = w
	}
	if warm > 0 {
		p := distBenchPlan("steady", scale)
		p.rate, p.before = 1000, time.Duration(warm*scale*float64(time.Second))
		o := distRun(b, svc, versions[0], p)
		distLog(b, fmt.Sprintf("warm-up (not measured): %s at 1000/s for %v, p50 %.0f ms, p99 %.0f ms", versions[0].name, p.before, o.f["before_p50_ms"], o.f["before_p99_ms"]))
	}
	for _, c := range cases {
		for _, v := range versions {
			b.Run(fmt.Sprintf("case=%s/version=%s", c, v.name), measured(func(b *testing.B) figures {
				return distRun(b, svc, v, distBenchPlan(c, scale)).f
			}))
		}
	}
}

// distKinds are the disturbances: steady has none (the warm-up, a control).
var distKinds = []string{"burst", "lagging_clock", "long_writer", "steady"}

// distPlan is one disturbance run.
type distPlan struct {
	kind                  string        // one of distKinds
	rate                  float64       // the normal load, per second
	burstRate             float64       // burst: what the server wants during the disturbance
	timeout               time.Duration // burst: a request waiting this long for a connection is dropped
	lag                   time.Duration // lagging_clock: how far the second server's clock is behind
	before, during, after time.Duration
	settle                time.Duration // after_30s: registrations from this long after the disturbance ended
	bucket                time.Duration // the table's width
	wait                  time.Duration // at most this long after the load for everything to end geleverd, fout or held
	grace                 time.Duration // long_writer: delivered_while_open counts registrations committed up to this long before the writer's commit
}

// distBenchPlan is the benchmark's plan of kind, its phases multiplied by scale.
func distBenchPlan(kind string, scale float64) distPlan {
	s := func(secs float64) time.Duration { return time.Duration(secs * scale * float64(time.Second)) }
	p := distPlan{kind: kind, rate: float64(envInt("BRP_DIST_RATE", 300)), burstRate: float64(envInt("BRP_DIST_BURST", 3000)),
		lag: 1500 * time.Millisecond, before: s(30), settle: s(30), bucket: s(10), wait: 5 * time.Minute, grace: 2 * time.Second}
	switch kind {
	case "burst":
		p.timeout, p.during, p.after = 1500*time.Millisecond, s(20), s(120)
	case "lagging_clock":
		p.during, p.after = s(20), s(110)
	case "long_writer":
		p.during, p.after = s(60), s(60)
	}
	return p
}

// distRun runs plan p with version v on a fresh database of svc migrated by v's publicatie;
// it fails the benchmark on lost handelingen and order violations.
func distRun(b *testing.B, svc *brptest.Services, v binVersion, p distPlan) distOutcome {
	b.Helper()
	db, dbURL := versionDB(b, svc, v)
	q := brptest.NewQueues(b)
	r := distRig{db: db, dbURL: dbURL, broker: svc.Broker(), q: q, verzending: brptest.ReadFrom(b, svc.Broker(), q.Verzending),
		pub: v.pub, con: v.con, env: strings.Fields(os.Getenv("BRP_DIST_ENV"))}
	o := runDisturbance(b, r, p)
	if n := o.f["lost"]; n > 0 {
		b.Errorf("%s: %.0f handelingen lost", p.kind, n)
	}
	if len(o.violations) > 0 {
		b.Errorf("%s: per-person order violated:\n%s", p.kind, strings.Join(o.violations, "\n"))
	}
	return o
}

// distRig is where a disturbance runs: a migrated database, a broker and queues of its own, a
// reader of the verzending queue, the two commands' binaries and extra settings.
type distRig struct {
	db         *sqlx.DB
	dbURL      string
	broker     broker.Config
	q          brptest.Queues
	verzending *brptest.Reader
	pub, con   string
	env        []string
}

// distOutcome is what a disturbance run found.
type distOutcome struct {
	f          figures
	violations []string // per-person order on the verzending queue (load.CheckOrder)
	// long_writer: when the writer had its transaction id and when its commit returned, and
	// the registrations committed in between (up to grace before the commit) that were not
	// geleverd in a consumer transaction begun before the commit.
	writerOpen, writerCommit time.Time
	notDeliveredWhileOpen    []int64
}

// distReg is a registration of one of the application servers (lagging: the one behind).
type distReg struct {
	load.Registration
	lagging bool
}

// distRow is a handeling as the database has it after the run.
type distRow struct {
	ID     int64        `db:"id"`
	Tsreg  time.Time    `db:"tsreg"`
	Tslev  sql.NullTime `db:"tslev"`
	Status string       `db:"status"`
	Reden  string       `db:"reden"`
}

// marginSample is the publisher's lead margin as scraped at a moment.
type marginSample struct {
	at     time.Time
	margin float64 // seconds
}

const leadMarginMetric = "brp_levering_publicatie_tsreg_lead_margin_seconds"

// runDisturbance runs plan p on r: it starts one publicatie and three mutatielevering, runs the
// application servers (and the writer) through the phases, samples the publisher's lead margin
// every second, waits until everything registered is geleverd, fout or held behind a fout, and
// reads the outcome from the database and the verzending queue. It logs the table of delays
// per bucket and returns the figures (BenchmarkDisturbances says which); it fails t when the
// wait ends with work still open, but computes the figures first.
func runDisturbance(t testing.TB, r distRig, p distPlan) distOutcome {
	t.Helper()
	env := func() []string {
		return rig.Env(r.broker, r.dbURL, r.q, append([]string{"BRP_LOG_LEVEL=info"}, r.env...)...)
	}
	pub := brptest.Start(t, "publicatie", r.pub, env()...)
	procs := []*brptest.Proc{pub}
	for i := range 3 {
		c := brptest.Start(t, fmt.Sprintf("mutatielevering-%d", i+1), r.con, env()...)
		c.WaitReady(time.Minute)
		procs = append(procs, c)
	}
	pub.WaitLeader(time.Minute)
	defer func() {
		var ps []*rig.Proc
		for _, p := range procs {
			ps = append(ps, p.Proc)
		}
		if err := rig.StopAll(20*time.Second, ps...); err != nil {
			t.Log(err)
		}
	}()

	// The publisher's lead margin, every second, until the load ends.
	sampleCtx, stopSampling := context.WithCancel(context.Background())
	var samplesMu sync.Mutex
	var samples []marginSample
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			ctx, cancel := context.WithTimeout(sampleCtx, 2*time.Second)
			m, err := pub.Proc.Metrics(ctx)
			cancel()
			if v, ok := m[leadMarginMetric]; ok && err == nil {
				samplesMu.Lock()
				samples = append(samples, marginSample{at: time.Now(), margin: v})
				samplesMu.Unlock()
			}
			select {
			case <-sampleCtx.Done():
				return
			case <-tick.C:
			}
		}
	}()

	t0 := time.Now().Add(time.Second) // the servers open their pools first
	dStart := t0.Add(p.before)
	dEnd := dStart.Add(p.during)
	end := dEnd.Add(p.after)
	var ids atomic.Int64
	var wg sync.WaitGroup
	var errMu sync.Mutex
	var errs []string
	fail := func(format string, a ...any) {
		errMu.Lock()
		errs = append(errs, fmt.Sprintf(format, a...))
		errMu.Unlock()
	}
	server := func(name string, app load.App, start time.Time, phases ...load.Phase) *load.Registered {
		out := &load.Registered{}
		db, err := sqlx.Open("postgres", withURLParam(r.dbURL, "application_name", name))
		if err != nil {
			t.Fatal(err)
		}
		app.DB = db
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer db.Close()
			var err error
			if *out, err = app.Register(context.Background(), &ids, start, phases...); err != nil {
				fail("%s: %v", name, err)
			}
		}()
		return out
	}
	healthyPhases := []load.Phase{{Rate: p.rate, For: p.before + p.during + p.after}}
	healthy := load.App{Pool: 16, Personen: 20_000, Seed: 1}
	if p.kind == "burst" {
		healthy.Timeout = p.timeout
		healthyPhases = []load.Phase{{Rate: p.rate, For: p.before}, {Rate: p.burstRate, For: p.during}, {Rate: p.rate, For: p.after}}
	}
	regHealthy := server("bijhouding-1", healthy, t0, healthyPhases...)
	regLagging := &load.Registered{}
	if p.kind == "lagging_clock" {
		regLagging = server("bijhouding-2", load.App{Pool: 16, Personen: 20_000, Seed: 2, ClockOffset: -p.lag}, dStart, load.Phase{Rate: p.rate, For: p.during})
	}
	var o distOutcome
	if p.kind == "long_writer" {
		wdb, err := sqlx.Open("postgres", withURLParam(r.dbURL, "application_name", "report"))
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer wdb.Close()
			time.Sleep(time.Until(dStart))
			tx, err := wdb.Beginx()
			if err == nil {
				_, err = tx.Exec(`create temporary table r as select 1 as x`)
			}
			if err != nil {
				fail("the writer: %v", err)
				return
			}
			o.writerOpen = time.Now()
			time.Sleep(time.Until(dEnd))
			if err := tx.Commit(); err != nil {
				fail("the writer's commit: %v", err)
			}
			o.writerCommit = time.Now()
		}()
	}
	wg.Wait()
	stopSampling()
	<-sampled
	for _, e := range errs {
		t.Error(e)
	}

	// Wait until nothing is in levering and what is still te leveren is held behind a fout.
	ctx := context.Background()
	deadline := time.Now().Add(p.wait)
	var held handeling.Held
	var open struct {
		TeLeveren  int64 `db:"te_leveren"`
		InLevering int64 `db:"in_levering"`
	}
	for {
		err := r.db.Get(&open, `select count(*) filter (where statuslev is null) as te_leveren,
			count(*) filter (where statuslev::text = 'in_levering') as in_levering from admhnd`)
		if err == nil && open.InLevering == 0 {
			held, err = handeling.ReadHeld(ctx, r.db, brptest.Layout(), handeling.DefaultExcluded(), true)
		}
		if err != nil {
			t.Fatal(err)
		}
		if open.InLevering == 0 && open.TeLeveren == held.Handelingen {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("%s: %v after the load, %d te leveren (%d of them held behind fout), %d in levering", p.kind, p.wait, open.TeLeveren, held.Handelingen, open.InLevering)
			break
		}
		time.Sleep(time.Second)
	}
	var geleverd int
	if err := r.db.Get(&geleverd, `select count(*) from admhnd where statuslev::text = 'geleverd'`); err != nil {
		t.Fatal(err)
	}
	// Every geleverd one on the verzending queue, read back: the wait ends a minute after the
	// last new one came (the reader trails the consumers on a busy machine).
	arrived, read := map[int64]bool{}, 0
	if !r.verzending.AwaitFlow(time.Minute, func(got []brptest.Received) bool {
		for _, m := range got[read:] {
			arrived[m.AdmhndID] = true
		}
		read = len(got)
		return len(arrived) >= geleverd
	}) {
		t.Errorf("%s: %d geleverd, %d of them on the verzending queue", p.kind, geleverd, len(arrived))
	}

	// The outcome.
	var rows []distRow
	if err := r.db.Select(&rows, `select id, tsreg, tslev, coalesce(statuslev::text, '') as status, coalesce(foutreden, '') as reden from admhnd`); err != nil {
		t.Fatal(err)
	}
	byID := make(map[int64]distRow, len(rows))
	for _, row := range rows {
		byID[row.ID] = row
	}
	var regs []distReg
	for _, rg := range regHealthy.Registrations {
		regs = append(regs, distReg{Registration: rg})
	}
	for _, rg := range regLagging.Registrations {
		regs = append(regs, distReg{Registration: rg, lagging: true})
	}
	hs := make(map[int64]load.Handeling, len(regs))
	f := figures{"registered": float64(len(regs)), "dropped": float64(regHealthy.Dropped + regLagging.Dropped), "held": float64(held.Handelingen),
		"geleverd": 0, "fout": 0, "overtaken": 0, "order_violations": 0, "warnings": 0}
	if p.kind == "long_writer" {
		f["registered_while_open"], f["delivered_while_open"] = 0, 0
	}
	var d struct{ before, during, after, after30, healthyDuring, healthyAfter, laggingServer, regBefore, regDuring []float64 }
	missing := 0
	for _, rg := range regs {
		hs[rg.ID] = rg.Handeling
		row, ok := byID[rg.ID]
		if !ok {
			missing++
			continue
		}
		if !row.Tsreg.Equal(rg.Tsreg) {
			t.Errorf("handeling %d: tsreg %v in the database, %v registered", rg.ID, row.Tsreg, rg.Tsreg)
		}
		switch row.Status {
		case "fout":
			f["fout"]++
			if strings.HasPrefix(row.Reden, "ingehaald") {
				f["overtaken"]++
			}
		case "geleverd":
			f["geleverd"]++
		}
		switch {
		case rg.Read.Before(dStart):
			d.regBefore = append(d.regBefore, ms(rg.Committed.Sub(rg.Read)))
		case rg.Read.Before(dEnd):
			d.regDuring = append(d.regDuring, ms(rg.Committed.Sub(rg.Read)))
		}
		if row.Status != "geleverd" || !row.Tslev.Valid {
			continue
		}
		delay := ms(row.Tslev.Time.Sub(row.Tsreg))
		switch {
		case rg.Read.Before(dStart):
			d.before = append(d.before, delay)
		case rg.Read.Before(dEnd):
			d.during = append(d.during, delay)
			if rg.lagging {
				d.laggingServer = append(d.laggingServer, delay)
			} else {
				d.healthyDuring = append(d.healthyDuring, delay)
			}
		default:
			d.after = append(d.after, delay)
			if !rg.lagging {
				d.healthyAfter = append(d.healthyAfter, delay)
			}
			if !rg.Read.Before(dEnd.Add(p.settle)) {
				d.after30 = append(d.after30, delay)
			}
		}
	}
	if n := len(rows) - (len(regs) - missing); n != 0 {
		t.Errorf("%s: the database has %d handelingen the application servers did not register", p.kind, n)
	}
	f["lost"] = f["registered"] - f["geleverd"] - f["fout"] - f["held"]
	delayFigures(f, "before", d.before)
	delayFigures(f, "during", d.during)
	delayFigures(f, "after", d.after)
	delayFigures(f, "after_30s", d.after30)
	if p.kind == "lagging_clock" {
		delayFigures(f, "healthy_during", d.healthyDuring)
		delayFigures(f, "healthy_after", d.healthyAfter)
		delayFigures(f, "lagging_server", d.laggingServer)
	}
	for phase, xs := range map[string][]float64{"before": d.regBefore, "during": d.regDuring} {
		if len(xs) > 0 {
			slices.Sort(xs)
			f["register_"+phase+"_p99_ms"] = percentile(xs, 0.99)
		}
	}
	for _, s := range samples {
		f["margin_max_ms"] = max(f["margin_max_ms"], s.margin*1e3)
		if !s.at.Before(dStart) && s.at.Before(dEnd) {
			f["margin_during_max_ms"] = max(f["margin_during_max_ms"], s.margin*1e3)
		}
		if !s.at.After(end) {
			f["margin_end_ms"] = s.margin * 1e3
		}
	}
	rep := load.CheckOrder(r.verzending.IDs(), hs)
	o.violations = rep.Violations
	f["order_violations"] = float64(len(rep.Violations))
	for _, pr := range procs {
		w := pr.Warnings()
		if len(w) > 0 {
			t.Logf("%s: %d warnings, the first: %s", pr.Name, len(w), w[0])
		}
		f["warnings"] += float64(len(w))
	}
	if p.kind == "long_writer" && !o.writerCommit.IsZero() {
		for _, rg := range regs {
			if rg.Committed.After(o.writerOpen) && rg.Committed.Before(o.writerCommit.Add(-p.grace)) {
				f["registered_while_open"]++
				// By tslev, not by when the test's reader got the verzending: the consumer has the
				// broker confirm it before geleverd commits, and beside two busy loops the reader
				// was seconds behind the consumers (a lane: 219 of 585 read after the commit,
				// each geleverd within 1.6 s of its tsreg).
				if row := byID[rg.ID]; row.Status == "geleverd" && row.Tslev.Valid && row.Tslev.Time.Before(o.writerCommit) {
					f["delivered_while_open"]++
				} else {
					o.notDeliveredWhileOpen = append(o.notDeliveredWhileOpen, rg.ID)
				}
			}
		}
	}
	distLog(t, fmt.Sprintf("%s: %s", p.kind, distTable(p, dStart, regs, byID, regHealthy.DroppedAt, samples)))
	distLog(t, fmt.Sprintf("%s: %s", p.kind, distSummary(f)))
	o.f = f
	return o
}

// distTable is the per-bucket table: registrations by the time they read the clock, the
// margin by the time it was scraped, buckets of p.bucket from the disturbance's start.
func distTable(p distPlan, dStart time.Time, regs []distReg, byID map[int64]distRow, dropped []time.Time, samples []marginSample) string {
	type bucket struct {
		n, dropped, fout, healthy  int
		delays, healthyDelays, reg []float64
		marginMax, marginLast      float64
		margins                    int
	}
	buckets := map[int]*bucket{}
	at := func(t time.Time) *bucket {
		k := int(math.Floor(float64(t.Sub(dStart)) / float64(p.bucket)))
		if buckets[k] == nil {
			buckets[k] = &bucket{}
		}
		return buckets[k]
	}
	for _, rg := range regs {
		bk := at(rg.Read)
		bk.n++
		bk.reg = append(bk.reg, ms(rg.Committed.Sub(rg.Read)))
		if !rg.lagging {
			bk.healthy++
		}
		row := byID[rg.ID]
		switch {
		case row.Status == "fout":
			bk.fout++
		case row.Status == "geleverd" && row.Tslev.Valid:
			delay := ms(row.Tslev.Time.Sub(row.Tsreg))
			bk.delays = append(bk.delays, delay)
			if !rg.lagging {
				bk.healthyDelays = append(bk.healthyDelays, delay)
			}
		}
	}
	for _, t := range dropped {
		at(t).dropped++
	}
	for _, s := range samples {
		if s.at.Before(dStart.Add(-p.before)) { // before the load began
			continue
		}
		bk := at(s.at)
		bk.marginMax, bk.marginLast = max(bk.marginMax, s.margin*1e3), s.margin*1e3
		bk.margins++
	}
	keys := make([]int, 0, len(buckets))
	for k := range buckets {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	lagging := p.kind == "lagging_clock"
	var sb strings.Builder
	fmt.Fprintf(&sb, "delay per %v of registration (from_s relative to the disturbance's start; during: 0 to %.0f s)\n", p.bucket, p.during.Seconds())
	fmt.Fprintf(&sb, "%8s %6s %7s %5s %8s %8s %8s %10s %11s %10s", "from_s", "n", "dropped", "fout", "p50_ms", "p99_ms", "max_ms", "margin_max", "margin_last", "reg_p99_ms")
	if lagging {
		fmt.Fprintf(&sb, " %9s %11s %11s %11s", "healthy_n", "healthy_p50", "healthy_p99", "healthy_max")
	}
	sb.WriteByte('\n')
	stats := func(xs []float64) (p50, p99, mx string) {
		if len(xs) == 0 {
			return "-", "-", "-"
		}
		slices.Sort(xs)
		return fmt.Sprintf("%.0f", percentile(xs, 0.5)), fmt.Sprintf("%.0f", percentile(xs, 0.99)), fmt.Sprintf("%.0f", xs[len(xs)-1])
	}
	for _, k := range keys {
		bk := buckets[k]
		p50, p99, mx := stats(bk.delays)
		mMax, mLast := "-", "-"
		if bk.margins > 0 {
			mMax, mLast = fmt.Sprintf("%.0f", bk.marginMax), fmt.Sprintf("%.0f", bk.marginLast)
		}
		_, r99, _ := stats(bk.reg)
		fmt.Fprintf(&sb, "%8.1f %6d %7d %5d %8s %8s %8s %10s %11s %10s", (time.Duration(k) * p.bucket).Seconds(), bk.n, bk.dropped, bk.fout, p50, p99, mx, mMax, mLast, r99)
		if lagging {
			h50, h99, hmx := stats(bk.healthyDelays)
			fmt.Fprintf(&sb, " %9d %11s %11s %11s", bk.healthy, h50, h99, hmx)
		}
		sb.WriteByte('\n')
	}
	return sb.String()
}

// distLog logs text in a test; a benchmark's log keeps only its first ten lines, so there it
// goes to the standard output, indented (which benchstat and cmd/bench pass over), each line
// after the first under the benchmark's name.
func distLog(t testing.TB, text string) {
	t.Helper()
	b, ok := t.(*testing.B)
	if !ok {
		t.Log(strings.TrimRight(text, "\n"))
		return
	}
	fmt.Printf("    %s: %s\n", b.Name(), strings.ReplaceAll(strings.TrimRight(text, "\n"), "\n", "\n    "))
}

// distSummary is the figures on one line, in a fixed order.
func distSummary(f figures) string {
	keys := make([]string, 0, len(f))
	for k := range f {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%.0f", k, f[k]))
	}
	return strings.Join(parts, " ")
}

// delayFigures records prefix_p50_ms, _p99_ms and _max_ms of the delays xs (none when empty).
func delayFigures(f figures, prefix string, xs []float64) {
	if len(xs) == 0 {
		return
	}
	slices.Sort(xs)
	f[prefix+"_p50_ms"], f[prefix+"_p99_ms"], f[prefix+"_max_ms"] = percentile(xs, 0.5), percentile(xs, 0.99), xs[len(xs)-1]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// withURLParam is the database URL u with the connection parameter key set to value.
func withURLParam(u, key, value string) string {
	parsed, err := url.Parse(u)
	if err != nil {
		return u
	}
	q := parsed.Query()
	q.Set(key, value)
	parsed.RawQuery = q.Encode()
	return parsed.String()
}
