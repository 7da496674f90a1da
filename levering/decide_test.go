package levering

import (
	"database/sql"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/brp/levering/handeling"
)

// These tests need no database or broker: they run the consumer's order check (decide, relate)
// on rows as checkSQL returns them.

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// at is the place of handeling id registered id seconds after t0.
func at(id int64) place { return place{Tsreg: t0.Add(time.Duration(id) * time.Second), ID: id} }

// hnd is handeling id of the batch, registered id seconds after t0, with its status and persons.
func hnd(id int64, status handeling.Status, personen ...int64) row {
	p := at(id)
	return row{id: id, at: p, soort: "GEBOORTE", tsreg: sql.NullTime{Time: p.Tsreg, Valid: true}, status: status, personen: personen}
}

// with returns r changed by f.
func with(r row, f func(*row)) row { f(&r); return r }

// The statuses, short, for the tables.
const (
	inLevering = handeling.InLevering
	geleverd   = handeling.Geleverd
	fout       = handeling.Fout
	teLeveren  = handeling.TeLeveren
)

var (
	del = result{outcome: delivered}
	dup = result{outcome: duplicate}
)

func held(reason string) result     { return result{outcome: heldBack, reason: reason} }
func markFout(reason string) result { return result{outcome: markedFout, reason: reason} }

// oddTsreg gives r a tsreg above the accepted range.
func oddTsreg(r *row) { r.tsreg, r.at = sql.NullTime{}, place{End: 1, ID: r.id} }

// decideTests are the cases of TestDecide.
var decideTests = []struct {
	name     string
	rows     []row
	carried  map[int64][][]int64 // nil: each row's persons, once
	newer    map[int64]handeling.Status
	excluded []string
	skip     bool // the skip fout policy, else strict
	want     map[int64]result
}{
	{name: "delivered", rows: []row{hnd(1, inLevering, 10, 20), hnd(2, inLevering, 30)},
		want: map[int64]result{1: del, 2: del}},
	{name: "duplicate geleverd", rows: []row{hnd(1, geleverd, 10), hnd(2, inLevering, 10)},
		want: map[int64]result{1: dup, 2: del}},
	{name: "fout holds back its persons under strict", rows: []row{hnd(1, fout, 10), hnd(2, inLevering, 10, 20), hnd(3, inLevering, 20), hnd(4, inLevering, 30)},
		want: map[int64]result{1: dup, 2: held(reasonBehindFout), 3: held(reasonOlderOpen), 4: del}},
	{name: "fout holds back nothing under skip", skip: true, rows: []row{hnd(1, fout, 10), hnd(2, inLevering, 10)},
		want: map[int64]result{1: dup, 2: del}},
	{name: "released fout holds back nothing", rows: []row{with(hnd(1, fout, 10), func(r *row) { r.vrijgegeven = true }), hnd(2, inLevering, 10)},
		want: map[int64]result{1: dup, 2: del}},
	{name: "not in levering is left alone and holds back its persons", rows: []row{hnd(1, teLeveren, 10), hnd(2, inLevering, 10), hnd(3, inLevering, 20)},
		want: map[int64]result{1: held(reasonNotInLevering), 2: held(reasonOlderOpen), 3: del}},
	{name: "persons changed holds back the persons carried and found",
		rows:    []row{hnd(1, inLevering, 10), hnd(2, inLevering, 11), hnd(3, inLevering, 12)},
		carried: map[int64][][]int64{1: {{10}, {11, 10}}, 2: {{11}}, 3: {{12}}},
		want:    map[int64]result{1: held(reasonPersonsChanged), 2: held(reasonOlderOpen), 3: del}},
	{name: "persons carried in another order and twice are the same", rows: []row{hnd(1, inLevering, 10, 20)},
		carried: map[int64][][]int64{1: {{20, 10, 20}, {10, 20}}},
		want:    map[int64]result{1: del}},
	{name: "no persons ends fout and holds back nothing", rows: []row{hnd(1, inLevering), hnd(2, inLevering, 10)},
		want: map[int64]result{1: markFout(handeling.FoutGeenPersonen), 2: del}},
	{name: "odd tsreg ends fout, after the others", rows: []row{with(hnd(1, inLevering, 10), oddTsreg), hnd(2, inLevering, 10)},
		want: map[int64]result{1: markFout(handeling.FoutTsreg), 2: del}},
	{name: "odd tsreg ends fout and holds back what comes after",
		rows: []row{hnd(4, inLevering, 10), with(hnd(3, inLevering, 10), func(r *row) { r.tsreg, r.at = sql.NullTime{}, place{End: -1, ID: r.id} })},
		want: map[int64]result{3: markFout(handeling.FoutTsreg), 4: held(reasonBehindFout)}},
	{name: "overtaken by a newer geleverd", rows: []row{with(hnd(1, inLevering, 10), func(r *row) { r.overtaken = true }), hnd(2, inLevering, 10)},
		want: map[int64]result{1: markFout(handeling.FoutOvertaken), 2: held(reasonBehindFout)}},
	{name: "newer in levering that became geleverd overtook it",
		rows:  []row{with(hnd(1, inLevering, 10), func(r *row) { r.newerInLevering = []int64{5, 6} })},
		newer: map[int64]handeling.Status{5: inLevering, 6: geleverd},
		want:  map[int64]result{1: markFout(handeling.FoutOvertaken)}},
	{name: "newer in levering still in levering is held back by this one",
		rows:  []row{with(hnd(1, inLevering, 10), func(r *row) { r.newerInLevering = []int64{5} })},
		newer: map[int64]handeling.Status{5: inLevering},
		want:  map[int64]result{1: del}},
	{name: "onderweg is delivered again whatever holds",
		rows: []row{hnd(1, fout, 10), with(hnd(2, inLevering, 10, 20), func(r *row) {
			r.onderweg, r.overtaken, r.blocker = true, true, 99
		})},
		carried: map[int64][][]int64{1: {{10}}, 2: {{10}}},
		want:    map[int64]result{1: dup, 2: del}},
	{name: "onderweg without persons is not delivered again",
		rows: []row{with(hnd(1, inLevering), func(r *row) { r.onderweg = true })},
		want: map[int64]result{1: markFout(handeling.FoutGeenPersonen)}},
	{name: "older blocker outside the batch", rows: []row{with(hnd(2, inLevering, 10), func(r *row) { r.blocker = 1 }), hnd(3, inLevering, 10, 20), hnd(4, inLevering, 20)},
		want: map[int64]result{2: {outcome: heldBack, reason: reasonOlderOpen, blocker: 1}, 3: held(reasonOlderOpen), 4: held(reasonOlderOpen)}},
	{name: "order inside the batch: a shared person behind an older one held back, in any order",
		rows: []row{hnd(4, inLevering, 30), hnd(3, inLevering, 20), hnd(2, inLevering, 10, 20), with(hnd(1, inLevering, 10), func(r *row) { r.blocker = 99 })},
		want: map[int64]result{1: {outcome: heldBack, reason: reasonOlderOpen, blocker: 99}, 2: held(reasonOlderOpen), 3: held(reasonOlderOpen), 4: del}},
	{name: "order inside the batch: a shared person behind an older one ending fout",
		rows: []row{hnd(2, inLevering, 10, 20), hnd(1, inLevering), hnd(3, inLevering, 20), with(hnd(0, inLevering, 10), func(r *row) { r.overtaken = true })},
		want: map[int64]result{0: markFout(handeling.FoutOvertaken), 1: markFout(handeling.FoutGeenPersonen), 2: held(reasonBehindFout), 3: held(reasonOlderOpen)}},
	{name: "excluded soort is set aside and holds back nothing", excluded: []string{handeling.InitieleVulling},
		rows: []row{with(hnd(1, teLeveren, 10), func(r *row) { r.soort = handeling.InitieleVulling }), hnd(2, inLevering, 10)},
		want: map[int64]result{1: {outcome: excluded}, 2: del}},
	{name: "unknown id", rows: []row{hnd(1, inLevering, 10)}, carried: map[int64][][]int64{1: {{10}}, 2: {{20}}},
		want: map[int64]result{1: del, 2: {outcome: unknown}}},
}

func TestDecide(t *testing.T) {
	for _, tt := range decideTests {
		t.Run(tt.name, func(t *testing.T) {
			carried := tt.carried
			if carried == nil {
				carried = map[int64][][]int64{}
				for _, r := range tt.rows {
					carried[r.id] = [][]int64{r.personen}
				}
			}
			got := decide(slices.Clone(tt.rows), carried, tt.newer, tt.excluded, !tt.skip)
			if !maps.Equal(got, tt.want) {
				t.Errorf("decide = %v\nwant     %v", got, tt.want)
			}
		})
	}
}

func TestCarriedAre(t *testing.T) {
	tests := []struct {
		carried  [][]int64
		personen []int64
		want     bool
	}{
		{nil, []int64{1}, true}, // nothing carried: nothing differs
		{[][]int64{{1, 2}}, []int64{1, 2}, true},
		{[][]int64{{2, 1, 2}, {1, 2}}, []int64{1, 2}, true},
		{[][]int64{{}}, nil, true},
		{[][]int64{{}}, []int64{1}, false},
		{[][]int64{{1}}, []int64{1, 2}, false},
		{[][]int64{{1, 2}, {1}}, []int64{1, 2}, false},
		{[][]int64{{1, 3}}, []int64{1, 2}, false},
	}
	for _, tt := range tests {
		carried := make([][]int64, len(tt.carried))
		for i, ps := range tt.carried {
			carried[i] = slices.Clone(ps)
		}
		if got := carriedAre(carried, tt.personen); got != tt.want {
			t.Errorf("carriedAre(%v, %v) = %v, want %v", tt.carried, tt.personen, got, tt.want)
		}
		for i := range carried {
			if !slices.Equal(carried[i], tt.carried[i]) {
				t.Errorf("carriedAre changed its argument: %v, was %v", carried, tt.carried)
			}
		}
	}
}
