package publicatie

import (
	"container/heap"
	"slices"
)

// Groups (issue 25). A person's queued handelingen used to travel one at a time: each waited
// for the round trip of the one before it (publish, deliver, notify, next round), so a person
// with a long queue was delivered at one handeling per round trip. A group is a publication of
// several consecutive handelingen of the same persons: a ready handeling and the ones that
// would become ready, one after the other, as those before them are delivered. A consumer
// delivers a group in one transaction and sends its verzending messages in (tsreg, id) order
// in one broker transaction, so per-person order holds on the verzending queue as it did.

// memberBytes estimates a handeling's part of a publication body: its id and its persons'.
func memberBytes(c Candidate) int { return 32 + 20*len(c.Personen) }

// group extends the ready handeling head into a group from the view: it adds, oldest first,
// every handeling n for which, for each person r of n, either r is a person of the group and
// n is r's next handeling after the group's, or r is new to the group, n heads r's queue and r
// is not in blocked (in levering, fout, or a person of another group of the round). It stops
// at size handelingen or bytes (memberBytes), whichever comes first; the head always goes.
// The persons of the group are added to blocked.
//
// The view holds every open handeling of its persons up to its stand (parked ones lie after
// it), so "n is r's next in the view" is "n is r's next open handeling": a group never skips
// one. An n found ineligible stays so for the group: whatever is added later is younger.
func (v *view) group(head Candidate, blocked map[int64]struct{}, size, bytes int) []Candidate {
	e, ok := v.byID[head.ID]
	out := []Candidate{head}
	for _, p := range head.Personen {
		blocked[p] = struct{}{}
	}
	if !ok || size <= 1 || !slices.ContainsFunc(e.personen, func(p int64) bool { return len(v.queues[p]) > 1 }) {
		return out // nothing queued behind it: the uniform case, without allocating
	}
	next := map[int64]int{} // person -> index in its queue of the next handeling to consider
	var pending entryHeap
	seen := map[*entry]bool{e: true}
	advance := func(p int64) {
		q := v.queues[p]
		next[p]++
		if i := next[p]; i < len(q) && !seen[q[i]] {
			heap.Push(&pending, q[i])
		}
	}
	for _, p := range e.personen {
		next[p] = 0
		advance(p)
	}
	used := memberBytes(head)
	for pending.Len() > 0 && len(out) < size {
		n := heap.Pop(&pending).(*entry)
		if seen[n] {
			continue
		}
		seen[n] = true
		c := Candidate{ID: n.id, Personen: n.personen}
		if !v.mayJoin(n, next, blocked) || used+memberBytes(c) > bytes {
			continue
		}
		out = append(out, c)
		used += memberBytes(c)
		for _, r := range n.personen {
			if _, in := next[r]; !in {
				next[r] = 0
				blocked[r] = struct{}{}
			}
			advance(r)
		}
	}
	return out
}

// mayJoin says whether n may join a group whose persons' next places are next.
func (v *view) mayJoin(n *entry, next map[int64]int, blocked map[int64]struct{}) bool {
	for _, r := range n.personen {
		q := v.queues[r]
		if i, in := next[r]; in {
			if i >= len(q) || q[i] != n {
				return false
			}
			continue
		}
		if _, b := blocked[r]; b || len(q) == 0 || q[0] != n {
			return false
		}
	}
	return true
}

// entryHeap orders entries oldest first.
type entryHeap []*entry

func (h entryHeap) Len() int           { return len(h) }
func (h entryHeap) Less(i, j int) bool { return h[i].less(h[j]) }
func (h entryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *entryHeap) Push(x any)        { *h = append(*h, x.(*entry)) }
func (h *entryHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// components splits handelingen (oldest first) into the sets that share persons, each in the
// order given: handelingen in levering of one person must travel in one publication, or two
// consumers could deliver them at once and a later one overtake an earlier one.
func components(cs []Candidate) [][]Candidate {
	parent := make([]int, len(cs))
	for i := range parent {
		parent[i] = i
	}
	var find func(int) int
	find = func(i int) int {
		if parent[i] != i {
			parent[i] = find(parent[i])
		}
		return parent[i]
	}
	owner := map[int64]int{}
	for i, c := range cs {
		for _, p := range c.Personen {
			if j, ok := owner[p]; ok {
				parent[find(i)] = find(j)
			} else {
				owner[p] = i
			}
		}
	}
	index := map[int]int{}
	var out [][]Candidate
	for i, c := range cs {
		r := find(i)
		k, ok := index[r]
		if !ok {
			k = len(out)
			index[r] = k
			out = append(out, nil)
		}
		out[k] = append(out[k], c)
	}
	return out
}

// cut returns the members of g up to the first one not in ok: the ones after it cannot
// travel without it (they may share its persons).
func cut(g []Candidate, ok map[int64]bool) (keep, rest []Candidate) {
	i := slices.IndexFunc(g, func(c Candidate) bool { return !ok[c.ID] })
	if i < 0 {
		return g, nil
	}
	return g[:i], g[i:]
}
