package publicatie

import (
	"math/rand/v2"
	"runtime"
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
			v := newView(1 << 30)
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
				v.park([]int64{int64(1e9 + i)}, place{tsreg: base.Add(time.Hour), id: next + int64(i)})
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			heap := int(after.HeapAlloc) - int(before.HeapAlloc)
			runtime.KeepAlive(v)
			t.Logf("%d handelingen, %d person rows, %d parked persons: estimate %d bytes, heap %d bytes (%.2fx)",
				v.size(), v.personRows, len(v.parked), v.bytes, heap, float64(v.bytes)/float64(heap))
			if v.bytes < heap {
				t.Errorf("estimate %d bytes below the heap the view takes, %d", v.bytes, heap)
			}
			if v.bytes > 3*heap {
				t.Errorf("estimate %d bytes more than three times the heap the view takes, %d", v.bytes, heap)
			}
		})
	}
}
