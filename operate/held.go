package operate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/brp/levering/handeling"
)

// The sources of Overview.HeldCounted.
const (
	HeldExact    = "exact"
	HeldByLeader = "leader"
	HeldUnknown  = "unknown"
)

// readHeld counts what is held behind fout within cfg.Budget (handeling.ReadHeld); past it, it
// takes the leading publisher's count of its view (migration 0017), or says it is unknown.
func readHeld(ctx context.Context, tx *sqlx.Tx, cfg OverviewConfig, st *statements, o *Overview) error {
	var held handeling.Held
	over, err := withinBudget(ctx, tx, cfg, func() error {
		var err error
		held, err = handeling.ReadHeld(ctx, tx, cfg.Layout, cfg.Excluded, cfg.FoutPolicy == handeling.Strict)
		return err
	})
	if err != nil {
		return fmt.Errorf("overview: %w", err)
	}
	if !over {
		o.HeldBehindFout, o.HeldBehindFoutPersonen, o.HeldCounted = held.Handelingen, held.Personen, HeldExact
		return nil
	}
	var at sql.NullTime
	err = tx.QueryRowContext(ctx, st.leaderHeldSQL).Scan(&o.HeldBehindFout, &o.HeldBehindFoutPersonen, &at)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("overview: the leader's held counts: %w", err)
	}
	if !at.Valid {
		o.HeldBehindFout, o.HeldBehindFoutPersonen, o.HeldCounted = -1, -1, HeldUnknown
		return nil
	}
	o.HeldCounted, o.HeldCountedAt = HeldByLeader, &at.Time
	return nil
}

// withinBudget runs read, a read of tx, with statement_timeout cfg.Budget, inside a savepoint: when
// the database ends it for the budget, the transaction goes on as before it and over is true.
// Any other error is returned.
func withinBudget(ctx context.Context, tx *sqlx.Tx, cfg OverviewConfig, read func() error) (over bool, err error) {
	if _, err := tx.ExecContext(ctx, "savepoint budget"); err != nil {
		return false, err
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("set local statement_timeout = %d", max(1, cfg.Budget.Milliseconds()))); err != nil {
		return false, err
	}
	if cfg.slowReads {
		_, err = tx.ExecContext(ctx, "select pg_sleep($1)", 2*cfg.Budget.Seconds())
	}
	if err == nil {
		err = read()
	}
	var pe *pq.Error
	if errors.As(err, &pe) && pe.Code == "57014" && ctx.Err() == nil { // query_canceled by statement_timeout
		if _, err := tx.ExecContext(ctx, "rollback to savepoint budget"); err != nil {
			return false, err
		}
		return true, nil
	}
	if err != nil {
		return false, err
	}
	if _, err := tx.ExecContext(ctx, "set local statement_timeout to default"); err != nil {
		return false, err
	}
	_, err = tx.ExecContext(ctx, "release savepoint budget")
	return false, err
}
