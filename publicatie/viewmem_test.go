package publicatie

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"
)

// TestViewBytesBoundTheHeap builds views of several shapes the way the intake does and
// compares the estimate that Config.ViewBytes bounds with the heap they really take: the
// estimate must be at least the heap (the bound holds) and not far above it (the bound is not
// needlessly tight). Not parallel: it reads the process's heap.
func TestViewBytesBoundTheHeap(t *testing.T) {
	shapes := []struct {
		name                      string
		handelingen, persons, per int // persons drawn from a pool of persons; per persons each
		parked                    int
	}{
		{"one person each, all different", 100_000, 100_000, 1, 0},
		{"one person each, 70,000", 70_000, 70_000, 1, 0},
		{"one person each, 140,000", 140_000, 140_000, 1, 0},
		{"two persons each, shared", 50_000, 10_000, 2, 0},
		{"500 persons each, all different", 400, 200_000, 500, 0},
		{"500 persons each, shared", 400, 2_000, 500, 0},
		{"one person", 20_000, 1, 1, 0},
		{"parked persons", 1_000, 1_000, 1, 50_000},
	}
	for _, s := range shapes {
		t.Run(s.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, 2))
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			v := newView(1<<30, nil)
			base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			next := int64(0)
			for i := range s.handelingen {
				c := Candidate{ID: int64(i + 1)}
				for j := range s.per {
					p := int64(j + i*s.per)
					if s.persons < s.handelingen*s.per {
						p = r.Int64N(int64(s.persons))
					}
					c.Personen = append(c.Personen, p)
				}
				v.add(c, base.Add(time.Duration(i)*time.Millisecond), true)
				next = int64(i + 2)
			}
			for i := range s.parked {
				pl := place{Tsreg: base.Add(time.Hour), ID: next + int64(i)}
				v.parkAt(pl.ID, []int64{int64(1e9 + i)}, pl, false, false)
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			heap := int(after.HeapAlloc) - int(before.HeapAlloc)
			runtime.KeepAlive(v)
			t.Logf("%d handelingen, %d person rows, %d parked persons: estimate %d bytes, heap %d bytes (%.2fx)",
				v.size(), personRows(v), len(v.parked), v.bytes, heap, float64(v.bytes)/float64(heap))
			if v.bytes < heap {
				t.Errorf("estimate %d bytes below the heap the view takes, %d", v.bytes, heap)
			}
			if v.bytes > 3*heap {
				t.Errorf("estimate %d bytes more than three times the heap the view takes, %d", v.bytes, heap)
			}
		})
	}
}

// TestViewParksAndRewinds follows the view through parking and a rewind: a person at its cap
// parks its later handelingen and, through a shared one, another person's; a handeling of
// nobody parked is taken in; when the capped person has drained to half its cap the view is
// rewound to the first parked handeling, and its estimate returns to what a fresh view of the
// same handelingen holds.
func TestViewParksAndRewinds(t *testing.T) {
	t.Parallel()
	at := func(id int64) time.Time { return time.Date(2026, 1, 1, 0, 0, 0, int(id), time.UTC) }
	v := newView(2, nil)
	add := func(id int64, personen ...int64) { v.add(Candidate{ID: id, Personen: personen}, at(id), true) }
	add(1, 1)
	add(2, 1)
	add(3, 1)    // person 1 at its cap: parked
	add(4, 1, 2) // shares person 1: parked, and person 2 with it
	add(5, 2)    // person 2 parked
	add(6, 3)    // nobody parked: taken in
	v.stand = place{Tsreg: at(6), ID: 6}
	if got := ids(v.readyCandidates(10, nil)); !slices.Equal(got, []int64{1, 6}) {
		t.Fatalf("ready %v, want [1 6]", got)
	}
	if v.size() != 3 || v.parkedN != 3 || v.parkedXor != 3^4^5 || len(v.parked) != 2 || !v.parked[1].capped || v.parked[2].capped {
		t.Fatalf("view of %d, parked %d (xor %d), persons %v", v.size(), v.parkedN, v.parkedXor, v.parked)
	}
	v.remove(1)
	if !v.rewindDue {
		t.Fatal("person 1 drained to half its cap, no rewind due")
	}
	v.rewind()
	if v.size() != 1 || v.parking() || v.parkedN != 0 || v.stand != (place{Tsreg: at(3), ID: 2}) {
		t.Fatalf("after the rewind: view of %d, parked %d, stand %+v; want handeling 2 only, stand just before 3", v.size(), v.parkedN, v.stand)
	}
	fresh := newView(2, nil)
	fresh.add(Candidate{ID: 2, Personen: []int64{1}}, at(2), true)
	if v.bytes != fresh.bytes || personRows(v) != personRows(fresh) || v.xor != fresh.xor {
		t.Fatalf("after the rewind: %d bytes, %d person rows, xor %d; a fresh view of the same: %d, %d, %d",
			v.bytes, personRows(v), v.xor, fresh.bytes, personRows(fresh), fresh.xor)
	}
	v.remove(2)
	if v.bytes != 0 || personRows(v) != 0 || len(v.queues) != 0 {
		t.Fatalf("empty view: %d bytes, %d person rows, %d queues", v.bytes, personRows(v), len(v.queues))
	}
}

// personRows is the sum of the view's handelingen's persons.
func personRows(v *view) int {
	n := 0
	for _, e := range v.byID {
		n += len(e.personen)
	}
	return n
}
