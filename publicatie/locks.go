package publicatie

import (
	"context"
	"errors"
	"fmt"

	"github.com/lib/pq"
)

// lockRoundTables takes the round's table locks (roundLocksSQL). The statement has no
// parameters and is not in roundSQL: it must run unprepared, planned each time.
func (s *statements) lockRoundTables(ctx context.Context, q querier) error {
	if _, err := q.ExecContext(ctx, s.roundLocksSQL); err != nil {
		if isPermission(err) {
			return fmt.Errorf("lock the round's tables: the database role lacks a right that schema/grants gives it: %w", err)
		}
		return fmt.Errorf("lock the round's tables (a REINDEX, CREATE INDEX or VACUUM FULL of one of them holds them until it ends): %w", err)
	}
	return nil
}

// isPermission reports whether err is PostgreSQL's insufficient_privilege (42501): the
// session's role lacks a right (PostgreSQL's message names the object).
func isPermission(err error) bool {
	var pe *pq.Error
	return errors.As(err, &pe) && pe.Code == "42501"
}
