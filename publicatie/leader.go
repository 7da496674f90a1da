package publicatie

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/brp/levering/internal/dbsession"
)

// elector is this instance's part in the cluster's lease (the polling cluster): it takes the
// lease when it is free (acquire), keeps it while the rounds make progress (keep), hands it
// over when they do not (yield) and at shutdown (release), and fences each round's commit.
// The rounds read only its epoch; everything else about leadership happens here.
type elector struct {
	lease        *lease
	leaseTimeout time.Duration
	log          *slog.Logger
	m            *metrics

	epoch atomic.Int64 // current lease epoch; 0 while follower
	// stalledSince is when this process's rounds stopped succeeding (unix ns): the start of
	// the round in progress, or of the first of a run of failed rounds; 0 while they succeed
	// or it waits between successful rounds. A leader stalled for longer than the lease timeout hands
	// its lease over (keep): alive is not the same as making progress.
	stalledSince atomic.Int64
	lastError    atomic.Pointer[string]
	// cooldownUntil (unix ns) keeps a leader that handed its lease over from taking it back
	// at once, so that another instance gets the chance.
	cooldownUntil atomic.Int64
	cancelRound   atomic.Pointer[context.CancelCauseFunc]
	// now is the clock that stalls and the cooldown are judged by: time.Now when nil. Tests
	// set their own, so that the lease timeout passes without waiting for it.
	now func() time.Time
}

// clock is the time now on the elector's clock.
func (e *elector) clock() time.Time {
	if e.now != nil {
		return e.now()
	}
	return time.Now()
}

// errStalled ends a round whose leader handed the lease over for lack of progress.
var errStalled = errors.New("publicatie: no progress for the lease timeout; lease handed over")

// current is the epoch this instance leads under, 0 while it follows.
func (e *elector) current() int64 { return e.epoch.Load() }

// acquire returns the epoch this instance leads under, taking the lease if it is free and this
// instance is not cooling down after a yield; 0 if another instance leads.
func (e *elector) acquire(ctx context.Context) (int64, error) {
	if epoch := e.epoch.Load(); epoch > 0 {
		return epoch, nil
	}
	if e.clock().UnixNano() < e.cooldownUntil.Load() {
		return 0, nil
	}
	epoch, err := e.lease.acquire(ctx)
	if err != nil || epoch == 0 {
		return 0, err
	}
	e.stalledSince.Store(0)
	e.epoch.Store(epoch)
	e.m.leader.Set(1)
	e.log.Info("became leader", slog.Int64("epoch", epoch))
	return epoch, nil
}

// roundStarting registers the round about to run: cancel ends it when the lease is handed over.
// It returns the function to call with the round's outcome.
func (e *elector) roundStarting(cancel context.CancelCauseFunc) (done func(error)) {
	e.cancelRound.Store(&cancel)
	e.stalledSince.CompareAndSwap(0, e.clock().UnixNano())
	return func(err error) {
		e.cancelRound.Store(nil)
		if err == nil {
			e.stalledSince.Store(0)
			return
		}
		msg := err.Error()
		e.lastError.Store(&msg)
	}
}

// fence checks, inside the round's transaction q, that the lease of epoch is still ours,
// renewing it: the row lock this takes makes a takeover wait until the round commits, so no
// two epochs ever commit rounds at the same time. Epoch 0 (standalone) is not fenced.
func (e *elector) fence(ctx context.Context, q execer, epoch int64) error {
	if epoch == 0 {
		return nil
	}
	if ok, err := e.lease.renew(ctx, q, epoch); err != nil {
		return dbErr(err)
	} else if !ok {
		return ErrLostLease
	}
	return nil
}

// keep records polling activity while this instance leads and its rounds make progress, so
// that a round waiting a little for the broker does not look like a dead leader, while a leader
// whose rounds have not succeeded for the lease timeout (stuck on a hung dependency, cut off from the
// broker) hands the lease over instead of holding it alive and useless. It checks every
// the lease timeout/5 and returns when ctx ends.
func (e *elector) keep(ctx context.Context) {
	t := time.NewTicker(e.leaseTimeout / 5)
	defer t.Stop()
	var failing bool
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		failing = e.check(ctx, failing)
	}
}

// check is one of keep's checks: while this instance leads, it yields if the rounds have
// stalled for longer than the lease timeout, else renews the lease and turns follower if another
// instance took it. failing says whether the last renewal failed (it is logged once per run
// of failures); check returns whether this one did.
func (e *elector) check(ctx context.Context, failing bool) bool {
	epoch := e.epoch.Load()
	if epoch == 0 {
		return failing
	}
	if since := e.stalledSince.Load(); since != 0 {
		if stalled := e.clock().Sub(time.Unix(0, since)); stalled > e.leaseTimeout {
			e.yield(ctx, epoch, stalled)
			return failing
		}
	}
	ok, err := e.lease.renew(ctx, e.lease.db, epoch)
	if err != nil {
		if !failing {
			attrs := []any{slog.Any("error", err)}
			if dbsession.IsLockTimeout(err) {
				attrs = append(attrs, slog.Any("lock_holders", dbsession.Describe(ctx, e.lease.db, "publicatie_lease")))
			}
			e.log.Warn("could not record polling activity", attrs...)
		}
		return true
	}
	if failing {
		e.log.Info("polling activity recorded again")
	}
	if !ok && e.lose(epoch) {
		e.log.Warn("lease taken over by another instance; now follower", slog.Int64("epoch", epoch))
	}
	return false
}

// yield hands the lease of epoch over because this leader's rounds have made no progress for
// stalled: it stops leading at once, ends the round in progress, frees the lease for a
// follower's next check and does not take it back for the lease timeout.
func (e *elector) yield(ctx context.Context, epoch int64, stalled time.Duration) {
	if !e.lose(epoch) {
		return
	}
	e.cooldownUntil.Store(e.clock().Add(e.leaseTimeout).UnixNano())
	e.m.yields.Inc()
	if cancel := e.cancelRound.Load(); cancel != nil {
		(*cancel)(errStalled)
	}
	lastErr := ""
	if err := e.lastError.Load(); err != nil {
		lastErr = *err
	}
	e.log.Warn("rounds made no progress for the lease timeout; handing the lease over", slog.Int64("epoch", epoch),
		slog.Duration("stalled_for", stalled.Round(time.Millisecond)), slog.Duration("lease_timeout", e.leaseTimeout),
		slog.String("last_error", lastErr))
	// The release is bounded by the session's timeouts; if the database is what hangs, the
	// lease simply expires the lease timeout after the last renewal.
	go func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := e.lease.release(rctx, epoch); err != nil {
			e.log.Warn("could not hand the lease over; a follower takes over after the lease timeout", slog.Any("error", err))
		}
	}()
}

// lose turns this instance into a follower if it still led under epoch.
func (e *elector) lose(epoch int64) bool {
	if !e.epoch.CompareAndSwap(epoch, 0) {
		return false
	}
	e.m.leader.Set(0)
	return true
}

// release hands the lease over at shutdown, within 5 s.
func (e *elector) release() {
	e.m.leader.Set(0)
	epoch := e.epoch.Swap(0)
	if epoch == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.lease.release(ctx, epoch); err != nil {
		e.log.Warn("could not hand the lease over; a follower takes over after the lease timeout", slog.Any("error", err))
		return
	}
	e.log.Info("lease handed over", slog.Int64("epoch", epoch))
}
