package scenarios

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/lib/pq"

	"github.com/brp/levering/internal/brptest"
	"github.com/brp/levering/internal/load"
)

// BenchmarkGrayFailures measures what each gray failure costs, with the default settings, on
// a PostgreSQL and an ActiveMQ of its own per fault: one publicatie leader and one follower,
// three mutatielevering, and a backlog (BRP_GRAY_N handelingen, default 240,000, over a tenth
// as many persons). A third of the way through, the fault hits. Reported per fault (one
// iteration; scripts/gray-report.sh renders them as the table in docs/robustness.md):
//
//   - detect_s: from the fault until the service noticed: for a frozen or cut-off consumer,
//     the first of its handelingen delivered by another; else the first log line that says so
//     (the follower leads, the leader hands over, a consumer drops the broker, ...).
//   - recover_s: for a consumer fault, until the last handeling it held is delivered by
//     another (target: 30 s); for the others, from the fault (or, for a pause, from the
//     resume) until deliveries run at 80 % of the rate before the fault again (1 s buckets).
//   - flow_ratio: for a consumer fault, the deliveries per second of every handeling not
//     touching its persons in the 30 s after the fault, over the rate in the 10 s before
//     (target: 0.8 or more).
//   - lost, order_violations, duplicates: on the verzending queue once all is delivered.
//
// Timing goals are reported here, not asserted: the scenario tests assert what must hold.
func BenchmarkGrayFailures(b *testing.B) {
	n := envInt("BRP_GRAY_N", 240_000)
	for _, f := range grayFaults {
		b.Run(f.name, func(b *testing.B) {
			for b.Loop() {
				r := runGray(b, f, n)
				b.ReportMetric(r.detect.Seconds(), "detect_s")
				b.ReportMetric(r.recover.Seconds(), "recover_s")
				if f.consumer {
					b.ReportMetric(r.flowRatio, "flow_ratio")
				}
				b.ReportMetric(float64(r.lost), "lost")
				b.ReportMetric(float64(r.violations), "order_violations")
				b.ReportMetric(float64(r.duplicates), "duplicates")
			}
		})
	}
}

// grayFault is one fault: inject makes it happen and returns when it is over (a pause) or at
// once (for good); detected says when the service noticed, from the processes' logs.
type grayFault struct {
	name     string
	consumer bool // the fault hits consumer 1; else the leader
	viaDB    bool // the target's database connections go through a fault proxy
	viaStomp bool // and its broker connections
	inject   func(g *grayRun)
	detected func(g *grayRun) time.Time
}

// grayRun is one fault's run.
type grayRun struct {
	b         testing.TB
	svc       *brptest.Services
	w         *world
	dbp, bp   *brptest.Proxy
	leader    *brptest.Proc
	follower  *brptest.Proc
	consumers []*brptest.Proc
	faultAt   time.Time
	resumedAt time.Time // end of a pause; zero for a fault for good
}

type grayResult struct {
	detect, recover              time.Duration
	flowRatio                    float64
	lost, violations, duplicates int
}

// firstLine is when the first line msg of any of ps was read after from; zero if none.
func firstLine(from time.Time, msg string, ps ...*brptest.Proc) time.Time {
	var first time.Time
	for _, p := range ps {
		for _, l := range p.Lines(msg) {
			if at := lineTime(l); at.After(from) && (first.IsZero() || at.Before(first)) {
				first = at
			}
		}
	}
	return first
}

var grayFaults = []grayFault{
	{name: "consumer_frozen", consumer: true,
		inject: func(g *grayRun) { g.consumers[0].Signal(syscall.SIGSTOP) }},
	{name: "consumer_cut_off", consumer: true, viaDB: true, viaStomp: true,
		inject: func(g *grayRun) { g.dbp.Cut(); g.bp.Cut() }},
	{name: "consumer_cut_off_from_database", consumer: true, viaDB: true,
		inject: func(g *grayRun) { g.dbp.Cut() }},
	{name: "leader_frozen",
		inject:   func(g *grayRun) { g.leader.Signal(syscall.SIGSTOP) },
		detected: func(g *grayRun) time.Time { return firstLine(g.faultAt, "became leader", g.follower) }},
	{name: "leader_cut_off", viaDB: true, viaStomp: true,
		inject:   func(g *grayRun) { g.dbp.Cut(); g.bp.Cut() },
		detected: func(g *grayRun) time.Time { return firstLine(g.faultAt, "became leader", g.follower) }},
	{name: "leader_cut_off_from_broker", viaStomp: true,
		inject: func(g *grayRun) { g.bp.Cut() },
		detected: func(g *grayRun) time.Time {
			return firstLine(g.faultAt, "rounds made no progress for the lease timeout; handing the lease over", g.leader)
		}},
	{name: "broker_paused_60s",
		inject: func(g *grayRun) {
			g.svc.PauseBroker()
			time.Sleep(60 * time.Second) // 2 x BRP_STOMP_TIMEOUT (30 s)
			g.svc.ResumeBroker()
			g.resumedAt = time.Now()
		},
		detected: func(g *grayRun) time.Time {
			return firstLine(g.faultAt, "broker connection lost, reconnecting", g.consumers...)
		}},
	{name: "database_paused_40s",
		inject: func(g *grayRun) {
			g.svc.PauseDB()
			time.Sleep(40 * time.Second)
			g.svc.ResumeDB()
			g.resumedAt = time.Now()
		},
		detected: func(g *grayRun) time.Time {
			all := append([]*brptest.Proc{g.leader}, g.consumers...)
			var first time.Time
			for _, msg := range []string{"publication round failed, retrying", "could not record polling activity",
				"database unavailable, retrying", "batch stuck; handing it back"} {
				if at := firstLine(g.faultAt, msg, all...); !at.IsZero() && (first.IsZero() || at.Before(first)) {
					first = at
				}
			}
			return first
		}},
}

func runGray(b testing.TB, f grayFault, n int) grayResult {
	ctx := context.Background()
	g := &grayRun{b: b, svc: brptest.PrivateServices(b)}
	g.w = newWorldOn(b, g.svc, load.Spec{N: n, Personen: n / 10, Multi: 0.1, Seed: 99})
	// Statistics for the fresh tables now, not when autovacuum gets round to it: the rate
	// before the fault must be the steady one.
	if _, err := g.w.db.ExecContext(ctx, `analyze admhnd; analyze admhnd_persoon`); err != nil {
		b.Fatal(err)
	}
	info := "BRP_LOG_LEVEL=info"
	var target []string
	if f.viaDB {
		g.dbp = g.w.dbProxy(b)
		target = append(target, "BRP_DATABASE_URL="+g.dbp.URL(g.w.dbURL))
	}
	if f.viaStomp {
		g.bp = brptest.NewProxy(b, g.w.broker.Addr)
		target = append(target, "BRP_STOMP_ADDR="+g.bp.Addr())
	}
	pub, con := brptest.Build(b, "cmd/publicatie"), brptest.Build(b, "cmd/mutatielevering")
	leaderEnv := []string{info}
	if !f.consumer {
		leaderEnv = append(leaderEnv, target...)
	}
	g.leader = g.w.publisherProc(b, "publicatie-leader", pub, leaderEnv...)
	g.leader.WaitLeader(time.Minute)
	g.follower = g.w.publisherProc(b, "publicatie-follower", pub, info)
	for i := range 3 {
		env := []string{info}
		if f.consumer && i == 0 {
			env = append(env, target...)
		}
		g.consumers = append(g.consumers, g.w.consumerProc(b, fmt.Sprintf("mutatielevering-%d", i+1), con, env...))
	}
	brptest.Eventually(b, 10*time.Minute, func() error {
		if d := g.w.delivered(b); d < n/3 {
			return errorf("%d of %d delivered before the fault", d, n/3)
		}
		return nil
	})

	g.faultAt = time.Now()
	f.inject(g)
	held := []int64{}
	if f.consumer {
		// What the faulty consumer holds: published before the fault and still in levering
		// 3 s later (everything else in flight is delivered within a fraction of that).
		time.Sleep(time.Until(g.faultAt.Add(3 * time.Second)))
		if err := g.w.db.Select(&held, `select id from admhnd where statuslev = 'in_levering' and tspub < $1`, g.faultAt); err != nil {
			b.Fatal(err)
		}
	}
	// Everything delivered: what is still open after 10 minutes is lost.
	want := load.Deliverable(g.w.hs)
	deadline := time.Now().Add(10 * time.Minute)
	for g.w.delivered(b) < want && time.Now().Before(deadline) {
		time.Sleep(time.Second)
	}
	r := grayResult{lost: want - g.w.delivered(b)}

	// Deliveries over time, from tslev (the database's clock is this machine's).
	heldPersons := []int64{}
	if len(held) > 0 {
		if err := g.w.db.Select(&heldPersons, `select distinct persoon_id from admhnd_persoon where admhnd_id = any($1)`, pq.Array(held)); err != nil {
			b.Fatal(err)
		}
	}
	type delivery struct {
		At      float64 `db:"at"`
		Held    bool    `db:"held"`
		Touches bool    `db:"touches"`
	}
	var ds []delivery
	if err := g.w.db.SelectContext(ctx, &ds, `
		select extract(epoch from a.tslev)::float8 as at, a.id = any($1) as held,
		       exists (select from admhnd_persoon p where p.admhnd_id = a.id and p.persoon_id = any($2)) as touches
		from admhnd a where a.statuslev = 'geleverd' order by a.tslev`, pq.Array(held), pq.Array(heldPersons)); err != nil {
		b.Fatal(err)
	}
	sec := func(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }
	fault := sec(g.faultAt)
	count := func(from, to float64, keep func(delivery) bool) int {
		c := 0
		for _, d := range ds {
			if d.At >= from && d.At < to && keep(d) {
				c++
			}
		}
		return c
	}
	all := func(delivery) bool { return true }
	pre := float64(count(fault-10, fault, all)) / 10
	if f.consumer {
		var first, last float64
		for _, d := range ds {
			if d.Held && d.At >= fault {
				if first == 0 {
					first = d.At
				}
				last = d.At
			}
		}
		r.detect = time.Duration((first - fault) * float64(time.Second))
		r.recover = time.Duration((last - fault) * float64(time.Second))
		// The window ends after 30 s, or earlier where the backlog is nearly drained.
		end := fault + 30
		if len(ds) > 0 {
			end = min(end, ds[len(ds)*95/100].At)
		}
		others := count(fault, end, func(d delivery) bool { return !d.Touches })
		r.flowRatio = float64(others) / (end - fault) / pre
		b.Logf("%s: held %d handelingen of %d persons; first taken over after %v, last after %v; "+
			"others %.0f/s in the %.0f s after the fault vs %.0f/s before", f.name, len(held), len(heldPersons),
			r.detect.Round(time.Millisecond), r.recover.Round(time.Millisecond), float64(others)/(end-fault), end-fault, pre)
	} else {
		if at := f.detected(g); !at.IsZero() {
			r.detect = at.Sub(g.faultAt)
		}
		from, since := fault, "the fault"
		if !g.resumedAt.IsZero() {
			from, since = sec(g.resumedAt), "the resume"
		}
		for t := from; t < from+600; t++ {
			if float64(count(t, t+1, all)) >= 0.8*pre {
				r.recover = time.Duration((t + 1 - from) * float64(time.Second))
				break
			}
		}
		b.Logf("%s: detected after %v; deliveries back at 80 %% of %.0f/s %v after %s",
			f.name, r.detect.Round(time.Millisecond), pre, r.recover, since)
	}

	// The verzending queue: order and duplicates.
	byID := load.ByID(g.w.hs)
	var rep load.OrderReport
	wait := time.Now().Add(5 * time.Minute)
	for {
		rep = load.CheckOrder(g.w.verzending.IDs(), byID)
		if rep.Distinct >= want-r.lost || time.Now().After(wait) {
			break
		}
		time.Sleep(time.Second)
	}
	r.violations, r.duplicates = len(rep.Violations), rep.Duplicates
	if r.violations > 0 {
		b.Logf("%s: order violations: %v", f.name, rep.Violations)
	}
	return r
}
