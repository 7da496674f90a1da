package scenarios

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/brp/levering/internal/brptest"
	"github.com/brp/levering/internal/load"
	"github.com/brp/levering/publicatie"
)

// waitForLockWaiter waits until some session of the world's database waits for a row lock:
// the consumer that received a publication before the publisher committed.
func (w *world) waitForLockWaiter(ctx context.Context) error {
	for ctx.Err() == nil {
		var n int
		if err := w.db.GetContext(ctx, &n, `select count(*) from pg_stat_activity
			where datname = current_database() and wait_event_type = 'Lock'`); err != nil {
			return err
		}
		if n > 0 {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return ctx.Err()
}

// Seed scenario 1: a consumer gets the publication before the publisher's database commit. Its
// update waits for the publisher's row lock and then sees in_levering (commit) or NULL
// (rollback); either way the publisher's commit does not overwrite geleverd and the handeling
// is delivered once.
func TestSeedScenario1ConsumerBeforePublisherCommit(t *testing.T) {
	t.Parallel()
	for _, commitFails := range []bool{false, true} {
		t.Run(fmt.Sprintf("commit_fails=%v", commitFails), func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, load.Spec{N: 1, Personen: 1, Seed: 5})
			w.consumers(t, 1, 1)
			var rounds atomic.Int32
			w.publisher(t, publicatie.Config{Standalone: true, Hooks: publicatie.Hooks{
				AfterBrokerCommit: func(ctx context.Context, ids []int64) error {
					if rounds.Add(1) > 1 {
						return nil
					}
					ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
					defer cancel()
					if err := w.waitForLockWaiter(ctx); err != nil {
						t.Errorf("consumer never waited for the publisher's row lock: %v", err)
					}
					if commitFails {
						return errors.New("injected: database commit fails")
					}
					return nil
				},
			}})
			rep := w.verify(t)
			time.Sleep(300 * time.Millisecond) // a second delivery would show up by now
			if rep = w.verify(t); rep.Messages != 1 {
				t.Fatalf("%d verzending messages, want exactly 1", rep.Messages)
			}
		})
	}
}

// Seed scenario 2: the publisher's database commit fails after the broker commit. The
// handelingen are on the queue but still NULL; the next round publishes them again. The seed
// asks whether per-person order still holds: it does, because a handeling is NULL or
// in_levering until its first delivery commits, and either state holds back every later
// handeling of its persons. This test fails every third round after the broker commit while
// consumers run, over chains of up to 30 handelingen per person.
func TestSeedScenario2DatabaseCommitFailsAfterBrokerCommit(t *testing.T) {
	t.Parallel()
	w := newWorld(t, load.Spec{N: 1500, Personen: 50, Multi: 0.3, Seed: 6})
	w.consumers(t, 3, 2)
	var rounds, failed atomic.Int32
	w.publisher(t, publicatie.Config{Standalone: true, MaxInLevering: 40, Hooks: publicatie.Hooks{
		AfterBrokerCommit: func(context.Context, []int64) error {
			if rounds.Add(1)%3 == 0 {
				failed.Add(1)
				return errors.New("injected: database commit fails")
			}
			return nil
		},
	}})
	rep := w.verify(t)
	t.Logf("%d rounds, %d failed after the broker commit; %d verzending messages, %d duplicates",
		rounds.Load(), failed.Load(), rep.Messages, rep.Duplicates)
	if failed.Load() < 3 {
		t.Fatalf("only %d rounds failed; the scenario was not exercised", failed.Load())
	}
}

func TestPublisherKilledAfterBrokerCommit(t *testing.T) {
	t.Parallel()
	w := newWorld(t, load.Spec{N: 2000, Personen: 200, Multi: 0.3, Excluded: 0.05, Seed: 7})
	w.consumers(t, 3, 2)
	bin := brptest.Build(t, "cmd/publicatie", "faults")
	a := w.publisherProc(t, "publicatie-a", bin, "BRP_FAULT=publicatie.after_broker_commit:kill:3")
	a.WaitLog(30*time.Second, "fault injected")
	if code, err := a.Wait(10 * time.Second); err != nil || code != -1 {
		t.Fatalf("publisher not killed at the fault point: code %d, %v", code, err)
	}
	// Its replacement takes the lease once leaseTimeout has passed, then finishes the work.
	b := w.publisherProc(t, "publicatie-b", bin)
	b.WaitLeader(leaseTimeout + 30*time.Second)
	w.verify(t)
}

func TestConsumerKilledAfterVerzendingBeforeCommit(t *testing.T) {
	t.Parallel()
	w := newWorld(t, load.Spec{N: 1000, Personen: 100, Multi: 0.3, Seed: 8})
	// One handeling a publication: groups and bundles would carry these 1,000 in a few
	// batches, and the kill comes at a consumer's 20th (the chaos test kills consumers with groups).
	w.publisher(t, publicatie.Config{Standalone: true, GroupSize: 1})
	bin := brptest.Build(t, "cmd/mutatielevering", "faults")
	c1 := w.consumerProc(t, "mutatielevering-1", bin, "BRP_FAULT=mutatielevering.after_verzending:kill:20")
	w.consumerProc(t, "mutatielevering-2", bin)
	c1.WaitLog(30*time.Second, "fault injected")
	if _, err := c1.Wait(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	w.consumerProc(t, "mutatielevering-1b", bin)
	rep := w.verify(t)
	// The killed consumer's verzending message went out, its commit did not: the handeling was
	// delivered again, a duplicate with the same admhnd-id after the first occurrence.
	if rep.Duplicates < 1 {
		t.Fatalf("no duplicate on the verzending queue; the crash point was not exercised (%+v)", rep)
	}
	t.Logf("%d verzending messages, %d duplicates", rep.Messages, rep.Duplicates)
}

func TestConsumerKilledAfterCommitBeforeAck(t *testing.T) {
	t.Parallel()
	w := newWorld(t, load.Spec{N: 1000, Personen: 100, Multi: 0.3, Seed: 9})
	w.publisher(t, publicatie.Config{Standalone: true, GroupSize: 1}) // enough batches to reach the 20th, as above
	bin := brptest.Build(t, "cmd/mutatielevering", "faults")
	one := []string{"BRP_LEVERING_MUTATIELEVERING_WORKERS=1", "BRP_LEVERING_MUTATIELEVERING_PREFETCH=1"}
	c1 := w.consumerProc(t, "mutatielevering-1", bin, append(one, "BRP_FAULT=mutatielevering.after_db_commit:kill:20")...)
	c1.WaitLog(30*time.Second, "fault injected")
	if _, err := c1.Wait(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	c2 := w.consumerProc(t, "mutatielevering-2", bin, one...)
	rep := w.verify(t)
	// The unacknowledged publication came back and was absorbed: no second verzending message.
	if rep.Duplicates != 0 {
		t.Fatalf("%d duplicates on the verzending queue, want 0", rep.Duplicates)
	}
	if len(c2.Lines("already delivered; publication absorbed")) == 0 {
		t.Fatal("the redelivered publication was not seen by the second consumer")
	}
}

func TestConsumerKilledHoldingPrefetchedMessages(t *testing.T) {
	t.Parallel()
	w := newWorld(t, load.Spec{N: 1000, Personen: 1000, Seed: 10})
	w.publisher(t, publicatie.Config{Standalone: true, MaxInLevering: 300})
	bin := brptest.Build(t, "cmd/mutatielevering", "faults")
	// One worker and room for 200 prefetched publications; it freezes in its first batch,
	// before that batch's database commit.
	c1 := w.consumerProc(t, "mutatielevering-1", bin, "BRP_LEVERING_MUTATIELEVERING_WORKERS=1",
		"BRP_LEVERING_MUTATIELEVERING_PREFETCH=200", "BRP_FAULT=mutatielevering.after_verzending:stop:1")
	c1.WaitLog(30*time.Second, "fault injected")
	time.Sleep(500 * time.Millisecond)
	stalled := w.delivered(t)
	c1.Kill()
	w.consumerProc(t, "mutatielevering-2", bin)
	w.verify(t)
	if stalled != 0 {
		t.Fatalf("%d delivered while the only consumer was frozen in its first batch, want 0", stalled)
	}
}

// pipelineMidRun starts one publisher and three consumers (real processes) on private
// services and returns once a first part of the workload is delivered.
func pipelineMidRun(t *testing.T, svc *brptest.Services, seed uint64) (*world, *brptest.Proc, []*brptest.Proc) {
	t.Helper()
	w := newWorldOn(t, svc, load.Spec{N: 4000, Personen: 400, Multi: 0.3, Excluded: 0.05, Seed: seed})
	pub := w.publisherProc(t, "publicatie", brptest.Build(t, "cmd/publicatie"))
	var consumers []*brptest.Proc
	for i := range 3 {
		consumers = append(consumers, w.consumerProc(t, fmt.Sprintf("mutatielevering-%d", i+1), brptest.Build(t, "cmd/mutatielevering")))
	}
	w.waitDelivered(t, 500)
	return w, pub, consumers
}

func TestBrokerRestartedMidRun(t *testing.T) {
	t.Parallel()
	svc := brptest.PrivateServices(t)
	w, _, consumers := pipelineMidRun(t, svc, 11)
	svc.RestartBroker()
	w.verify(t)
	for _, c := range consumers {
		if lost, connected := len(c.Lines("broker connection lost, reconnecting")), len(c.Lines("connected to broker")); lost == 0 || connected < 2 {
			t.Fatalf("%s did not log losing and regaining the broker: %d lost, %d connected; db: %d", c.Name, lost, connected,
				len(c.Lines("database unavailable, retrying")))
		}
	}
}

// TestDatabaseRestartedMidRun takes PostgreSQL away while consumers hold published work,
// whatever the machine's speed: the consumers are paused (SIGSTOP) until publications wait for
// them, the database stops, and the consumers resume into the outage. It comes back only after
// a consumer and the publisher said they lost it.
func TestDatabaseRestartedMidRun(t *testing.T) {
	t.Parallel()
	svc := brptest.PrivateServices(t)
	w, pub, consumers := pipelineMidRun(t, svc, 12)
	for _, c := range consumers {
		c.Signal(syscall.SIGSTOP)
	}
	brptest.Eventually(t, time.Minute, func() error {
		if n := brptest.Statuses(t, w.db)["in_levering"]; n == 0 {
			return errorf("no publication waits for the paused consumers")
		}
		return nil
	})
	svc.StopDB()
	for _, c := range consumers {
		c.Signal(syscall.SIGCONT)
	}
	brptest.Eventually(t, time.Minute, func() error {
		if !slices.ContainsFunc(consumers, func(c *brptest.Proc) bool {
			return len(c.Lines("database unavailable, retrying")) > 0
		}) {
			return errorf("no consumer logged that the database is unavailable")
		}
		if len(pub.Lines("publication round failed, retrying")) == 0 &&
			len(pub.Lines("notification listener lost the database, reconnecting")) == 0 {
			return errorf("the publisher did not log losing the database")
		}
		return nil
	})
	svc.StartDB()
	w.verify(t)
}
