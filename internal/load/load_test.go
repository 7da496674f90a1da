package load

import (
	"testing"
	"time"
)

func TestDeliverableAndByID(t *testing.T) {
	hs := Generate(Spec{N: 1_000, Personen: 50, Excluded: 0.1, NoPerson: 7, Seed: 1})
	excluded, noPerson := 0, 0
	for _, h := range hs {
		switch {
		case h.Soort == ExcludedSoort:
			excluded++
		case len(h.Personen) == 0:
			noPerson++
		}
	}
	if excluded == 0 || noPerson == 0 {
		t.Fatalf("workload without excluded (%d) or person-less (%d) handelingen", excluded, noPerson)
	}
	if got, want := Deliverable(hs), len(hs)-excluded-noPerson; got != want {
		t.Errorf("Deliverable = %d, want %d", got, want)
	}
	m := ByID(hs)
	if len(m) != len(hs) {
		t.Fatalf("ByID has %d entries for %d handelingen", len(m), len(hs))
	}
	for _, h := range hs {
		if m[h.ID].ID != h.ID || m[h.ID].Soort != h.Soort {
			t.Fatalf("ByID[%d] = %+v, want %+v", h.ID, m[h.ID], h)
		}
	}
}

// CheckOrder names each violation by text and by the pair of ids; duplicates after a first
// occurrence do not count.
func TestCheckOrderNamesThePairs(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	hs := map[int64]Handeling{
		1: {ID: 1, Tsreg: t0, Personen: []int64{10}},
		2: {ID: 2, Tsreg: t0.Add(time.Second), Personen: []int64{10, 20}},
		3: {ID: 3, Tsreg: t0.Add(2 * time.Second), Personen: []int64{20}},
	}
	rep := CheckOrder([]int64{2, 3, 2, 1}, hs)
	if rep.Messages != 4 || rep.Distinct != 3 || rep.Duplicates != 1 || len(rep.Violations) != 1 ||
		len(rep.Pairs) != 1 || rep.Pairs[0] != [2]int64{1, 2} {
		t.Fatalf("report %+v, want one violation: 1 after 2", rep)
	}
}
