package publicatie

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestViewChoosesWhatTheReferenceWalkChooses drives the view as rounds do, on plain data and
// without a database: registrations after the stand and behind it (late), persons added to a
// handeling still to be delivered, the intake's reads of at most a few handelingen, parking at
// a person's cap and the rewinds it calls for, handelingen taken into levering and delivered
// later. Before every round's choice it holds what the view offers (readyCandidates, then
// Select, as Publisher.choose does) against the reference: Select over every handeling still
// to be delivered up to the stand, oldest first, with the persons in levering blocked. The
// database-backed TestSelectionMatchesReferenceOnRandomHistories checks the same through the
// statements; this one runs the view's own rules in the -short lane, over more histories.
func TestViewChoosesWhatTheReferenceWalkChooses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		personCap, persons, read, budget int
		late, addPersons                 float64
	}{
		{personCap: 1, persons: 5, read: 3, budget: 2},
		{personCap: 2, persons: 8, read: 5, budget: 3, late: 0.1},
		{personCap: 3, persons: 20, read: 10, budget: 5, late: 0.2, addPersons: 0.05},
		{personCap: 8, persons: 4, read: 20, budget: 10, late: 0.05, addPersons: 0.1},
		{personCap: 1000, persons: 50, read: 40, budget: 8, late: 0.1, addPersons: 0.05},
		{personCap: 2, persons: 60, read: 100, budget: 3, late: 0.3},
	} {
		for seed := range uint64(8) {
			name := fmt.Sprintf("cap=%d/persons=%d/read=%d/budget=%d/late=%g/added=%g/seed=%d",
				tc.personCap, tc.persons, tc.read, tc.budget, tc.late, tc.addPersons, seed)
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				m := &viewModel{t: t, r: rand.New(rand.NewPCG(seed, uint64(tc.personCap))), v: newView(tc.personCap, nil),
					db: map[int64]*modelHandeling{}, persons: tc.persons}
				for step := range 400 {
					m.register(tc.late, tc.addPersons)
					m.round(step, tc.read, tc.budget)
					m.deliver()
				}
				// The history did what this test is for.
				if tc.personCap <= 3 && m.rewinds == 0 || tc.late > 0 && m.puts == 0 || m.chosen < 100 {
					t.Fatalf("%d rewinds, %d taken in behind the stand, %d chosen in 400 rounds", m.rewinds, m.puts, m.chosen)
				}
			})
		}
	}
}

// modelHandeling is a handeling in the model's database.
type modelHandeling struct {
	place
	personen []int64
	state    int // 0 to be delivered, 1 in levering, 2 geleverd
}

type viewModel struct {
	t       *testing.T
	r       *rand.Rand
	v       *view
	db      map[int64]*modelHandeling
	nextID  int64
	clock   time.Time
	persons int
	nakomer []int64 // recorded late: a registration behind the stand, persons added
	rewinds int
	puts    int // taken in behind the stand
	chosen  int
}

func (m *viewModel) personen() []int64 {
	var ps []int64
	for range 1 + m.r.IntN(3) {
		if p := int64(1 + m.r.IntN(m.persons)); !slices.Contains(ps, p) {
			ps = append(ps, p)
		}
	}
	slices.Sort(ps)
	return ps
}

// register adds a few handelingen: most after everything (ties in tsreg now and then), some
// (late) at a place behind the stand, and adds a person to an open one (addPersons).
func (m *viewModel) register(late, addPersons float64) {
	for range m.r.IntN(4) {
		m.nextID++
		if m.r.IntN(4) > 0 {
			m.clock = m.clock.Add(time.Duration(1+m.r.IntN(3)) * time.Millisecond)
		}
		tsreg := m.clock
		if m.r.Float64() < late && !m.v.stand.Tsreg.IsZero() {
			tsreg = m.v.stand.Tsreg.Add(-time.Duration(m.r.IntN(20)) * time.Millisecond)
			m.nakomer = append(m.nakomer, m.nextID)
		}
		m.db[m.nextID] = &modelHandeling{place: place{Tsreg: tsreg, ID: m.nextID}, personen: m.personen()}
	}
	if m.r.Float64() < addPersons {
		for _, h := range m.open() {
			if p := int64(1 + m.r.IntN(m.persons)); !slices.Contains(h.personen, p) {
				h.personen = append(slices.Clone(h.personen), p)
				slices.Sort(h.personen)
				m.nakomer = append(m.nakomer, h.ID)
			}
			break
		}
	}
}

// open is every handeling to be delivered, in delivery order.
func (m *viewModel) open() []*modelHandeling {
	var out []*modelHandeling
	for _, h := range m.db {
		if h.state == 0 {
			out = append(out, h)
		}
	}
	slices.SortFunc(out, func(a, b *modelHandeling) int {
		if a.Before(b.place) {
			return -1
		}
		return 1
	})
	return out
}

// round is a round's part of the view: the rewind it is due, the recorded ones behind the
// stand and up to read new ones after it (openWork.intake), the choice, checked against the
// reference, and the chosen ones into levering.
func (m *viewModel) round(step, read, budget int) {
	v := m.v
	if v.rewindDue {
		v.rewind()
		m.rewinds++
	}
	stand := v.stand
	for _, id := range m.nakomer {
		if h := m.db[id]; h.state == 0 && !stand.Before(h.place) {
			v.put(Candidate{ID: id, Personen: h.personen}, h.Tsreg)
			m.puts++
		}
	}
	m.nakomer = m.nakomer[:0]
	n := 0
	for _, h := range m.open() {
		if n == read {
			break
		}
		if stand.Before(h.place) {
			v.add(Candidate{ID: h.ID, Personen: h.personen}, h.Tsreg, true)
			v.stand = h.place
			n++
		}
	}
	blocked := map[int64]struct{}{}
	for _, h := range m.db {
		if h.state == 1 {
			for _, p := range h.personen {
				blocked[p] = struct{}{}
			}
		}
	}
	got := Select(v.readyCandidates(window(budget), maps.Clone(blocked)), maps.Clone(blocked), budget)
	var upToStand []Candidate
	for _, h := range m.open() {
		if !v.stand.Before(h.place) {
			upToStand = append(upToStand, Candidate{ID: h.ID, Personen: h.personen})
		}
	}
	want := Select(upToStand, blocked, budget)
	if !slices.Equal(ids(got), ids(want)) {
		m.t.Fatalf("step %d (after %d rewinds): the view chose %v, the reference walk %v; stand %v, view of %d, parked %d",
			step, m.rewinds, ids(got), ids(want), v.stand.ID, v.size(), v.parkedN)
	}
	m.chosen += len(got)
	for _, c := range got {
		m.db[c.ID].state = 1
		v.remove(c.ID)
	}
}

// deliver delivers some of what is in levering.
func (m *viewModel) deliver() {
	for _, id := range slices.Sorted(maps.Keys(m.db)) {
		if h := m.db[id]; h.state == 1 && m.r.IntN(3) == 0 {
			h.state = 2
		}
	}
}
