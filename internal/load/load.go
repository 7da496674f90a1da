// Package load makes demo and test workloads of administratieve handelingen and checks what
// came out of the verzending queue against the contract's per-person order.
package load

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/brp/levering/handeling"
)

// Handeling is one administratieve handeling with its bijgehouden personen.
type Handeling struct {
	ID       int64
	Soort    string
	Tsreg    time.Time
	Personen []int64
}

// Spec describes a generated workload.
type Spec struct {
	N        int     // handelingen
	Personen int     // distinct persons
	Multi    float64 // share touching 2-3 persons
	Excluded float64 // share of the excluded soort (GBA_INITIELE_VULLING)
	NoPerson int     // handelingen without any person (a known error: they end in fout)
	FirstID  int64   // id of the first handeling (default 1)
	Seed     uint64
	Start    time.Time // tsreg of the first handeling (default: an hour ago)
	// Run, when set, gives each person's handelingen Run at a time in a row (a bulk correction
	// done person by person) instead of to random persons: the first person of the i-th
	// handeling is 1 + (i / Run) mod Personen. Further persons (Multi) stay random.
	Run int
	// HotShare of the handelingen, when set, have their first person among the first
	// HotPersons share of the persons (a hot set); the rest are random.
	HotShare, HotPersons float64
}

// ExcludedSoort is the default excluded soort (handeling.InitieleVulling).
const ExcludedSoort = handeling.InitieleVulling

// soorten are the soorten Generate picks from, besides ExcludedSoort.
var soorten = []string{"GEBOORTE", "VERHUIZING", "HUWELIJK", "NAAMSWIJZIGING", "OVERLIJDEN"}

// Generate returns the workload: ids ascending, tsreg strictly ascending by 1 ms except that
// every tenth handeling shares its tsreg with the previous one (ties are ordered by id).
func Generate(s Spec) []Handeling {
	if s.FirstID == 0 {
		s.FirstID = 1
	}
	if s.Start.IsZero() {
		s.Start = time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	}
	r := rand.New(rand.NewPCG(s.Seed, s.Seed^0x9e3779b97f4a7c15))
	out := make([]Handeling, 0, s.N)
	ts := s.Start
	noPerson := map[int]bool{}
	for len(noPerson) < min(s.NoPerson, s.N) {
		noPerson[r.IntN(s.N)] = true
	}
	for i := range s.N {
		if i%10 != 9 {
			ts = ts.Add(time.Millisecond)
		}
		h := Handeling{ID: s.FirstID + int64(i), Soort: soorten[r.IntN(len(soorten))], Tsreg: ts}
		if r.Float64() < s.Excluded {
			h.Soort = ExcludedSoort
		}
		if !noPerson[i] {
			n := 1
			if r.Float64() < s.Multi {
				n = 2 + r.IntN(2)
			}
			for len(h.Personen) < min(n, s.Personen) {
				p := int64(1 + r.IntN(s.Personen))
				if len(h.Personen) == 0 {
					switch {
					case s.Run > 0:
						p = int64(1 + (i/s.Run)%s.Personen)
					case s.HotShare > 0 && r.Float64() < s.HotShare:
						p = int64(1 + r.IntN(max(1, int(s.HotPersons*float64(s.Personen)))))
					}
				}
				if !slices.Contains(h.Personen, p) {
					h.Personen = append(h.Personen, p)
				}
			}
			slices.Sort(h.Personen)
		}
		out = append(out, h)
	}
	return out
}

// Insert writes the handelingen as bijhouding would, in batches.
func Insert(ctx context.Context, db *sqlx.DB, hs []Handeling) error {
	for start := 0; start < len(hs); start += 5000 {
		batch := hs[start:min(start+5000, len(hs))]
		ids := make([]int64, len(batch))
		soorten := make([]string, len(batch))
		tsregs := make([]time.Time, len(batch))
		var pa, pp []int64
		for i, h := range batch {
			ids[i], soorten[i], tsregs[i] = h.ID, h.Soort, h.Tsreg
			for _, p := range h.Personen {
				pa = append(pa, h.ID)
				pp = append(pp, p)
			}
		}
		tx, err := db.BeginTxx(ctx, nil)
		if err != nil {
			return fmt.Errorf("load: begin: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `insert into admhnd (id, soort, tsreg)
			select * from unnest($1::bigint[], $2::text[], $3::timestamptz[])`,
			pq.Array(ids), pq.Array(soorten), pq.Array(tsregs)); err != nil {
			tx.Rollback()
			return fmt.Errorf("load: insert admhnd: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `insert into admhnd_persoon (admhnd_id, persoon_id)
			select * from unnest($1::bigint[], $2::bigint[])`, pq.Array(pa), pq.Array(pp)); err != nil {
			tx.Rollback()
			return fmt.Errorf("load: insert admhnd_persoon: %w", err)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("load: commit: %w", err)
		}
	}
	return nil
}

// Deliverable counts the handelingen of hs that end geleverd: not of the excluded soort and
// with persons (those without end in fout).
func Deliverable(hs []Handeling) int {
	n := 0
	for _, h := range hs {
		if h.Soort != ExcludedSoort && len(h.Personen) > 0 {
			n++
		}
	}
	return n
}

// ByID indexes hs by id, as CheckOrder takes them.
func ByID(hs []Handeling) map[int64]Handeling {
	m := make(map[int64]Handeling, len(hs))
	for _, h := range hs {
		m[h.ID] = h
	}
	return m
}

// OrderReport is the result of CheckOrder.
type OrderReport struct {
	Messages   int      // messages read from the verzending queue
	Distinct   int      // distinct handelingen among them
	Duplicates int      // messages for a handeling seen before
	Violations []string // per-person order violations, at most 20
	// Pairs are the same violations as admhnd ids: the handeling delivered late, and the newer
	// one delivered before it.
	Pairs [][2]int64
}

// CheckOrder checks the contract's per-person order on the verzending queue: for every person,
// the first occurrences of the handelingen that touch that person appear in (tsreg, id) order.
// ids are the admhnd-id headers in queue order.
func CheckOrder(ids []int64, hs map[int64]Handeling) OrderReport {
	rep := OrderReport{Messages: len(ids)}
	seen := map[int64]bool{}
	last := map[int64]Handeling{} // person -> last handeling delivered for that person
	violations := 0
	for _, id := range ids {
		if seen[id] {
			rep.Duplicates++
			continue
		}
		seen[id] = true
		h, ok := hs[id]
		if !ok {
			rep.Violations = append(rep.Violations, fmt.Sprintf("handeling %d on the queue does not exist", id))
			continue
		}
		for _, p := range h.Personen {
			if prev, ok := last[p]; ok && !before(prev, h) {
				violations++
				if len(rep.Violations) < 20 {
					rep.Violations = append(rep.Violations, fmt.Sprintf("person %d: handeling %d (%s) delivered after %d (%s)",
						p, h.ID, h.Tsreg.Format(time.RFC3339Nano), prev.ID, prev.Tsreg.Format(time.RFC3339Nano)))
					rep.Pairs = append(rep.Pairs, [2]int64{h.ID, prev.ID})
				}
			}
			last[p] = h
		}
	}
	rep.Distinct = len(seen)
	return rep
}

// before reports whether a is delivered before b: older tsreg first, ties by id.
func before(a, b Handeling) bool {
	if !a.Tsreg.Equal(b.Tsreg) {
		return a.Tsreg.Before(b.Tsreg)
	}
	return a.ID < b.ID
}
