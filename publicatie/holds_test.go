package publicatie

import (
	"slices"
	"testing"
	"time"
)

// holdsOf returns holds of the given fout handelingen (id -> persons).
func holdsOf(fout map[int64][]int64) *holds {
	h := newHolds()
	for id, ps := range fout {
		h.set(foutState{id: id, held: true, personen: ps})
	}
	return h
}

// The view parks what a fout holds, whether the intake reads it after the fout (through a
// multi-person handeling, to its other persons) or the fout comes later (evict: from the held
// person's first handeling, and from each evicted one's place for its other persons); a
// handeling taken back behind the stand before a held place is not held; a release rewinds.
// The counts follow: parked for the sweep, held behind fout and its persons for the metrics.
func TestViewParksHeldWork(t *testing.T) {
	t.Parallel()
	at := func(id int64) time.Time { return time.Date(2026, 1, 1, 0, 0, 0, int(id), time.UTC) }
	v := newView(100, holdsOf(map[int64][]int64{100: {1}}))
	add := func(id int64, personen ...int64) { v.add(Candidate{ID: id, Personen: personen}, at(id), true) }
	ready := func(want ...int64) {
		t.Helper()
		if got := ids(v.readyCandidates(100, nil)); !slices.Equal(got, want) {
			t.Fatalf("ready %v, want %v", got, want)
		}
	}
	counts := func(what string, size, parked, held, heldPersons int) {
		t.Helper()
		if v.size() != size || v.parkedN != parked || v.heldN != held || v.heldPersons != heldPersons {
			t.Fatalf("%s: view of %d, parked %d, held %d of %d persons; want %d, %d, %d of %d",
				what, v.size(), v.parkedN, v.heldN, v.heldPersons, size, parked, held, heldPersons)
		}
	}
	add(1, 2)    // person 2, before it is held: in the view
	add(2, 1)    // person 1 is held
	add(3, 1, 3) // and through it person 3
	add(4, 3)    // held behind 3
	add(5, 4)    // free
	add(6, 5, 6) // free
	add(7, 6)    // behind 6, in the view
	v.stand = place{Tsreg: at(7), ID: 7}
	ready(1, 5, 6)
	counts("the intake", 4, 3, 3, 2)
	if !v.parked[3].held || v.parked[3].place != (place{Tsreg: at(3), ID: 3}) || len(v.parked) != 1 {
		t.Fatalf("parked persons %v, want person 3 held from handeling 3", v.parked)
	}

	// A fout of person 5 comes: 6 leaves the view, and with it 7 (person 6 from 6's place).
	newly, _ := v.holds.set(foutState{id: 101, held: true, personen: []int64{5}})
	v.hold(newly)
	ready(1, 5)
	counts("a fout of person 5", 2, 5, 5, 4)
	if v.parkedXor != 2^3^4^6^7 || v.firstParked != (place{Tsreg: at(2), ID: 2}) {
		t.Fatalf("parked xor %d, first %v", v.parkedXor, v.firstParked)
	}

	// Taken back behind the stand: before person 6's held place it is not held; after it, it is.
	v.put(Candidate{ID: 0, Personen: []int64{6}}, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(-time.Nanosecond))
	ready(0, 1, 5)
	v.put(Candidate{ID: 8, Personen: []int64{6, 7}}, at(6).Add(time.Nanosecond/2))
	ready(0, 1, 5)
	counts("two taken back", 3, 6, 6, 5)

	// Person 1's fout is retried: released, its parked handelingen rewind the view.
	_, released := v.holds.set(foutState{id: 100})
	v.release(released)
	if !v.rewindDue {
		t.Fatal("person 1 released with parked handelingen, no rewind due")
	}
	v.rewind()
	counts("the rewind", 2, 0, 0, 0) // 0 and 1 lie before the first parked handeling
	if v.stand != (place{Tsreg: at(2), ID: 1}) || len(v.parked) != 0 {
		t.Fatalf("after the rewind: stand %+v, parked %v", v.stand, v.parked)
	}
	// Read again: person 5 is still held, so 6 and 7 are parked again; the rest comes back.
	for _, id := range []int64{2, 3, 4, 5, 6, 7} {
		switch id {
		case 3:
			add(3, 1, 3)
		case 6:
			add(6, 5, 6)
		default:
			add(id, map[int64]int64{2: 1, 4: 3, 5: 4, 7: 6}[id])
		}
	}
	ready(0, 1, 2, 5)
	counts("read again", 6, 2, 2, 2)

	// Released with nothing parked: no rewind.
	v.rewindDue = false
	_, released = v.holds.set(foutState{id: 102, held: true, personen: []int64{9}})
	v.release(released)
	_, released = v.holds.set(foutState{id: 102})
	v.release(released)
	if v.rewindDue {
		t.Fatal("a person released with nothing parked made a rewind due")
	}
}

// holds.set counts each person's unreleased fout handelingen: a person is newly held by its
// first and released by its last; a handeling whose persons change moves its hold.
func TestHoldsSet(t *testing.T) {
	t.Parallel()
	h := newHolds()
	for _, tc := range []struct {
		s                 foutState
		newly, released   []int64
		fout, persons, pr int
	}{
		{foutState{id: 1, held: true, personen: []int64{1, 2}}, []int64{1, 2}, nil, 1, 2, 2},
		{foutState{id: 2, held: true, personen: []int64{2, 3}}, []int64{3}, nil, 2, 3, 4},
		{foutState{id: 2, held: true, personen: []int64{2, 3}}, nil, nil, 2, 3, 4},           // again: nothing
		{foutState{id: 1, held: true, personen: []int64{1, 2, 4}}, []int64{4}, nil, 2, 4, 5}, // persons added
		{foutState{id: 1}, nil, []int64{1, 4}, 1, 2, 2},                                      // released
		{foutState{id: 7}, nil, nil, 1, 2, 2},                                                // never held
		{foutState{id: 2, held: true, personen: []int64{5}}, []int64{5}, []int64{2, 3}, 1, 1, 1},
	} {
		newly, released := h.set(tc.s)
		var rel []int64
		for _, r := range released {
			rel = append(rel, r.persoon)
		}
		if !slices.Equal(newly, tc.newly) || !slices.Equal(rel, tc.released) || len(h.fout) != tc.fout || len(h.persons) != tc.persons {
			t.Fatalf("set %+v: newly held %v, released %v, %d fout, %d persons; want %v, %v, %d, %d",
				tc.s, newly, rel, len(h.fout), len(h.persons), tc.newly, tc.released, tc.fout, tc.persons)
		}
	}
	if h.xor != 2 {
		t.Fatalf("xor %d, want 2", h.xor)
	}
}
