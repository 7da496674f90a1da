package handeling

import (
	"cmp"
	"time"
)

// Place is a handeling's place in delivery order, the one order the publisher publishes in
// and the consumer checks: tsreg, ties by id. A tsreg outside the accepted range
// (TsregAccepted) sorts at its end of it, as the consumer's statements sort it
// (levering/sql/check.sql): End -1 before every accepted tsreg, End 1 after, all of one end
// alike and ordered by id (Tsreg is then left zero). The publisher never places one: it sets
// such a handeling fout at its intake. The zero Place lies before every handeling's.
type Place struct {
	End   int
	Tsreg time.Time
	ID    int64
}

// Compare is -1 when a comes before b in delivery order, 1 when after, 0 for the same place.
func (a Place) Compare(b Place) int {
	if c := cmp.Compare(a.End, b.End); c != 0 {
		return c
	}
	if c := a.Tsreg.Compare(b.Tsreg); c != 0 {
		return c
	}
	return cmp.Compare(a.ID, b.ID)
}

// Before says whether a comes before b in delivery order: Compare(b) < 0, written out, as the
// publisher's view compares places in every step of its trees.
func (a Place) Before(b Place) bool {
	if a.End != b.End {
		return a.End < b.End
	}
	return a.Tsreg.Before(b.Tsreg) || a.Tsreg.Equal(b.Tsreg) && a.ID < b.ID
}
