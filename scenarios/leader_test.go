package scenarios

import (
	"fmt"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/brp/levering/internal/brptest"
	"github.com/brp/levering/internal/load"
	"github.com/brp/levering/publicatie"
)

const leaseTimeout = publicatie.MinLeaseTimeout

func TestTwoPublishersStartedTogetherOnlyOnePublishes(t *testing.T) {
	t.Parallel()
	w := newWorld(t, load.Spec{N: 3000, Personen: 300, Multi: 0.3, Seed: 1})
	w.consumers(t, 4, 2)
	bin := brptest.Build(t, "cmd/publicatie")
	var a, b *brptest.Proc
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); a = w.publisherProc(t, "publicatie-a", bin) }()
	go func() { defer wg.Done(); b = w.publisherProc(t, "publicatie-b", bin) }()
	wg.Wait()
	w.verify(t)

	ra, rb := total(committedRounds(a)), total(committedRounds(b))
	t.Logf("rounds committed: a=%d b=%d", ra, rb)
	if (ra == 0) == (rb == 0) {
		t.Fatalf("rounds committed: a=%d b=%d; want exactly one publisher to publish", ra, rb)
	}
	leader, follower := a, b
	if rb > 0 {
		leader, follower = b, a
	}
	sl, sf := status(t, leader), status(t, follower)
	if !sl.Leader || sf.Leader || sl.Holder != sl.Instance || sf.Holder != sl.Instance || sl.Epoch < 1 ||
		sl.Cluster != "default" || sl.SecondsSinceActivity < 0 || sl.SecondsSinceActivity > leaseTimeout.Seconds() {
		t.Fatalf("status documents: leader %+v, follower %+v", sl, sf)
	}
}

func TestLeaderKilledFollowerTakesOver(t *testing.T) {
	t.Parallel()
	w := newWorld(t, load.Spec{N: 5000, Personen: 500, Multi: 0.3, Excluded: 0.05, Seed: 2})
	bin := brptest.Build(t, "cmd/publicatie")
	a := w.publisherProc(t, "publicatie-a", bin, "BRP_LEVERING_ADMHNDPUBLICATIE_MAXINLEVERING=200")
	a.WaitLeader(20 * time.Second)
	b := w.publisherProc(t, "publicatie-b", bin, "BRP_LEVERING_ADMHNDPUBLICATIE_MAXINLEVERING=200")
	b.WaitReady(20 * time.Second)
	// The consumers start only now, so that the leader dies while work flows but early in the
	// run however fast this machine delivers.
	w.consumers(t, 4, 2)
	w.waitDelivered(t, 100)
	// The follower connects to the broker ahead of a takeover (issue 49), so that it publishes
	// without dialling first once it leads.
	brptest.Eventually(t, 20*time.Second, func() error {
		if l := logged(b, "connected to broker"); l == nil || l["follower"] != true {
			return fmt.Errorf("the follower has not connected to the broker: %v", l)
		}
		return nil
	})

	a.Kill()
	killed := time.Now()
	if d := w.delivered(t); d >= 4000 {
		t.Fatalf("%d of ~4750 already delivered when the leader was killed; the run is too short to test takeover", d)
	}
	took := b.WaitLeader(leaseTimeout + 30*time.Second).Sub(killed)
	t.Logf("takeover %v after kill -9 (leaseTimeout %v)", took.Round(time.Millisecond), leaseTimeout)
	// The lease timeout after the leader's last activity, plus one follower poll (2 s), plus slack for
	// a loaded machine.
	if limit := leaseTimeout + 2*time.Second + 3*time.Second; took > limit {
		t.Fatalf("takeover took %v, want at most %v", took, limit)
	}
	w.verify(t)
	if n := len(b.Lines("connected to broker")); n != 1 {
		t.Errorf("the new leader connected to the broker %d times, want once: as a follower, before the takeover", n)
	}
}

func TestSplitBrainPausedLeaderCannotCommit(t *testing.T) {
	t.Parallel()
	w := newWorld(t, load.Spec{N: 3000, Personen: 300, Multi: 0.3, Seed: 3})
	w.consumers(t, 4, 2)
	bin := brptest.Build(t, "cmd/publicatie", "faults")
	// The leader stops itself (SIGSTOP) in its third round, after the broker commit and before
	// the database commit: the worst moment, its messages are already on the queue.
	a := w.publisherProc(t, "publicatie-a", bin, "BRP_FAULT=publicatie.after_broker_commit:stop:3")
	a.WaitLeader(20 * time.Second)
	b := w.publisherProc(t, "publicatie-b", bin)
	a.WaitLog(30*time.Second, "fault injected")
	before := committedRounds(a)
	epochA := int64(0)
	for e := range before {
		epochA = max(epochA, e)
	}

	became := b.WaitLog(leaseTimeout+30*time.Second, "became leader")
	if e := int64(became["epoch"].(float64)); e <= epochA {
		t.Fatalf("new leader's epoch %d not above the old leader's %d", e, epochA)
	}
	b.WaitLog(30*time.Second, "round committed")
	a.Signal(syscall.SIGCONT)

	w.verify(t)
	// The resumed leader's round was fenced off: it committed nothing after it resumed.
	brptest.Eventually(t, 20*time.Second, func() error {
		if len(a.Lines("lost the lease during a round; the round was rolled back")) == 0 && len(a.Lines("publication round failed, retrying")) == 0 {
			return errorf("resumed leader has not reported its failed round")
		}
		return nil
	})
	t.Logf("resumed leader: %d fenced rounds, %d failed rounds (session ended by the database)",
		len(a.Lines("lost the lease during a round; the round was rolled back")), len(a.Lines("publication round failed, retrying")))
	if after := committedRounds(a); total(after) != total(before) {
		t.Fatalf("resumed leader committed rounds: before the pause %v, after %v", before, after)
	}
	if st := status(t, a); st.Leader {
		t.Fatalf("resumed old leader still says it leads: %+v", st)
	}
}

func TestStandaloneModeWarnsAndPublishesWithoutLease(t *testing.T) {
	t.Parallel()
	w := newWorld(t, load.Spec{N: 500, Personen: 100, Multi: 0.3, Seed: 4})
	w.consumers(t, 2, 2)
	p := w.publisherProc(t, "publicatie", brptest.Build(t, "cmd/publicatie"), "BRP_LEVERING_ADMHNDPUBLICATIE_STANDALONE=true")
	warn := p.WaitLog(20*time.Second, publicatie.StandaloneWarning)
	if warn["level"] != "WARN" {
		t.Fatalf("standalone warning logged at level %v", warn["level"])
	}
	w.verify(t)
	var holders []string
	if err := w.db.Select(&holders, `select holder from publicatie_lease where holder <> ''`); err != nil {
		t.Fatal(err)
	}
	if len(holders) != 0 {
		t.Fatalf("standalone publisher took a lease: %v", holders)
	}
	if st := status(t, p); !st.Leader || !st.Standalone || !slices.Contains([]string{""}, st.Holder) {
		t.Fatalf("status %+v", st)
	}
}
