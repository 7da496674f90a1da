package publicatie

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/brp/levering/handeling"
	"github.com/brp/levering/internal/brptest"
)

// The elector's own tests: the lease's rules against the real table, with a clock the test
// moves (elector.now) for what the elector judges by its own clock, the stall and the
// cooldown. What the lease judges by the database clock (a holder's silence) is made by
// setting the heartbeat back.

// testClock is a clock that moves only when the test says so.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

const testLeaseTimeout = 10 * time.Second

// newTestElector is instance holder's elector in cluster on db, on clock.
func newTestElector(db *sqlx.DB, cluster, holder string, clock *testClock) *elector {
	return &elector{
		lease:        &lease{db: db, cluster: cluster, holder: holder, leaseTimeout: testLeaseTimeout},
		leaseTimeout: testLeaseTimeout,
		log:          slog.New(slog.NewTextHandler(io.Discard, nil)),
		m:            newMetrics(nil),
		now:          clock.now,
	}
}

// electors are instances a and b of cluster on a database of the test's own, on one clock.
func electors(t *testing.T, cluster string) (db *sqlx.DB, clock *testClock, a, b *elector) {
	t.Helper()
	db, _ = brptest.DB(t)
	clock = &testClock{t: t0}
	return db, clock, newTestElector(db, cluster, "a", clock), newTestElector(db, cluster, "b", clock)
}

func mustAcquire(t *testing.T, e *elector) int64 {
	t.Helper()
	epoch, err := e.acquire(context.Background())
	if err != nil {
		t.Fatalf("%s: acquire: %v", e.lease.holder, err)
	}
	return epoch
}

func leaseOf(t *testing.T, e *elector) handeling.Lease {
	t.Helper()
	s, err := e.lease.state(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// silence sets the cluster's heartbeat back by more than the lease timeout on the database clock, as
// if its holder had stopped renewing.
func silence(t *testing.T, db *sqlx.DB, cluster string) {
	t.Helper()
	db.MustExec(`update publicatie_lease set heartbeat = now() - interval '1 hour' where cluster = $1`, cluster)
}

// Two instances that try to take a free lease at the same moment: exactly one wins, and the
// other stays follower while the winner renews.
func TestElectorAcquireRace(t *testing.T) {
	db, _ := brptest.DB(t)
	clock := &testClock{t: t0}
	for i := range 10 {
		cluster := "race" + string(rune('a'+i))
		a, b := newTestElector(db, cluster, "a", clock), newTestElector(db, cluster, "b", clock)
		// Half the races are for a cluster's first lease (both insert its row), half for one
		// whose row is there.
		if i%2 == 1 {
			if err := a.lease.ensureRow(context.Background(), db); err != nil {
				t.Fatal(err)
			}
		}
		start := make(chan struct{})
		epochs := make([]int64, 2)
		var wg sync.WaitGroup
		for j, e := range []*elector{a, b} {
			wg.Go(func() {
				<-start
				epochs[j] = mustAcquire(t, e)
			})
		}
		close(start)
		wg.Wait()
		if (epochs[0] > 0) == (epochs[1] > 0) {
			t.Fatalf("race %d: epochs %v, want exactly one leader", i, epochs)
		}
		winner, loser := a, b
		if epochs[1] > 0 {
			winner, loser = b, a
		}
		if s := leaseOf(t, winner); s.Holder != winner.lease.holder || s.Epoch != winner.current() || s.Epoch != 1 {
			t.Fatalf("race %d: lease %+v, want held by %s at epoch 1", i, s, winner.lease.holder)
		}
		if got := testutil.ToFloat64(winner.m.leader); got != 1 {
			t.Errorf("race %d: winner's leader gauge %v", i, got)
		}
		// The winner renews; the loser keeps trying and keeps losing.
		winner.check(context.Background(), false)
		if epoch := mustAcquire(t, loser); epoch != 0 || loser.current() != 0 {
			t.Fatalf("race %d: %s took a lease held by %s (epoch %d)", i, loser.lease.holder, winner.lease.holder, epoch)
		}
	}
}

// A round's fence fails with ErrLostLease once another instance took the lease (its holder
// was silent for the lease timeout); the new holder's fence passes, and the old leader's next check
// turns it follower.
func TestElectorFenceAfterTakeover(t *testing.T) {
	db, _, a, b := electors(t, "fence")
	ctx := context.Background()
	ea := mustAcquire(t, a)
	if ea == 0 {
		t.Fatal("a did not take a free lease")
	}
	if err := a.fence(ctx, db, ea); err != nil {
		t.Fatalf("fence of the holder: %v", err)
	}
	if eb := mustAcquire(t, b); eb != 0 {
		t.Fatalf("b took a renewed lease: epoch %d", eb)
	}
	silence(t, db, "fence")
	eb := mustAcquire(t, b)
	if eb != ea+1 {
		t.Fatalf("b after a's silence: epoch %d, want %d", eb, ea+1)
	}
	if err := a.fence(ctx, db, ea); !errors.Is(err, ErrLostLease) {
		t.Fatalf("fence of the old epoch: %v, want ErrLostLease", err)
	}
	if err := b.fence(ctx, db, eb); err != nil {
		t.Fatalf("fence of the new holder: %v", err)
	}
	if err := a.fence(ctx, db, 0); err != nil {
		t.Fatalf("standalone (epoch 0) is not fenced: %v", err)
	}
	// a still believes it leads until its next check.
	if a.current() != ea {
		t.Fatalf("a's epoch %d before its check, want %d", a.current(), ea)
	}
	a.check(ctx, false)
	if a.current() != 0 || testutil.ToFloat64(a.m.leader) != 0 {
		t.Fatalf("a after its check: epoch %d, leader gauge %v; want follower", a.current(), testutil.ToFloat64(a.m.leader))
	}
	if s := leaseOf(t, a); s.Holder != "b" || s.Epoch != eb {
		t.Fatalf("lease %+v, want b at epoch %d", s, eb)
	}
}

// The fence's row lock makes a takeover wait: while a round's transaction holds it, another
// instance cannot take the lease, even one whose holder looks silent.
func TestElectorFenceHoldsOffATakeover(t *testing.T) {
	db, _, a, b := electors(t, "hold")
	ctx := context.Background()
	ea := mustAcquire(t, a)
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck // the test ends it
	if err := a.fence(ctx, tx, ea); err != nil {
		t.Fatal(err)
	}
	if eb := mustAcquire(t, b); eb != 0 {
		t.Fatalf("b took the lease during a's round: epoch %d", eb)
	}
	if err := tx.Commit(); err != nil {
		t.Fatalf("a's round commits: %v", err)
	}
}

// A leader whose rounds make no progress for the lease timeout (its clock, not the database's) hands
// the lease over: it stops leading, its round in progress ends with errStalled, the lease is
// free for a follower at once, and it does not take the lease back for the lease timeout. A round
// that succeeds in time keeps the lease.
func TestElectorYieldsOnStall(t *testing.T) {
	_, clock, a, b := electors(t, "stall")
	ctx := context.Background()
	ea := mustAcquire(t, a)

	// Progress: a round that succeeds clears the stall, however long ago the last one began.
	_, cancel := context.WithCancelCause(ctx)
	done := a.roundStarting(cancel)
	clock.advance(testLeaseTimeout / 2)
	a.check(ctx, false)
	done(nil)
	clock.advance(2 * testLeaseTimeout)
	a.check(ctx, false)
	if a.current() != ea {
		t.Fatalf("a leader with progress: epoch %d, want %d", a.current(), ea)
	}

	// A stall: the round runs and fails for longer than the lease timeout.
	roundCtx, cancel := context.WithCancelCause(ctx)
	done = a.roundStarting(cancel)
	done(errors.New("broker hangs"))
	done = a.roundStarting(cancel)
	clock.advance(testLeaseTimeout)
	a.check(ctx, false)
	if a.current() != ea {
		t.Fatal("a yielded at the lease timeout, want only after it")
	}
	clock.advance(time.Millisecond)
	a.check(ctx, false)
	if a.current() != 0 {
		t.Fatal("a still leads after a stall longer than the lease timeout")
	}
	if got := context.Cause(roundCtx); !errors.Is(got, errStalled) {
		t.Fatalf("the round in progress ended with %v, want errStalled", got)
	}
	if got := testutil.ToFloat64(a.m.yields); got != 1 {
		t.Fatalf("yields %v, want 1", got)
	}
	done(context.Cause(roundCtx))
	// The release runs beside the check; b takes the lease without waiting for the lease timeout.
	var eb int64
	brptest.Eventually(t, 10*time.Second, func() error {
		if eb = mustAcquire(t, b); eb == 0 {
			return errors.New("b has not taken the handed-over lease")
		}
		return nil
	})
	if eb != ea+1 {
		t.Fatalf("b's epoch %d, want %d", eb, ea+1)
	}
	// a cools down for leaseTimeout: even a free lease is left to the others.
	b.release()
	if epoch := mustAcquire(t, a); epoch != 0 {
		t.Fatalf("a took the lease back during its cooldown: epoch %d", epoch)
	}
	clock.advance(testLeaseTimeout)
	if epoch := mustAcquire(t, a); epoch != eb+1 {
		t.Fatalf("a after its cooldown: epoch %d, want %d", epoch, eb+1)
	}
}
