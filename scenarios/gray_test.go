package scenarios

// Gray failures: processes that stop without dying (SIGSTOP, a VM pause) or lose their network
// without their sockets closing. docs/contract.md guarantee 7: such a process holds no lock, message
// or lease for longer than a documented bound, its work is taken over, and everything else
// keeps flowing. docs/robustness.md has the bounds and the measured times.

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/brp/levering/broker"
	"github.com/brp/levering/internal/brptest"
	"github.com/brp/levering/internal/load"
)

// brokers are the brokers a gray-failure test runs on where the broker matters.
func brokers(t testing.TB) map[string]broker.Config {
	return map[string]broker.Config{"ActiveMQ": brptest.Broker(), "RabbitMQ": brptest.RabbitMQ(t)}
}

// idleInTransaction counts the sessions of p (by application_name) that are idle inside a
// transaction: what a frozen process holds in the database.
func (w *world) idleInTransaction(t testing.TB, p *brptest.Proc, command string) int {
	t.Helper()
	var n int
	if err := w.db.Get(&n, `select count(*) from pg_stat_activity
		where application_name like $1 || '%' and state = 'idle in transaction'`, p.AppNamePrefix(command)); err != nil {
		t.Fatal(err)
	}
	return n
}

// A consumer frozen for good at each point of a batch: everything is delivered by the others,
// in order, while it stays frozen. After the locking statement and after the verzending send
// it holds row locks in an open transaction, which the database ends; at every point the
// broker takes its unacknowledged publications back once its heart-beats stop.
func TestConsumerFrozenForGood(t *testing.T) {
	t.Parallel()
	cases := []struct {
		broker, point string
		holdsLocks    bool
	}{
		{"ActiveMQ", "after_lock", true},
		{"ActiveMQ", "after_verzending", true},
		{"ActiveMQ", "after_db_commit", false},
		{"RabbitMQ", "after_lock", true},
	}
	bs := brokers(t)
	for i, tc := range cases {
		t.Run(tc.broker+"/"+tc.point, func(t *testing.T) {
			t.Parallel()
			w := newWorldBroker(t, bs[tc.broker], load.Spec{N: 3000, Personen: 300, Multi: 0.3, Excluded: 0.05, Seed: uint64(40 + i)})
			w.publisherProc(t, "publicatie", brptest.Build(t, "cmd/publicatie"))
			frozen := w.consumerProc(t, "mutatielevering-frozen", brptest.Build(t, "cmd/mutatielevering", "faults"),
				"BRP_FAULT=mutatielevering."+tc.point+":stop:3")
			for i := range 2 {
				w.consumerProc(t, fmt.Sprintf("mutatielevering-%d", i+1), brptest.Build(t, "cmd/mutatielevering"))
			}
			frozen.WaitLog(time.Minute, "fault injected")
			froze := time.Now()
			if tc.holdsLocks {
				// Its other worker may be frozen inside a batch too.
				if n := w.idleInTransaction(t, frozen, "mutatielevering"); n < 1 {
					t.Fatalf("%d sessions of the frozen consumer idle in transaction right after the freeze, want at least 1", n)
				}
			}
			rep := w.verify(t)
			t.Logf("all delivered %v after the freeze: %d verzending messages, %d duplicates",
				time.Since(froze).Round(time.Second), rep.Messages, rep.Duplicates)
			if !frozen.Frozen() {
				t.Fatal("the frozen consumer is not stopped any more; the others did not do its work alone")
			}
			if n := w.idleInTransaction(t, frozen, "mutatielevering"); n != 0 {
				t.Fatalf("%d sessions of the frozen consumer still idle in transaction", n)
			}
		})
	}
}

// A consumer frozen for 60 s after its verzending send (its transaction open, its batch
// unacknowledged), then resumed: the others delivered its work meanwhile; the database ended
// its transaction and the broker its connections, so nothing it does after SIGCONT commits
// or acknowledges its old batch. It then goes on with new work. Its late sends, if any, are
// duplicates with the same admhnd-id after the first occurrence, which verify accepts.
func TestConsumerFrozenThenResumed(t *testing.T) {
	t.Parallel()
	w := makeEmptyWorld(t, nil, brptest.Broker(), load.Spec{N: 4000, Personen: 400, Multi: 0.3, Seed: 50})
	first, second := w.hs[:2000], w.hs[2000:]
	if err := load.Insert(context.Background(), w.db, first); err != nil {
		t.Fatal(err)
	}
	w.publisherProc(t, "publicatie", brptest.Build(t, "cmd/publicatie"))
	frozen := w.consumerProc(t, "mutatielevering-frozen", brptest.Build(t, "cmd/mutatielevering", "faults"),
		"BRP_FAULT=mutatielevering.after_verzending:stop:3")
	for i := range 2 {
		w.consumerProc(t, fmt.Sprintf("mutatielevering-%d", i+1), brptest.Build(t, "cmd/mutatielevering"))
	}
	frozen.WaitLog(time.Minute, "fault injected")
	time.Sleep(60 * time.Second)
	if !frozen.Frozen() {
		t.Fatal("the consumer did not stay frozen for 60 s")
	}
	if n := w.idleInTransaction(t, frozen, "mutatielevering"); n != 0 {
		t.Fatalf("after 60 s the frozen consumer still has %d sessions idle in transaction", n)
	}
	resumed := time.Now()
	frozen.Signal(syscall.SIGCONT)
	// Its old batch fails: the database ended the transaction, or the broker the connection.
	brptest.Eventually(t, time.Minute, func() error {
		if len(frozen.Lines("database unavailable, retrying")) == 0 && len(frozen.Lines("broker connection lost, reconnecting")) == 0 {
			return errorf("the resumed consumer has not reported that its old batch failed")
		}
		return nil
	})
	if err := load.Insert(context.Background(), w.db, second); err != nil {
		t.Fatal(err)
	}
	rep := w.verify(t)
	var after int
	for _, l := range frozen.Lines("handeling geleverd") {
		if lineTime(l).After(resumed) {
			after++
		}
	}
	t.Logf("%d verzending messages, %d duplicates; the resumed consumer delivered %d handelingen afterwards",
		rep.Messages, rep.Duplicates, after)
	if after == 0 {
		t.Fatal("the resumed consumer delivered nothing of the second wave")
	}
}

// A consumer frozen after its locking statement, on a broker that hands its publications back
// (heart-beats every second, so in about 3 s) well before the database ends its transaction
// (20 s for this process): the other consumers meet its row locks, wait in bounded steps
// (lock_timeout) and log the holder once, by its application_name.
func TestLockWaitNamesTheFrozenHolder(t *testing.T) {
	t.Parallel()
	w := newWorld(t, load.Spec{N: 2000, Personen: 200, Multi: 0.3, Seed: 51})
	w.publisherProc(t, "publicatie", brptest.Build(t, "cmd/publicatie"))
	frozen := w.consumerProc(t, "mutatielevering-frozen", brptest.Build(t, "cmd/mutatielevering", "faults"),
		"BRP_FAULT=mutatielevering.after_lock:stop:3", "BRP_STOMP_HEARTBEAT=1s",
		"BRP_DATABASE_IDLE_IN_TRANSACTION_TIMEOUT=20s")
	var others []*brptest.Proc
	for i := range 2 {
		others = append(others, w.consumerProc(t, fmt.Sprintf("mutatielevering-%d", i+1), brptest.Build(t, "cmd/mutatielevering")))
	}
	frozen.WaitLog(time.Minute, "fault injected")
	w.verify(t)
	var named []map[string]any
	for _, c := range others {
		named = append(named, c.Lines("rows locked by another session; retrying")...)
	}
	if len(named) == 0 {
		t.Fatal("no consumer logged that it waited for the frozen consumer's row locks")
	}
	for _, l := range named {
		holders := fmt.Sprint(l["lock_holders"])
		if !strings.Contains(holders, frozen.AppNamePrefix("mutatielevering")) || !strings.Contains(holders, "idle in transaction") {
			t.Fatalf("lock wait logged without naming the frozen holder: %v", l)
		}
	}
	t.Logf("%d lock waits logged, e.g. %v", len(named), named[0]["lock_holders"])
}
