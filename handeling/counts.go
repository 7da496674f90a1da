package handeling

import (
	"context"
	"fmt"
	"time"

	"github.com/lib/pq"
)

// Counts are the numbers of handelingen per status, as the metrics collector (publicatie) and
// the status page (operate) both show them: one statement, read with ReadCounts.
type Counts struct {
	// At is the database clock when they were read.
	At time.Time
	// Backlog counts handelingen still to be delivered (ToDeliverSQL).
	Backlog int64
	// InLevering counts handelingen published and not yet confirmed by a consumer.
	InLevering int64
	// Fout counts handelingen in fout, released or not; FoutUnreleased those no operator
	// released (under the strict policy they hold back their persons).
	Fout, FoutUnreleased int64
	// OldestAge is At - tsreg of the oldest handeling still to be delivered or in levering,
	// in seconds, of those not registered in the future (tsreg <= At): never negative; 0 when
	// there is none.
	OldestAge float64
	// Future counts handelingen still to be delivered whose tsreg lies more than FutureSkew
	// ahead of At (FutureSQL): each waits, unpublished, until its tsreg has passed.
	Future int64
	// Geleverd counts every delivered handeling; -1 unless asked for.
	Geleverd int64
}

// ReadCounts reads the Counts in one statement on the tables of layout l; excluded are the
// soorten not delivered, by the names they have in l (Layout.DefaultExcluded). The counts but
// Geleverd use partial indexes (Future a range at the end of the index of open work, ordered
// by tsreg); geleverd asks for the delivered count too, the one exact count over the
// delivered history: a (parallel) sequential scan of admhnd, O(table size), so only the status
// page asks for it, not every scrape.
func ReadCounts(ctx context.Context, q RowQueryer, l Layout, excluded []string, geleverd bool) (Counts, error) {
	c := Counts{Geleverd: -1}
	dest := []any{&c.At, &c.Backlog, &c.InLevering, &c.Fout, &c.FoutUnreleased, &c.OldestAge, &c.Future}
	if err := q.QueryRowContext(ctx, statementsFor(l).countsSQL, pq.Array(excluded), FutureSkew.Seconds(), geleverd).Scan(append(dest, &c.Geleverd)...); err != nil {
		return Counts{Geleverd: -1}, fmt.Errorf("read counts: %w", err)
	}
	return c, nil
}
