package scenarios

// Partitions: a process whose connections are cut without being closed (packets dropped),
// made with a real TCP fault proxy (toxiproxy, in-process) between the process and the
// database or the broker.

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/brp/levering/internal/brptest"
	"github.com/brp/levering/internal/load"
)

// dbProxy starts a fault proxy in front of the world's database server.
func (w *world) dbProxy(t testing.TB) *brptest.Proxy {
	t.Helper()
	u, err := url.Parse(w.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	return brptest.NewProxy(t, u.Host)
}

// deliveredBy counts the handelingen p logged as delivered after from.
func deliveredBy(p *brptest.Proc, from time.Time) int {
	n := 0
	for _, l := range p.Lines("handeling geleverd") {
		if lineTime(l).After(from) {
			n++
		}
	}
	return n
}

// waitDeliveredBy waits until p has delivered something.
func waitDeliveredBy(t testing.TB, p *brptest.Proc) {
	t.Helper()
	brptest.Eventually(t, time.Minute, func() error {
		if deliveredBy(p, time.Time{}) == 0 {
			return errorf("%s has delivered nothing yet", p.Name)
		}
		return nil
	})
}

// A consumer whose database and broker connections are all cut while it works: the broker
// misses its heart-beats and gives its publications to the others, the database ends its
// transactions, and everything is delivered in order while it is cut off. Healed, it
// reconnects by itself and takes part again.
func TestConsumerCutOff(t *testing.T) {
	t.Parallel()
	for name, b := range brokers(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			w := makeEmptyWorld(t, nil, b, load.Spec{N: 4000, Personen: 400, Multi: 0.3, Seed: 60})
			first, second := w.hs[:2000], w.hs[2000:]
			if err := load.Insert(context.Background(), w.db, first); err != nil {
				t.Fatal(err)
			}
			dbp, bp := w.dbProxy(t), brptest.NewProxy(t, b.Addr)
			w.publisherProc(t, "publicatie", brptest.Build(t, "cmd/publicatie"))
			cut := w.consumerProc(t, "mutatielevering-cut", brptest.Build(t, "cmd/mutatielevering"),
				"BRP_DATABASE_URL="+dbp.URL(w.dbURL), "BRP_STOMP_ADDR="+bp.Addr())
			for i := range 2 {
				w.consumerProc(t, fmt.Sprintf("mutatielevering-%d", i+1), brptest.Build(t, "cmd/mutatielevering"))
			}
			waitDeliveredBy(t, cut)
			dbp.Cut()
			bp.Cut()
			cutAt := time.Now()
			brptest.Eventually(t, 3*time.Minute, func() error {
				if d := w.delivered(t); d < len(first) {
					return errorf("%d of %d delivered while the consumer is cut off", d, len(first))
				}
				return nil
			})
			t.Logf("first wave delivered %v after the cut", time.Since(cutAt).Round(time.Second))
			dbp.Heal()
			bp.Heal()
			healed := time.Now()
			if err := load.Insert(context.Background(), w.db, second); err != nil {
				t.Fatal(err)
			}
			rep := w.verify(t)
			t.Logf("%d verzending messages, %d duplicates; the healed consumer delivered %d afterwards",
				rep.Messages, rep.Duplicates, deliveredBy(cut, healed))
			if deliveredBy(cut, healed) == 0 {
				t.Fatal("the healed consumer took no part in the second wave")
			}
		})
	}
}

// A consumer cut off from the database only, while the broker keeps feeding it: each batch it
// takes hangs on the database, is reported stuck by /readyz, logged with its step, and handed
// back after the batch timeout, so the other consumers deliver everything.
func TestConsumerCutOffFromDatabaseHandsBatchesBack(t *testing.T) {
	t.Parallel()
	w := newWorld(t, load.Spec{N: 3000, Personen: 300, Multi: 0.3, Seed: 61})
	dbp := w.dbProxy(t)
	w.publisherProc(t, "publicatie", brptest.Build(t, "cmd/publicatie"))
	cut := w.consumerProc(t, "mutatielevering-cut", brptest.Build(t, "cmd/mutatielevering"),
		"BRP_DATABASE_URL="+dbp.URL(w.dbURL))
	for i := range 2 {
		w.consumerProc(t, fmt.Sprintf("mutatielevering-%d", i+1), brptest.Build(t, "cmd/mutatielevering"))
	}
	waitDeliveredBy(t, cut)
	dbp.Cut()
	var stuck any
	brptest.Eventually(t, 2*time.Minute, func() error {
		code, body := readyz(t, cut)
		if code == 503 && body["batches"] != "ok" && body["batches"] != nil {
			stuck = body["batches"]
			return nil
		}
		return errorf("readyz %d %v", code, body)
	})
	t.Logf("readyz: %v", stuck)
	if s := fmt.Sprint(stuck); !strings.Contains(s, "stuck in step") {
		t.Fatalf("readyz does not say which step the batch is stuck in: %s", s)
	}
	line := cut.WaitLog(time.Minute, "batch stuck; handing it back")
	t.Logf("logged: step %v, held for %v", line["step"], line["held_for_seconds"])
	rep := w.verify(t)
	t.Logf("%d verzending messages, %d duplicates", rep.Messages, rep.Duplicates)
	dbp.Heal()
}

// The leader's database and broker connections are cut: its lease expires (no heartbeat
// reaches the database), the follower takes over and delivers everything. Healed, the old
// leader finds itself follower; the fence kept it from committing anything meanwhile.
func TestLeaderCutOff(t *testing.T) {
	t.Parallel()
	w := newWorld(t, load.Spec{N: 5000, Personen: 500, Multi: 0.3, Seed: 62})
	dbp, bp := w.dbProxy(t), brptest.NewProxy(t, w.broker.Addr)
	bin := brptest.Build(t, "cmd/publicatie")
	a := w.publisherProc(t, "publicatie-a", bin, "BRP_DATABASE_URL="+dbp.URL(w.dbURL), "BRP_STOMP_ADDR="+bp.Addr(),
		"BRP_LEVERING_ADMHNDPUBLICATIE_MAXINLEVERING=200")
	a.WaitLeader(20 * time.Second)
	b := w.publisherProc(t, "publicatie-b", bin, "BRP_LEVERING_ADMHNDPUBLICATIE_MAXINLEVERING=200")
	b.WaitReady(20 * time.Second)
	w.consumers(t, 3, 2)
	w.waitDelivered(t, 100)
	dbp.Cut()
	bp.Cut()
	cutAt := time.Now()
	became := b.WaitLog(leaseTimeout+30*time.Second, "became leader")
	t.Logf("follower took over %v after the cut (leaseTimeout %v)", lineTime(became).Sub(cutAt).Round(time.Millisecond), leaseTimeout)
	w.verify(t)
	before := total(committedRounds(a))
	dbp.Heal()
	bp.Heal()
	brptest.Eventually(t, time.Minute, func() error {
		if st := status(t, a); st.Leader || st.Holder == st.Instance {
			return errorf("healed old leader still leads: %+v", st)
		}
		return nil
	})
	if after := total(committedRounds(a)); after != before {
		t.Fatalf("healed old leader committed %d rounds after the takeover", after-before)
	}
	for e := range committedRounds(a) {
		if e >= int64(became["epoch"].(float64)) {
			t.Fatalf("old leader committed a round under epoch %d, the new leader's is %v", e, became["epoch"])
		}
	}
}

// The leader is cut off from the broker only: it stays alive and keeps its database, but its
// rounds fail. After leaseTimeout without progress it hands the lease over by itself (it would
// otherwise hold it for good: its heartbeat reaches the database) and the follower delivers.
func TestLeaderCutOffFromBrokerHandsLeaseOver(t *testing.T) {
	t.Parallel()
	w := newWorld(t, load.Spec{N: 5000, Personen: 500, Multi: 0.3, Seed: 63})
	bp := brptest.NewProxy(t, w.broker.Addr)
	bin := brptest.Build(t, "cmd/publicatie")
	a := w.publisherProc(t, "publicatie-a", bin, "BRP_STOMP_ADDR="+bp.Addr(), "BRP_LEVERING_ADMHNDPUBLICATIE_MAXINLEVERING=200")
	a.WaitLeader(20 * time.Second)
	b := w.publisherProc(t, "publicatie-b", bin, "BRP_LEVERING_ADMHNDPUBLICATIE_MAXINLEVERING=200")
	b.WaitReady(20 * time.Second)
	w.consumers(t, 3, 2)
	w.waitDelivered(t, 100)
	bp.Cut()
	cutAt := time.Now()
	yielded := a.WaitLog(leaseTimeout+time.Minute, "rounds made no progress for the lease timeout; handing the lease over")
	became := b.WaitLeader(leaseTimeout + time.Minute)
	t.Logf("leader handed over %v after the cut (stalled for %v, last error %q); follower leads %v after the cut",
		lineTime(yielded).Sub(cutAt).Round(time.Millisecond), yielded["stalled_for_seconds"], yielded["last_error"],
		became.Sub(cutAt).Round(time.Millisecond))
	w.verify(t)
	if n := scrape(t, a)["brp_levering_lease_yields_total"]; n < 1 {
		t.Fatalf("lease_yields_total %v on the leader that handed over", n)
	}
	bp.Heal()
}
