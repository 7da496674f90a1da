package publicatie

import (
	"slices"
	"testing"
)

func TestSelect(t *testing.T) {
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
			if got := ids(Select(tt.cands, blocked, tt.budget)); !slices.Equal(got, tt.want) {
				t.Fatalf("Select = %v, want %v", got, tt.want)
			}
		})
	}
}
