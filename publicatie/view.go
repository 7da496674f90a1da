package publicatie

import (
	"slices"
	"time"

	"github.com/google/btree"
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
}

// parkedPerson is a person whose handelingen from place on are parked.
type parkedPerson struct {
	place
	capped bool // parked for its own queue's length (personCap), not only behind another
}

// The view's memory estimate, per handeling, per person of a handeling, per person with a
// queue, and per parked person: an upper bound of the Go heap it takes, maps grown and
// slices' spare capacity included (TestViewBytesBoundTheHeap measures 1.3 to 2 times less).
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

// place is a handeling's place in delivery order: tsreg, ties by id.
type place struct {
	tsreg time.Time
	id    int64
}

func (a place) before(b place) bool {
	return a.tsreg.Before(b.tsreg) || a.tsreg.Equal(b.tsreg) && a.id < b.id
}

// tsregArg is a.tsreg as a query argument: '-infinity' for the zero place.
func (a place) tsregArg() any {
	if a.tsreg.IsZero() {
		return "-infinity"
	}
	return a.tsreg
}

// entry is a handeling in the view.
type entry struct {
	place
	personen []int64
	heads    int // persons whose queue it heads: ready when heads == len(personen)
}

func (e *entry) less(o *entry) bool { return e.before(o.place) }

func (e *entry) isReady() bool { return e.heads == len(e.personen) }

// newView returns an empty view holding at most personCap handelingen of a person (at
// least 1).
func newView(personCap int) *view {
	return &view{
		byID:      map[int64]*entry{},
		queues:    map[int64][]*entry{},
		ready:     btree.NewG(32, (*entry).less),
		personCap: max(1, personCap),
		parked:    map[int64]parkedPerson{},
	}
}

// size is the number of handelingen in the view.
func (v *view) size() int { return len(v.byID) }

// parking says whether any handeling is parked.
func (v *view) parking() bool { return len(v.parked) > 0 }

// add takes a handeling in; one that is already in is left as it is. With mayPark (a
// handeling after everything in the view: the intake's), it parks the handeling instead when
// one of its persons is parked or has personCap handelingen in the view. Without (one
// taken back behind the stand), the cap is not applied: the caller makes sure no parked
// handeling lies before it (takeIn rewinds first).
func (v *view) add(c Candidate, tsreg time.Time, mayPark bool) {
	if _, ok := v.byID[c.ID]; ok {
		return
	}
	pl := place{tsreg: tsreg, id: c.ID}
	if mayPark && v.mustPark(c.Personen) {
		v.park(c.Personen, pl)
		return
	}
	e := &entry{place: pl, personen: c.Personen}
	v.byID[e.id] = e
	v.xor ^= e.id
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

// put takes in a handeling recorded in publicatie_nakomer, behind the stand (add without
// parking): one already in the view whose persons changed (bijhouding added some late) is
// taken in again with its persons.
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

// park leaves the handeling at pl out of the view and parks its persons from pl on (those
// not parked yet).
func (v *view) park(personen []int64, pl place) {
	v.parkedN++
	v.parkedXor ^= pl.id
	if v.firstParked == (place{}) {
		v.firstParked = pl
	}
	for _, p := range personen {
		if _, ok := v.parked[p]; ok {
			continue
		}
		v.parked[p] = parkedPerson{place: pl, capped: len(v.queues[p]) >= v.personCap}
		v.bytes += parkedPersonBytes
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
		if !e.before(from) {
			drop = append(drop, id)
		}
	}
	for _, id := range drop {
		v.remove(id)
	}
	v.bytes -= len(v.parked) * parkedPersonBytes
	clear(v.parked)
	v.firstParked, v.parkedN, v.parkedXor, v.rewindDue = place{}, 0, 0, false
	// Ids are positive (bigserial), so from.id-1 is before from and after everything else.
	v.stand = place{tsreg: from.tsreg, id: from.id - 1}
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
func (v *view) remove(id int64) {
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
		if pp, ok := v.parked[p]; ok && pp.capped && len(q) <= v.personCap/2 {
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

// readyCandidates returns up to n ready handelingen, oldest first.
func (v *view) readyCandidates(n int) []Candidate {
	var out []Candidate
	v.ready.Ascend(func(e *entry) bool {
		if len(out) >= n {
			return false
		}
		out = append(out, Candidate{ID: e.id, Personen: e.personen})
		return true
	})
	return out
}
