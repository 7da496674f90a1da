package publicatie

import (
	"slices"
	"testing"
)

func TestReferenceSelect(t *testing.T) {
	t.Parallel()
	c := func(id int64, ps ...int64) Candidate { return Candidate{ID: id, Personen: ps} }
	tests := []struct {
		name    string
		cands   []Candidate
		blocked []int64
		budget  int
		want    []int64
	}{
		{"oldest first, all free", []Candidate{c(1, 10), c(2, 20), c(3, 30)}, nil, 10, []int64{1, 2, 3}},
		{"second of a person waits", []Candidate{c(1, 10), c(2, 10), c(3, 30)}, nil, 10, []int64{1, 3}},
		{"multi-person chain", []Candidate{c(1, 10, 11), c(2, 11, 12), c(3, 12)}, nil, 10, []int64{1}},
		{"blocked person blocks its later handelingen", []Candidate{c(1, 10), c(2, 20)}, []int64{10}, 10, []int64{2}},
		{"skipped handeling blocks all its persons", []Candidate{c(1, 10, 11), c(2, 11), c(3, 12)}, []int64{10}, 10, []int64{3}},
		{"budget caps", []Candidate{c(1, 10), c(2, 20), c(3, 30)}, nil, 2, []int64{1, 2}},
		{"no persons never blocked", []Candidate{c(1), c(2), c(3, 10)}, []int64{10}, 10, []int64{1, 2}},
		{"zero budget", []Candidate{c(1, 10)}, nil, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			blocked := map[int64]struct{}{}
			for _, p := range tt.blocked {
				blocked[p] = struct{}{}
			}
			if got := ids(refSelect(tt.cands, blocked, tt.budget)); !slices.Equal(got, tt.want) {
				t.Fatalf("Select = %v, want %v", got, tt.want)
			}
		})
	}
}

// refSelect is the reference model of the selection: the straightforward rule that the
// publisher used before publicatie_open (on a window of the oldest candidates). It walks
// candidates oldest first and returns, in that order, at most budget of them that may be
// published now: a handeling is kept only if none of its persons is blocked. Every
// candidate walked, kept or not, blocks its persons for the candidates after it, so a person's
// second handeling never travels with its first and a skipped multi-person handeling holds
// back all of its persons. blocked holds the persons blocked before the walk (in levering, or
// fout under the strict policy); refSelect adds to it.
func refSelect(candidates []Candidate, blocked map[int64]struct{}, budget int) []Candidate {
	var keep []Candidate
	for _, c := range candidates {
		if len(keep) >= budget {
			break
		}
		free := true
		for _, p := range c.Personen {
			if _, ok := blocked[p]; ok {
				free = false
				break
			}
		}
		for _, p := range c.Personen {
			blocked[p] = struct{}{}
		}
		if free {
			keep = append(keep, c)
		}
	}
	return keep
}
