package publicatie

import (
	"context"
	"fmt"

	"github.com/brp/levering/internal/dbsession"
)

// lockRoundTables takes the round's table locks (roundLocksSQL). The statement has no
// parameters and is not in roundSQL: it must run unprepared, planned each time.
func (s *statements) lockRoundTables(ctx context.Context, q querier) error {
	if _, err := q.ExecContext(ctx, s.roundLocksSQL); err != nil {
		if dbsession.IsPermissionDenied(err) {
			return fmt.Errorf("lock the round's tables: the database role lacks a right that schema/grants gives it: %w", err)
		}
		return fmt.Errorf("lock the round's tables (a REINDEX, CREATE INDEX or VACUUM FULL of one of them holds them until it ends): %w", err)
	}
	return nil
}
