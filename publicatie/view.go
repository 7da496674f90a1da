package publicatie

import (
	"slices"
	"time"

	"github.com/google/btree"

	"github.com/brp/levering/handeling"
)

// view is the leader's picture of the open work, kept in memory across its rounds: every
// handeling to be delivered from the oldest up to the intake's stand, each person's queue of
// them oldest first, and, ordered, the ready ones: those at the head of every person's queue
// they are in. A round then finds the ready handelingen however the others interleave in
// tsreg: its work depends on how many persons have ready work, not on how many handelingen
// wait behind them.
//
// The view only ever holds a prefix of the candidates (in tsreg, id order), so every older
// handeling of a person in it is in it too. The database stays the truth: persons blocked by
// handelingen in levering or fout are read in every round, a handeling that is no longer to
// be delivered when it is marked is dropped, and a checksum (sweep) rebuilds the view when it
// and the database disagree. Only the round's goroutine uses it.
//
// Its memory is bounded (Config.ViewSize handelingen, Config.ViewBytes estimated bytes) and no
// person holds more than Config.PersonCap of its handelingen (park): a person with a long
// queue, blocked by a fout or only slow, cannot fill the view to the exclusion of others.
type view struct {
	byID   map[int64]*entry
	queues map[int64][]*entry // per person, oldest first
	ready  *btree.BTreeG[*entry]
	// stand is the last handeling the intake read: everything up to it is in the view, or
	// parked. The zero place (an empty view) is before every handeling.
	stand place
	xor   int64 // of the ids in the view: compared with the database's by the sweep
	bytes int   // estimated heap the view takes (entryBytes, personBytes, queueBytes, parkedPersonBytes)

	// Parking. The intake leaves out (parks) a handeling one of whose persons already has
	// personCap handelingen in the view, or is parked: such a person's later handelingen
	// cannot be ready before the ones in the view are delivered anyway. Each parked person
	// keeps the place of its first parked handeling; every handeling of it in the view lies
	// before that place, and every later one is parked, so none of them can overtake a parked
	// one. When a person parked for its cap has drained to personCap/2 (rewindDue), the view
	// is rewound to firstParked: everything from there is dropped and read again.
	personCap   int
	parked      map[int64]parkedPerson
	firstParked place // the oldest parked handeling; zero while none is parked
	parkedN     int   // parked handelingen (up to the stand), for the sweep's count
	parkedXor   int64 // and their ids, for the sweep's xor
	rewindDue   bool

	// Held behind fout (strict policy). A handeling of a person of an unreleased fout
	// handeling (holds) is parked as well, and so, through it, are its other persons from its
	// place on (parkedPerson.held), whether the intake reads it or the fout comes later
	// (hold): held work takes no room in the view and no round walks past it, however much
	// of it there is. When such a person is released the view is rewound.
	holds       *holds // nil: nothing is held (the skip policy)
	generation  uint32 // grows with every rewind: heldPerson.parked says parked in this one
	heldN       int    // parked handelingen held behind fout
	heldPersons int    // the persons of those

	// writers are the persons open transactions are linking handelingen to, as the round
	// read them with its horizon (openWriters): their handelingen are not chosen this round.
	writers openWriters
	// personlessBefore: a handeling without persons registered (tsreg) after it is not
	// chosen yet, its persons may still come (Config.PersonlessGrace).
	personlessBefore time.Time
}

// parkedPerson is a person whose handelingen from place on are parked.
type parkedPerson struct {
	place
	capped bool // parked for its own queue's length (personCap), not only behind another
	held   bool // parked behind a handeling held behind fout
}

// The view's memory estimate, per handeling, per person of a handeling, per person with a
// queue, and per parked person: an upper bound of the Go heap it takes, maps grown and
// slices' spare capacity included (TestViewBytesBoundTheHeap holds it above the heap).
const (
	entryBytes        = 128
	personBytes       = 32
	queueBytes        = 96
	parkedPersonBytes = 112
)

// entryCost is the estimated heap of a handeling of n persons in the view, not counting its
// persons' queues.
func entryCost(n int) int { return entryBytes + n*personBytes }

// intakeCost is what the intake reckons a handeling of n persons takes: as if each person
// were new to the view.
func intakeCost(n int) int { return entryBytes + n*(personBytes+queueBytes) }

// place is a handeling's place in delivery order (tsreg, ties by id), as the consumer's.
type place = handeling.Place

// tsregArg is a's tsreg as a query argument: '-infinity' for the zero place.
func tsregArg(a place) any {
	if a.Tsreg.IsZero() {
		return "-infinity"
	}
	return a.Tsreg
}

// entry is a handeling in the view.
type entry struct {
	place
	personen []int64
	heads    int // persons whose queue it heads: ready when heads == len(personen)
}

func (e *entry) less(o *entry) bool { return e.Before(o.place) }

func (e *entry) isReady() bool { return e.heads == len(e.personen) }

// newView returns an empty view holding at most personCap handelingen of a person (at
// least 1), and parking those of the persons h holds (nil: none).
func newView(personCap int, h *holds) *view {
	return &view{
		byID:       map[int64]*entry{},
		queues:     map[int64][]*entry{},
		ready:      btree.NewG(32, (*entry).less),
		personCap:  max(1, personCap),
		parked:     map[int64]parkedPerson{},
		holds:      h,
		generation: 1,
	}
}

// size is the number of handelingen in the view.
func (v *view) size() int { return len(v.byID) }

// parking says whether any handeling is parked.
func (v *view) parking() bool { return v.parkedN > 0 }

// add takes a handeling in; one that is already in is left as it is. It parks the handeling
// instead when one of its persons is held behind fout (heldBy) or, with mayPark (a handeling
// after everything in the view: the intake's), when one of them is parked or has personCap
// handelingen in the view. Without mayPark (one taken back behind the stand) the cap is not
// applied, but a person parked before its place parks it (parkedBefore).
func (v *view) add(c Candidate, tsreg time.Time, mayPark bool) {
	if _, ok := v.byID[c.ID]; ok {
		return
	}
	pl := place{Tsreg: tsreg, ID: c.ID}
	if held := v.heldBy(c.Personen, pl); held || mayPark && v.mustPark(c.Personen) || !mayPark && v.parkedBefore(c.Personen, pl) {
		v.parkAt(c.ID, c.Personen, pl, held, !mayPark)
		return
	}
	e := &entry{place: pl, personen: c.Personen}
	v.byID[e.ID] = e
	v.xor ^= e.ID
	v.bytes += entryCost(len(e.personen))
	for _, p := range e.personen {
		q := v.queues[p]
		i, _ := slices.BinarySearchFunc(q, e, func(a, b *entry) int {
			if a.less(b) {
				return -1
			}
			return 1
		})
		if len(q) == 0 {
			v.bytes += queueBytes
		}
		if i == 0 {
			if len(q) > 0 {
				v.loseHead(q[0])
			}
			e.heads++
		}
		v.queues[p] = slices.Insert(q, i, e)
	}
	if e.isReady() {
		v.ready.ReplaceOrInsert(e)
	}
}

// put takes in a handeling recorded in publicatie_nakomer, behind the stand (add without the
// cap): one already in the view whose persons changed (bijhouding added some late) is taken in
// again with its persons. Among the parked it is parked, with what the view holds of its
// persons after it (parkAt).
func (v *view) put(c Candidate, tsreg time.Time) {
	if e, ok := v.byID[c.ID]; ok {
		if slices.Equal(e.personen, c.Personen) {
			return
		}
		v.remove(c.ID)
	}
	v.add(c, tsreg, false)
}

// mustPark says whether a handeling of these persons, after everything in the view, must be
// parked: one of them is parked, or has personCap handelingen in the view.
func (v *view) mustPark(personen []int64) bool {
	for _, p := range personen {
		if _, ok := v.parked[p]; ok || len(v.queues[p]) >= v.personCap {
			return true
		}
	}
	return false
}

// heldBy says whether a handeling of these persons at pl is held behind fout: one of them is
// of an unreleased fout handeling, or parked behind one that is held, before pl.
func (v *view) heldBy(personen []int64, pl place) bool {
	for _, p := range personen {
		if pp, ok := v.parked[p]; ok && pp.held && pp.Before(pl) || v.holds.isHeld(p) {
			return true
		}
	}
	return false
}

// parkedBefore says whether one of these persons is parked from a place before pl.
func (v *view) parkedBefore(personen []int64, pl place) bool {
	for _, p := range personen {
		if pp, ok := v.parked[p]; ok && pp.Before(pl) {
			return true
		}
	}
	return false
}

// parkAt leaves the handeling id at pl out of the view (parks it, counted for the sweep) and
// parks its persons from pl on (held: behind fout). behind says pl lies behind the stand (a
// handeling taken back): what the view holds of its persons from pl on is parked with it
// (evict), and what was parked of them after pl may have been parked for another reason.
func (v *view) parkAt(id int64, personen []int64, pl place, held, behind bool) {
	v.countParked(id, pl, held)
	for _, p := range personen {
		v.evict(p, pl, held, behind)
	}
}

// countParked counts the handeling id at pl as parked.
func (v *view) countParked(id int64, pl place, held bool) {
	v.parkedN++
	v.parkedXor ^= id
	if v.firstParked == (place{}) || pl.Before(v.firstParked) {
		v.firstParked = pl
	}
	if held {
		v.heldN++
	}
}

// evict parks person p from pl on: what the view holds of p from there leaves it, counted as
// parked, and so, from each such handeling's place, do its other persons' (and so on). After
// it, every handeling in the view of a person parked at a place lies before that place, as
// the intake's parking leaves it. The evicted handelingen are still to be delivered; a
// rewind reads them again.
func (v *view) evict(p int64, pl place, held, behind bool) {
	type from struct {
		p      int64
		pl     place
		behind bool
	}
	work := []from{{p, pl, behind}}
	for len(work) > 0 {
		f := work[len(work)-1]
		work = work[:len(work)-1]
		v.markParked(f.p, f.pl, held, f.behind)
		q := v.queues[f.p]
		i, _ := slices.BinarySearchFunc(q, f.pl, func(e *entry, pl place) int {
			if e.Before(pl) {
				return -1
			}
			return 1
		})
		for _, e := range slices.Clone(q[i:]) {
			for _, r := range e.personen {
				if r != f.p {
					work = append(work, from{r, e.place, true})
				}
			}
			v.drop(e.ID, false)
			v.countParked(e.ID, e.place, held)
		}
	}
}

// markParked records that p's handelingen from pl on are parked (held: behind fout; behind:
// pl lies behind the stand). A person of an unreleased fout handeling is marked in holds
// rather than in parked: it needs no place, its every handeling is parked.
func (v *view) markParked(p int64, pl place, held, behind bool) {
	if held && v.holds.isHeld(p) {
		if hp := v.holds.persons[p]; hp.parked != v.generation {
			hp.parked = v.generation
			v.holds.persons[p] = hp
			v.heldPersons++
		}
		return
	}
	pp, ok := v.parked[p]
	if !ok {
		pp = parkedPerson{place: pl, capped: len(v.queues[p]) >= v.personCap}
		v.bytes += parkedPersonBytes
	} else if pl.Before(pp.place) {
		pp.place = pl
	}
	if held && !pp.held {
		pp.held = true
		v.heldPersons++
		if ok && behind {
			// Parked for another reason, possibly also after pl: what was parked there is
			// counted as not held. A rewind counts it again.
			v.rewindDue = true
		}
	}
	v.parked[p] = pp
}

// hold parks what the view holds of persons that a fout holds from now on (holds.set's
// newlyHeld): all of their handelingen, with their other persons' from there on.
func (v *view) hold(persons []int64) {
	for _, p := range persons {
		if _, ok := v.parked[p]; ok {
			// Parked before for another reason: its parked handelingen are counted as not
			// held. A rewind counts them again.
			v.rewindDue = true
		}
		if q := v.queues[p]; len(q) > 0 {
			v.evict(p, q[0].place, true, true)
		}
	}
}

// release rewinds the view when a person that a fout no longer holds (holds.set's released)
// had handelingen parked behind it in this generation: they may be ready now.
func (v *view) release(released []release) {
	for _, r := range released {
		if r.parked == v.generation {
			v.rewindDue = true
		}
	}
}

// rewind drops every handeling from firstParked on and moves the stand back to just before it:
// the intake reads them again, the parked ones among them, with the room their persons'
// deliveries made. Nothing from there on has been published (the view holds only what is
// still to be delivered), so nothing is lost or reordered.
func (v *view) rewind() {
	from := v.firstParked
	if from == (place{}) {
		v.rewindDue = false
		return
	}
	var drop []int64
	for id, e := range v.byID {
		if !e.Before(from) {
			drop = append(drop, id)
		}
	}
	for _, id := range drop {
		v.remove(id)
	}
	v.bytes -= len(v.parked) * parkedPersonBytes
	clear(v.parked)
	v.firstParked, v.parkedN, v.parkedXor, v.rewindDue = place{}, 0, 0, false
	v.heldN, v.heldPersons = 0, 0
	v.generation++
	// Ids are positive (bigserial), so from.id-1 is before from and after everything else.
	v.stand = place{Tsreg: from.Tsreg, ID: from.ID - 1}
}

// loseHead records that e no longer heads one of its persons' queues.
func (v *view) loseHead(e *entry) {
	if e.isReady() {
		v.ready.Delete(e)
	}
	e.heads--
}

// remove drops a handeling (published, or no longer to be delivered); the next handeling of
// each of its persons may become ready.
func (v *view) remove(id int64) { v.drop(id, true) }

// drop removes a handeling from the view. drained says the room it leaves counts towards
// rewinding a person parked for its cap (rewindDue); not when it is parked itself (evict).
func (v *view) drop(id int64, drained bool) {
	e, ok := v.byID[id]
	if !ok {
		return
	}
	if e.isReady() {
		v.ready.Delete(e)
	}
	delete(v.byID, id)
	v.xor ^= id
	v.bytes -= entryCost(len(e.personen))
	for _, p := range e.personen {
		q := v.queues[p]
		i := slices.Index(q, e)
		if i < 0 {
			continue
		}
		q = slices.Delete(q, i, i+1)
		if pp, ok := v.parked[p]; drained && ok && pp.capped && len(q) <= v.personCap/2 {
			v.rewindDue = true
		}
		if len(q) == 0 {
			delete(v.queues, p)
			v.bytes -= queueBytes
			continue
		}
		v.queues[p] = q
		if i == 0 {
			h := q[0]
			h.heads++
			if h.isReady() {
				v.ready.ReplaceOrInsert(h)
			}
		}
	}
}

// readyCandidates returns up to n ready handelingen none of whose persons is in blocked or
// linked by an open transaction (v.writers), oldest first; a handeling without persons only
// once its grace has passed (v.personlessBefore). It walks past the blocked ones (persons in
// levering, recorded since the intake, or being written): at most as many as the persons of
// those, whom the service's own bounds (MaxInLevering, MaxWriterLocks) limit, and the
// handelingen without persons in their grace. Handelingen held behind fout are never ready:
// they are parked.
func (v *view) readyCandidates(n int, blocked map[int64]struct{}) []Candidate {
	var out []Candidate
	v.ready.Ascend(func(e *entry) bool {
		if len(out) >= n {
			return false
		}
		for _, p := range e.personen {
			if _, ok := blocked[p]; ok || v.writers.writing(p) {
				return true
			}
		}
		if len(e.personen) == 0 && !e.Tsreg.Before(v.personlessBefore) {
			return true
		}
		out = append(out, Candidate{ID: e.ID, Personen: e.personen})
		return true
	})
	return out
}
