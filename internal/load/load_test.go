package load

import "testing"

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
