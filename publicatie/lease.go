package publicatie

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/brp/levering/handeling"
	"github.com/brp/levering/internal/dbsession"
)

// ErrLostLease means the round's fence found that another instance holds the lease now; the
// round was rolled back.
var ErrLostLease = errors.New("publicatie: lease lost")

// lease is the cluster's publication right, kept in publicatie_lease (its statements are
// handeling's Lease*SQL) and judged by the database clock only. The epoch grows by one on every
// takeover; a round commits only if the epoch it was started under is still the current one.
type lease struct {
	db           *sqlx.DB
	cluster      string
	holder       string
	leaseTimeout time.Duration
}

// ensureRow creates the cluster's row if it is missing. Where it exists and a round holds it
// (the fence's update), the insert waits for that round as the update would: q bounds it.
func (l *lease) ensureRow(ctx context.Context, q execer) error {
	_, err := q.ExecContext(ctx, handeling.LeaseEnsureSQL, l.cluster)
	if err != nil {
		return fmt.Errorf("lease: create row: %w", err)
	}
	return nil
}

// acquire takes the lease if it is free or its holder has been silent for longer than
// the lease timeout. It returns the new epoch, or 0 if another instance holds the lease. The row lock
// makes simultaneous attempts take turns, so two instances starting together cannot both win.
func (l *lease) acquire(ctx context.Context) (int64, error) {
	tx, err := l.db.BeginTxx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("lease: begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	// A frozen leader may hold the row inside its round; do not wait for it forever. The
	// insert of a missing row waits for such a round too, so it runs under the same bound.
	if _, err := tx.ExecContext(ctx, `set local lock_timeout = '2s'`); err != nil {
		return 0, fmt.Errorf("lease: %w", err)
	}
	if err := l.ensureRow(ctx, tx); err != nil {
		if dbsession.IsLockTimeout(err) {
			return 0, nil
		}
		return 0, err
	}
	var epoch int64
	err = tx.GetContext(ctx, &epoch, handeling.LeaseAcquireSQL, l.cluster, l.holder, l.leaseTimeout.Seconds())
	if errors.Is(err, sql.ErrNoRows) || dbsession.IsLockTimeout(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("lease: acquire: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("lease: commit acquire: %w", err)
	}
	return epoch, nil
}

// renew records polling activity; false means the lease is no longer ours.
func (l *lease) renew(ctx context.Context, q execer, epoch int64) (bool, error) {
	res, err := q.ExecContext(ctx, handeling.LeaseRenewSQL, l.cluster, l.holder, epoch)
	if err != nil {
		return false, fmt.Errorf("lease: renew: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("lease: renew: %w", err)
	}
	return n == 1, nil
}

// execer runs a statement: the pool, a transaction, or a prepared.Cache or prepared.Tx.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// release hands the lease over at once (clean shutdown, or a yield): without a holder it is
// free for a follower's next acquire, which need not wait the lease timeout. The heartbeat records the
// moment of the hand-over, the cluster's last activity until a follower takes over: what
// operators see (publicatie status, the status page). It once went to '-infinity', and they
// read "last activity never" after every clean handover.
func (l *lease) release(ctx context.Context, epoch int64) error {
	_, err := l.db.ExecContext(ctx, handeling.LeaseReleaseSQL, l.cluster, l.holder, epoch)
	if err != nil {
		return fmt.Errorf("lease: release: %w", err)
	}
	return nil
}

// state reads the cluster's lease.
func (l *lease) state(ctx context.Context) (handeling.Lease, error) {
	s, err := handeling.ReadLease(ctx, l.db, l.cluster)
	if err != nil {
		return s, fmt.Errorf("lease: state: %w", err)
	}
	return s, nil
}
