package levering

import (
	"context"
	"database/sql"
	"fmt"
	"slices"

	"github.com/lib/pq"

	"github.com/brp/levering/handeling"
	"github.com/brp/levering/internal/prepared"
)

// row is a handeling of a batch as check works it out, under the batch's row locks.
type row struct {
	id              int64
	at              place
	soort           string
	tsreg           sql.NullTime // NULL: outside the accepted range
	status          handeling.Status
	vrijgegeven     bool
	personen        []int64
	blocker         int64   // the oldest older handeling outside the batch to be delivered first; 0: none
	blockerNull     bool    // that one is still to be delivered (NULL), not in levering or fout
	overtaken       bool    // a newer handeling of one of its persons is geleverd, or may be out (onderweg)
	onderweg        bool    // levering_onderweg records it: a copy of it may be on the verzending queue (migration 0012)
	newerInLevering []int64 // newer handelingen of its persons outside the batch in levering
}

// place is a handeling's place in delivery order, as the publisher's: (tsreg, id), where a
// tsreg outside the accepted range sorts where the database sorts it (End -1 before
// everything, 1 after).
type place = handeling.Place

// checked is a row of checkSQL's result: a handeling of the batch (batch, with its persons) or
// another handeling of one of their persons (with that person).
type checked struct {
	batch       bool
	id          int64
	soort       string // "" for another handeling
	at          place
	tsreg       sql.NullTime
	status      handeling.Status
	vrijgegeven bool
	personen    []int64
	onderweg    bool
}

// other is a handeling outside the batch that shares a person with it (checkSQL's 'h' rows).
type other struct {
	at                               place
	open, teLeveren, out, inLevering bool // out: geleverd, or a copy of it may be out (onderweg)
}

// check runs checkSQL for ids and works out, with relate, what bears on each handeling of the
// batch from outside it.
func (s *statements) check(ctx context.Context, q prepared.Tx, ids []int64, excludedSoorten []string, strict bool) ([]row, error) {
	rs, err := q.QueryContext(ctx, s.checkSQL, pq.Array(ids), pq.Array(excludedSoorten), strict)
	if err != nil {
		return nil, fmt.Errorf("check: %w", err)
	}
	defer rs.Close()
	var read []checked
	for rs.Next() {
		var kind string
		var c checked
		var personen pq.Int64Array
		if err := rs.Scan(&kind, &c.id, &c.soort, &c.at.End, &c.tsreg, &c.status, &c.vrijgegeven, &personen, &c.onderweg); err != nil {
			return nil, fmt.Errorf("check: %w", err)
		}
		c.batch, c.personen, c.at.Tsreg, c.at.ID = kind == "b", personen, c.tsreg.Time, c.id
		read = append(read, c)
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("check: %w", err)
	}
	return relate(ids, read, strict), nil
}

// relate works out, from checkSQL's rows for the batch ids, for each handeling of the batch
// what bears on it from outside the batch: per person, the handelingen to be delivered first,
// those geleverd (or onderweg), and those in levering; then per handeling, over its persons,
// the oldest older one to be delivered first (row.blocker), whether a newer one is geleverd or
// onderweg (in the batch too: row.overtaken), and the newer ones in levering (row.newerInLevering).
func relate(ids []int64, read []checked, strict bool) []row {
	var rows []row
	byPerson := map[int64][]other{}
	inBatch := make(map[int64]bool, len(ids))
	for _, id := range ids {
		inBatch[id] = true
	}
	for _, c := range read {
		switch {
		case c.batch:
			rows = append(rows, row{id: c.id, at: c.at, soort: c.soort, tsreg: c.tsreg, status: c.status,
				vrijgegeven: c.vrijgegeven, personen: c.personen, onderweg: c.onderweg})
			if c.status == handeling.Geleverd || c.onderweg && c.status == handeling.InLevering {
				// Out already, or may be: it overtakes the batch's older handelingen of its
				// persons as one outside the batch does (a publication that carried both:
				// forged, misrouted, or a redelivery). The other rows leave the batch out.
				for _, p := range c.personen {
					byPerson[p] = append(byPerson[p], other{at: c.at, out: true})
				}
			}
		case !inBatch[c.id]: // the batch's own rows speak for the batch
			// checkSQL returns another handeling only NULL (then of a soort not excluded: to be
			// delivered), in levering, geleverd or fout.
			o := other{at: c.at, teLeveren: c.status == handeling.TeLeveren,
				out: c.status == handeling.Geleverd || c.onderweg, inLevering: c.status == handeling.InLevering}
			o.open = o.teLeveren || handeling.Blocks(c.status, c.vrijgegeven, strict)
			byPerson[c.personen[0]] = append(byPerson[c.personen[0]], o)
		}
	}
	for i := range rows {
		bearOn(&rows[i], byPerson)
	}
	return rows
}

// bearOn sets r's blocker, overtaken and newerInLevering from the other handelingen of its persons.
func bearOn(r *row, byPerson map[int64][]other) {
	var first *other
	for _, p := range r.personen {
		for j := range byPerson[p] {
			o := &byPerson[p][j]
			switch c := o.at.Compare(r.at); {
			case c < 0 && o.open && (first == nil || o.at.Compare(first.at) < 0):
				first = o
			case c > 0 && o.out:
				r.overtaken = true
			case c > 0 && o.inLevering && !slices.Contains(r.newerInLevering, o.at.ID):
				r.newerInLevering = append(r.newerInLevering, o.at.ID)
			}
		}
	}
	if first != nil {
		r.blocker, r.blockerNull = first.at.ID, first.teLeveren
	}
}
