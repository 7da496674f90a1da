package publicatie

import (
	"container/heap"
	"slices"
)

// Groups. A person's queued handelingen travelling one at a time would each wait for the round
// trip of the one before it (publish, deliver, notify, next round), so a person with a long
// queue would be delivered at one handeling per round trip. A group is a publication of
// several consecutive handelingen of the same persons: a ready handeling and the ones that
// would become ready, one after the other, as those before them are delivered. A consumer
// delivers a group in one transaction and sends its verzending messages in (tsreg, id) order
// in one broker transaction, so per-person order holds on the verzending queue as it did.

// memberBytes estimates a handeling's part of a publication body: its id and its persons'.
func memberBytes(c Candidate) int { return 32 + 20*len(c.Personen) }

// groups gives a round's budget to the oldest handelingen its groups can carry: heads (ready,
// oldest first, as Select kept them) and the members that would join their groups (grouping's
// rule), taken together in delivery order until budget handelingen are taken, so a group's
// next member goes before a younger head. Heads went first once, each group getting only the
// room they left: with the budget nearly used, the oldest person's chain then travelled one
// handeling a publication (head_of_queue: 8 links of one, 1.3 s). The groups come in the
// order of their heads; a head the budget does not reach is left out.
func (v *view) groups(heads []Candidate, blocked map[int64]struct{}, budget, size, bytes int) [][]Candidate {
	var out []*grouping
	var growing groupingHeap // groups with a member to consider, by that member's place
	taken, next := 0, 0
	for taken < budget {
		var g *grouping
		if growing.Len() > 0 {
			g = growing[0]
		}
		if next < len(heads) && (g == nil || !g.oldest().Before(v.placeOf(heads[next]))) {
			h := v.grouper(heads[next], blocked, size, bytes)
			next++
			taken++
			out = append(out, h)
			if h.more() {
				heap.Push(&growing, h)
			}
			continue
		}
		if g == nil {
			break
		}
		if g.grow(blocked) {
			taken++
		}
		if g.more() {
			heap.Fix(&growing, 0)
		} else {
			heap.Pop(&growing)
		}
	}
	gs := make([][]Candidate, len(out))
	for i, g := range out {
		gs[i] = g.out
	}
	return gs
}

// placeOf is a candidate's place in delivery order; one not in the view (never for the
// round's heads, which come from it) sorts first.
func (v *view) placeOf(c Candidate) place {
	if e, ok := v.byID[c.ID]; ok {
		return e.place
	}
	return place{}
}

// grouping is a group being extended a member at a time: out so far, and the handelingen that
// may join next, oldest first. A group extends a ready handeling (its head) from the view: it
// adds, oldest first, every handeling n for which, for each person r of n, either r is a
// person of the group and n is r's next handeling after the group's, or r is new to the group,
// n heads r's queue and r is not in blocked (in levering, fout, or a person of another group
// of the round). It stops at size handelingen or bytes (memberBytes), whichever comes first;
// the head always goes. The persons of the group are added to blocked.
//
// The view holds every open handeling of its persons up to its stand (parked ones lie after
// it), so "n is r's next in the view" is "n is r's next open handeling": a group never skips
// one. An n found ineligible stays so for the group: whatever is added later is younger.
type grouping struct {
	v           *view
	out         []Candidate
	next        map[int64]int // person -> index in its queue of the next handeling to consider
	pending     entryHeap
	seen        map[*entry]bool
	used        int // bytes (memberBytes)
	size, bytes int
}

// grouper starts a group with the ready handeling head and blocks its persons.
func (v *view) grouper(head Candidate, blocked map[int64]struct{}, size, bytes int) *grouping {
	g := &grouping{v: v, out: []Candidate{head}, size: size, bytes: bytes, used: memberBytes(head)}
	for _, p := range head.Personen {
		blocked[p] = struct{}{}
	}
	e, ok := v.byID[head.ID]
	if !ok || size <= 1 || !slices.ContainsFunc(e.personen, func(p int64) bool { return len(v.queues[p]) > 1 }) {
		return g // nothing queued behind it: the uniform case, without allocating more
	}
	g.next = map[int64]int{}
	g.seen = map[*entry]bool{e: true}
	for _, p := range e.personen {
		g.next[p] = 0
		g.advance(p)
	}
	return g
}

func (g *grouping) advance(p int64) {
	q := g.v.queues[p]
	g.next[p]++
	if i := g.next[p]; i < len(q) && !g.seen[q[i]] {
		heap.Push(&g.pending, q[i])
	}
}

// more says whether the group has room and a handeling to consider.
func (g *grouping) more() bool { return len(g.out) < g.size && g.pending.Len() > 0 }

// oldest is the place of the next handeling to consider (more must hold).
func (g *grouping) oldest() place { return g.pending[0].place }

// grow considers the oldest handeling that may join and adds it if it does (mayJoin, and
// within bytes), blocking its persons new to the group; it reports whether it was added.
func (g *grouping) grow(blocked map[int64]struct{}) bool {
	n := heap.Pop(&g.pending).(*entry)
	if g.seen[n] {
		return false
	}
	g.seen[n] = true
	c := Candidate{ID: n.ID, Personen: n.personen}
	if !g.v.mayJoin(n, g.next, blocked) || g.used+memberBytes(c) > g.bytes {
		return false
	}
	g.out = append(g.out, c)
	g.used += memberBytes(c)
	for _, r := range n.personen {
		if _, in := g.next[r]; !in {
			g.next[r] = 0
			blocked[r] = struct{}{}
		}
		g.advance(r)
	}
	return true
}

// groupingHeap orders groups by their next handeling to consider, oldest first.
type groupingHeap []*grouping

func (h groupingHeap) Len() int           { return len(h) }
func (h groupingHeap) Less(i, j int) bool { return h[i].oldest().Before(h[j].oldest()) }
func (h groupingHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *groupingHeap) Push(x any)        { *h = append(*h, x.(*grouping)) }
func (h *groupingHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
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
		if _, b := blocked[r]; b || v.writers.writing(r) || len(q) == 0 || q[0] != n {
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
