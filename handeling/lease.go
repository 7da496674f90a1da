package handeling

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// The statements on publicatie_lease, all of them here: publicatie's elector writes the lease
// with them, and ReadLease reads it for publicatie's Status and operate's overview. The lease is
// judged by the database clock only; the epoch grows by one on every takeover, and a round
// commits only under the epoch it began with (LeaseRenewSQL is its fence).
const (
	// LeaseEnsureSQL creates cluster $1's row if it is missing.
	LeaseEnsureSQL = `insert into publicatie_lease (cluster) values ($1) on conflict do nothing`
	// LeaseAcquireSQL makes $2 the holder of cluster $1 under a new epoch, which it returns, if
	// nobody holds it or its holder has been silent for longer than $3 seconds.
	LeaseAcquireSQL = `
		update publicatie_lease
		set holder = $2, epoch = epoch + 1, heartbeat = now(), acquired = now()
		where cluster = $1 and (holder = '' or heartbeat < now() - make_interval(secs => $3))
		returning epoch`
	// LeaseRenewSQL records holder $2's activity under epoch $3; it updates no row when the
	// lease is no longer theirs.
	LeaseRenewSQL = `
		update publicatie_lease set heartbeat = now()
		where cluster = $1 and holder = $2 and epoch = $3`
	// LeaseReleaseSQL hands the lease of holder $2 under epoch $3 over: no holder, and the
	// heartbeat records the moment (HandedOver).
	LeaseReleaseSQL = `
		update publicatie_lease set holder = '', heartbeat = now()
		where cluster = $1 and holder = $2 and epoch = $3`
	leaseReadSQL = `
		select holder, epoch,
		       case when heartbeat = '-infinity' then -1
		            else extract(epoch from now() - heartbeat)::float8 end
		from publicatie_lease where cluster = $1`
)

// Lease is a polling cluster's publication lease (table publicatie_lease) as the database
// sees it: publicatie's Status and operate's overview both read it with ReadLease.
type Lease struct {
	Cluster string `json:"cluster"`
	// Holder is the leading instance; "" when nobody holds the lease.
	Holder string `json:"holder"`
	// Epoch grows by one on every takeover; a round commits only under the current one.
	Epoch int64 `json:"epoch"`
	// SecondsSinceActivity is the time since the cluster's last polling activity: its holder's
	// last renewal, or, while nobody holds it, the hand-over that freed it (HandedOver); -1 if
	// there was none (no row, or a lease never held) or a release of an earlier version did not
	// record it. A follower takes over after the publisher's the lease timeout (at least 10 s) of
	// silence, or at its next poll after a hand-over.
	SecondsSinceActivity float64 `json:"seconds_since_activity"`
}

// HandedOver says that nobody holds the lease because its last holder handed it over (a clean
// shutdown, or a leader that made no progress): it was held (an epoch) and has no holder now.
func (l Lease) HandedOver() bool { return l.Holder == "" && l.Epoch > 0 }

// RowQueryer runs a query that returns one row: a *sql.DB, *sqlx.DB or a transaction.
type RowQueryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// ReadLease reads cluster's lease; a cluster without a row has no holder, epoch 0 and no
// activity.
func ReadLease(ctx context.Context, q RowQueryer, cluster string) (Lease, error) {
	l := Lease{Cluster: cluster, SecondsSinceActivity: -1}
	err := q.QueryRowContext(ctx, leaseReadSQL, cluster).Scan(&l.Holder, &l.Epoch, &l.SecondsSinceActivity)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return Lease{Cluster: cluster, SecondsSinceActivity: -1}, fmt.Errorf("read lease: %w", err)
	}
	return l, nil
}
