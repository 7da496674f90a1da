package scenarios

import (
	"testing"
	"time"

	"github.com/brp/levering/internal/brptest"
	"github.com/brp/levering/internal/load"
)

// distTestPlan is BenchmarkDisturbances's case kind shortened for a test: phases of a few
// seconds, 100 registrations per second (a burst of 1,000/s).
func distTestPlan(kind string) distPlan {
	p := distPlan{kind: kind, rate: 100, burstRate: 1000, timeout: 1500 * time.Millisecond, lag: 1500 * time.Millisecond,
		before: 3 * time.Second, settle: 2 * time.Second, bucket: 2 * time.Second, wait: 2 * time.Minute, grace: 2 * time.Second}
	switch kind {
	case "burst":
		p.during, p.after = 3*time.Second, 5*time.Second
	case "lagging_clock":
		p.during, p.after = 4*time.Second, 4*time.Second
	case "long_writer":
		p.during, p.after = 8*time.Second, 3*time.Second
	}
	return p
}

// TestDisturbances (issue 40) runs BenchmarkDisturbances's three cases, shortened, with real
// publicatie and mutatielevering processes (one and three, default settings), and checks what
// must always hold whatever disturbs the service: nothing registered is lost (every
// registration ends geleverd, fout, or still te leveren because a fout holds it back), the
// verzending queue keeps every person's order, and the database holds nothing else. For the
// long writer (a session of another application that holds a transaction id for 8 s), the
// handelingen registered while it is open are geleverd before it commits (their consumer's
// transaction, tslev, began before): publication does not stop for it. How long anything
// takes is the benchmark's to measure.
func TestDisturbances(t *testing.T) {
	t.Parallel()
	pub, con := brptest.Build(t, "cmd/publicatie"), brptest.Build(t, "cmd/mutatielevering")
	for _, kind := range []string{"burst", "lagging_clock", "long_writer"} {
		t.Run(kind, func(t *testing.T) {
			w := makeEmptyWorld(t, nil, brptest.Broker(), load.Spec{})
			plan := distTestPlan(kind)
			o := runDisturbance(t, distRig{db: w.db, dbURL: w.dbURL, broker: w.broker, q: w.q, verzending: w.verzending, pub: pub, con: con}, plan)
			f := o.f
			if f["registered"] == 0 {
				t.Fatal("nothing registered")
			}
			if f["lost"] != 0 {
				t.Errorf("%.0f of %.0f registered handelingen lost: neither geleverd (%.0f) nor fout (%.0f) nor held behind a fout (%.0f)",
					f["lost"], f["registered"], f["registered"]-f["fout"]-f["held"]-f["lost"], f["fout"], f["held"])
			}
			if len(o.violations) > 0 {
				t.Errorf("per-person order violated on the verzending queue:\n%v", o.violations)
			}
			if kind != "long_writer" {
				return
			}
			if o.writerCommit.IsZero() {
				t.Fatal("the writer did not commit")
			}
			if f["registered_while_open"] == 0 {
				t.Fatal("nothing registered while the writer was open")
			}
			if n := len(o.notDeliveredWhileOpen); n > 0 {
				t.Errorf("%d of %.0f handelingen registered while a writer of another application was open (%v, up to %v before its commit) "+
					"were not geleverd before it committed (by tslev): publication stopped for it (the first: %v)",
					n, f["registered_while_open"], o.writerCommit.Sub(o.writerOpen).Round(time.Millisecond), plan.grace,
					o.notDeliveredWhileOpen[:min(5, n)])
			}
		})
	}
}
