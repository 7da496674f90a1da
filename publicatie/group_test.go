package publicatie

import (
	"slices"
	"testing"
	"time"
)

func viewOf(cs ...Candidate) *view {
	v := newView(1000, nil)
	for i, c := range cs {
		v.add(c, t0.Add(time.Duration(i)*time.Millisecond), true)
	}
	return v
}

// groupOf is the group v.groups makes of head alone, with budget to spare.
func groupOf(v *view, head Candidate, blocked map[int64]struct{}, size, bytes int) []Candidate {
	return v.groups([]Candidate{head}, blocked, size, size, bytes)[0]
}

// A group follows its persons' queues: the next handeling of each joins when every person of
// it has nothing older outside the group and is not blocked.
func TestGroupFollowsThePersonsQueues(t *testing.T) {
	v := viewOf(
		Candidate{ID: 1, Personen: []int64{10}},
		Candidate{ID: 2, Personen: []int64{20}},     // another person: another group
		Candidate{ID: 3, Personen: []int64{10}},     // joins
		Candidate{ID: 4, Personen: []int64{10, 30}}, // joins: 30 is new, 4 heads its queue
		Candidate{ID: 5, Personen: []int64{30, 40}}, // 40 is blocked: stops here for 30 and 40
		Candidate{ID: 6, Personen: []int64{10}},     // joins: 10's next after 4
		Candidate{ID: 7, Personen: []int64{30}},     // not: 5 lies before it
		Candidate{ID: 8, Personen: []int64{50}},
		Candidate{ID: 9, Personen: []int64{10, 50}}, // not: 8 of 50 lies outside
		Candidate{ID: 10, Personen: []int64{10}},    // not: 9 lies before it
	)
	blocked := map[int64]struct{}{40: {}}
	g := groupOf(v, Candidate{ID: 1, Personen: []int64{10}}, blocked, 100, DefaultGroupBytes)
	if got := ids(g); !slices.Equal(got, []int64{1, 3, 4, 6}) {
		t.Errorf("group = %v, want [1 3 4 6]", got)
	}
	for _, p := range []int64{10, 30} {
		if _, ok := blocked[p]; !ok {
			t.Errorf("person %d of the group is not blocked for other groups", p)
		}
	}
	if got := ids(groupOf(v, Candidate{ID: 1, Personen: []int64{10}}, map[int64]struct{}{}, 2, DefaultGroupBytes)); !slices.Equal(got, []int64{1, 3}) {
		t.Errorf("group of at most 2 = %v", got)
	}
	if got := ids(groupOf(v, Candidate{ID: 1, Personen: []int64{10}}, map[int64]struct{}{}, 100, 2*memberBytes(Candidate{Personen: []int64{1}}))); !slices.Equal(got, []int64{1, 3}) {
		t.Errorf("group of at most two handelingen' bytes = %v", got)
	}
}

func TestComponentsAndCut(t *testing.T) {
	cs := []Candidate{{ID: 1, Personen: []int64{1}}, {ID: 2, Personen: []int64{2}}, {ID: 3, Personen: []int64{1, 3}},
		{ID: 4, Personen: []int64{3, 2}}, {ID: 5, Personen: []int64{5}}, {ID: 6}}
	var got [][]int64
	for _, g := range components(cs) {
		got = append(got, ids(g))
	}
	if want := [][]int64{{1, 2, 3, 4}, {5}, {6}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("components = %v, want %v", got, want)
	}
	keep, rest := cut(cs[:4], map[int64]bool{1: true, 2: true, 4: true})
	if !slices.Equal(ids(keep), []int64{1, 2}) || !slices.Equal(ids(rest), []int64{3, 4}) {
		t.Errorf("cut = %v, %v", ids(keep), ids(rest))
	}
}

// A round's budget goes to the oldest handelingen its groups can carry, heads and members
// alike: the oldest person's chain is not cut to one a publication by younger heads.
func TestGroupsTakeTheBudgetOldestFirst(t *testing.T) {
	c := func(id, p int64) Candidate { return Candidate{ID: id, Personen: []int64{p}} }
	v := viewOf(c(1, 10), c(2, 20), c(3, 10), c(4, 30), c(5, 10), c(6, 40), c(7, 10))
	heads := []Candidate{c(1, 10), c(2, 20), c(4, 30), c(6, 40)}
	var got [][]int64
	for _, g := range v.groups(heads, map[int64]struct{}{}, 4, 100, DefaultGroupBytes) {
		got = append(got, ids(g))
	}
	if want := [][]int64{{1, 3}, {2}, {4}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("groups = %v, want %v (1, 2, 3 and 4 are the four oldest)", got, want)
	}
	got = nil
	for _, g := range v.groups(heads, map[int64]struct{}{}, 10, 2, DefaultGroupBytes) {
		got = append(got, ids(g))
	}
	if want := [][]int64{{1, 3}, {2}, {4}, {6}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("groups of at most 2 = %v, want %v", got, want)
	}
}
