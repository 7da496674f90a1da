package publicatie

import (
	"context"
	"fmt"

	"github.com/brp/levering/handeling"
)

// roundLocksSQL is a round's first statement on a table (handeling.TableLocksSQL): the tables
// the round writes, locked in row exclusive mode before it reads any of them, and the indexes
// of admhnd_persoon, which it only reads, in the order a REINDEX takes them.
//
// A round read admhnd first (counting what is in levering, the stale ones) and wrote it later
// (refuseOddTsreg, mark): a REINDEX of admhnd that took its ShareLock in between deadlocked
// with it, and the round failed ("deadlock detected") after deadlock_timeout. It read
// publicatie_toestand and publicatie_nakomer before writing them in the same way. Now a round
// and a REINDEX of these tables wait for each other as a whole: while a REINDEX runs the round
// waits here, holding nothing the REINDEX needs, up to lock_timeout (then it fails and is
// retried), and a REINDEX waits for the round's commit (milliseconds).
// TestRoundsBesideReindex.
//
// The order: admhnd first, then the service's tables in the order a round first touches them.
// A table a round writes belongs here (TestRoundLocksItsTablesFirst).
var roundLocksSQL = handeling.TableLocksSQL("admhnd", "publicatie_toestand", "publicatie_ingehaald", "publicatie_laat_personen",
	"publicatie_herlees", "publicatie_lead_samples", "publicatie_fout_changes", "publicatie_nakomer")

// lockRoundTables takes the round's table locks (roundLocksSQL). The statement has no
// parameters and is not in roundSQL: it must run unprepared, planned each time.
func lockRoundTables(ctx context.Context, q querier) error {
	if _, err := q.ExecContext(ctx, roundLocksSQL); err != nil {
		return fmt.Errorf("lock the round's tables (a REINDEX, CREATE INDEX or VACUUM FULL of one of them holds them until it ends): %w", err)
	}
	return nil
}
