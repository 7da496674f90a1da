package publicatie

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/google/btree"
	"github.com/lib/pq"

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
	// personRows is the sum of len(personen) over the view.
	personRows int

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
	v.personRows += len(e.personen)
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
	v.personRows -= len(e.personen)
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

// SweepInterval is how often the leader compares its view with the database (readChecksum)
// and rebuilds it when they disagree: handelingen deleted from admhnd or set to another status
// by hand while they waited in the view, or anything else the triggers of migration 0007 do
// not record.
const SweepInterval = 30 * time.Second

// viewFor returns the view of epoch, a new empty one if the view belongs to another epoch
// (or none): a new leader, or a rebuild after a failed round, starts from the oldest
// handeling again.
func (p *Publisher) viewFor(epoch int64) *view {
	p.viewDirty = false
	if p.view == nil || p.viewEpoch != epoch {
		p.view, p.viewEpoch, p.lastSweep = newView(p.cfg.PersonCap), epoch, time.Now()
	}
	return p.view
}

// rebuild starts the view again from the oldest handeling, for the reason given (the label
// of publicatie_view_rebuilds_total).
func (p *Publisher) rebuild(reason string) *view {
	p.m.viewRebuilds.WithLabelValues(reason).Inc()
	p.view = newView(p.cfg.PersonCap)
	return p.view
}

// takeIn reads the handelingen recorded in publicatie_nakomer (taking in those up to the
// stand; the intake reads the others in their turn) and new ones after the stand into v, as
// many as Limit, ViewSize and ViewBytes leave room for, and returns how many it took in. When
// publicatie_herlees says a handeling was registered behind the stand, it starts from a new,
// empty view (p.view) instead. full says the intake read as many as it could: more are
// waiting. Every SweepInterval it compares v with the database afterwards, and starts v again
// if they disagree.
func (p *Publisher) takeIn(ctx context.Context, q querier, v *view, horizon time.Time) (taken int, full bool, err error) {
	if err := p.reportOvertaken(ctx, q); err != nil {
		return 0, false, err
	}
	refused, err := refuseOddTsreg(ctx, q, p.cfg.Excluded)
	if err != nil {
		return 0, false, err
	}
	for _, id := range refused {
		// Once per handeling: the next round finds it fout.
		p.m.tsregFout.Inc()
		p.log.Warn("handeling with a tsreg outside the accepted range set fout", slog.Int64("admhnd_id", id),
			slog.String("reason", handeling.FoutTsreg))
	}
	oldest, recordedLate, err := readHerlees(ctx, q)
	if err != nil {
		return 0, false, err
	}
	if recordedLate {
		p.viewDirty = true // emptied publicatie_herlees
		if !v.stand.before(oldest) {
			// Registered behind the stand: the view is no longer the prefix it must be.
			p.log.Info("handelingen registered with a tsreg the publisher's view had passed; building the view again",
				slog.Int64("admhnd_id", oldest.id), slog.Time("tsreg", oldest.tsreg))
			v = p.rebuild(rebuildLate)
		}
	}
	if v.rewindDue {
		p.m.viewRebuilds.WithLabelValues(rebuildPersonCap).Inc()
		v.rewind()
	}
	read, late, full, rewound, err := p.intake(ctx, q, v, horizon)
	if err == nil && rewound {
		// A handeling taken back among the parked rewound the view: read from there at once,
		// so that this round selects from all it may.
		var r, l int
		r, l, full, _, err = p.intake(ctx, q, v, horizon)
		read, late = read+r, late+l
	}
	if err != nil {
		return 0, false, err
	}
	p.m.taken.WithLabelValues("nakomer").Add(float64(late))
	p.m.taken.WithLabelValues("intake").Add(float64(read))
	if time.Since(p.lastSweep) >= SweepInterval {
		p.lastSweep = time.Now()
		if ok, err := p.sweep(ctx, q, v); err != nil || !ok {
			return read + late, !ok, err
		}
	}
	return read + late, full, nil
}

// intake reads, with readIntake, what v has room for after its stand and what
// publicatie_nakomer holds, into v. rewound says one of the latter lay among the parked
// handelingen and v was rewound: read again.
func (p *Publisher) intake(ctx context.Context, q querier, v *view, horizon time.Time) (read, late int, full, rewound bool, err error) {
	limit, budget := p.intakeBounds(v)
	rows, cut, err := readIntake(ctx, q, p.cfg.Excluded, horizon, v.stand, limit, budget)
	if err != nil {
		return 0, 0, false, false, err
	}
	oldStand, persons := v.stand, 0
	for _, r := range rows {
		if r.nakomer {
			p.viewDirty = true // the intake emptied publicatie_nakomer
		} else if v.stand.before(r.place) {
			v.stand = r.place
		}
	}
	for i := 0; i < len(rows); {
		r := rows[i]
		c := Candidate{ID: r.id}
		for ; i < len(rows) && rows[i].id == r.id && rows[i].nakomer == r.nakomer; i++ {
			if rows[i].persoon.Valid {
				c.Personen = append(c.Personen, rows[i].persoon.Int64)
			}
		}
		switch {
		case !r.nakomer:
			read++
			persons += len(c.Personen)
			v.add(c, r.tsreg, true)
		case oldStand.before(r.place):
			// After the old stand: the intake read it above, or reads it in its turn. Taken in
			// now, it would head its persons' queues in front of their older handelingen not
			// yet taken in.
		case v.parking() && !r.place.before(v.firstParked):
			// Among the parked: its persons may have handelingen in the view after it.
			rewound = true
		default:
			late++
			v.add(c, r.tsreg, false)
		}
	}
	if read > 0 {
		p.intakePersons = max(1, (persons+read-1)/read)
	}
	if rewound {
		p.m.viewRebuilds.WithLabelValues(rebuildPersonCap).Inc()
		v.rewind()
	}
	return read, late, rewound || limit > 0 && (read == limit || cut && read > 0), rewound, nil
}

// Reasons for building the view again (label of publicatie_view_rebuilds_total).
const (
	rebuildLate      = "late"       // registered behind the stand
	rebuildSweep     = "sweep"      // the view disagreed with the database
	rebuildPersonCap = "person_cap" // rewound to the first parked handeling
)

// intakeBounds returns how many handelingen the intake may read into v (Limit, the room under
// ViewSize, and what the room under ViewBytes holds at the persons per handeling the last
// intake saw) and the bytes it may take in this round: the room, at most a quarter of
// ViewBytes, so that the rows read at once stay small beside the view.
func (p *Publisher) intakeBounds(v *view) (limit, budget int) {
	room := p.cfg.ViewBytes - v.bytes
	if room <= 0 {
		return 0, 0
	}
	budget = min(room, max(1, p.cfg.ViewBytes/4))
	limit = min(p.cfg.Limit, p.cfg.ViewSize-v.size(), 1+budget/intakeCost(max(1, p.intakePersons)))
	return max(0, limit), budget
}

// reportOvertaken sets fout the handelingen recorded in publicatie_ingehaald that are still to
// be delivered and reports those already published (readOvertaken). Both are a breach of the
// contract by bijhouding (a handeling's persons committed after it); the log names the ids so
// an operator can find them, never the persons.
func (p *Publisher) reportOvertaken(ctx context.Context, q querier) error {
	found, err := readOvertaken(ctx, q, p.cfg.Excluded)
	if err != nil {
		return err
	}
	if len(found) == 0 {
		return nil
	}
	p.viewDirty = true // emptied publicatie_ingehaald
	for _, o := range found {
		if o.published {
			p.m.overtaken.WithLabelValues("published").Inc()
			p.log.Warn("persons added to a published handeling after a newer handeling of one of them was published: afnemers may have received them out of order",
				slog.Int64("admhnd_id", o.id), slog.Int64("newer_admhnd_id", o.door))
			continue
		}
		p.m.overtaken.WithLabelValues("fout").Inc()
		p.log.Warn("persons added to a handeling after a newer handeling of one of them was published; set fout, an operator decides",
			slog.Int64("admhnd_id", o.id), slog.Int64("newer_admhnd_id", o.door))
	}
	return nil
}

// sweep compares v with the database. When they disagree it starts the view again (the
// caller's v is then stale; the next round builds on p.view).
func (p *Publisher) sweep(ctx context.Context, q querier, v *view) (ok bool, err error) {
	n, xor, err := readChecksum(ctx, q, p.cfg.Excluded, v.stand)
	if err != nil {
		return false, err
	}
	if n == v.size()+v.parkedN && xor == v.xor^v.parkedXor {
		return true, nil
	}
	p.log.Warn("the publisher's view of the open work disagrees with the database; rebuilding it",
		slog.Int("view", v.size()+v.parkedN), slog.Int("database", n))
	p.rebuild(rebuildSweep)
	return false, nil
}

// unmarked returns the ids of keep that markInLevering did not change.
func unmarked(keep []Candidate, marked map[int64]bool) []int64 {
	var out []int64
	for _, c := range keep {
		if !marked[c.ID] {
			out = append(out, c.ID)
		}
	}
	return out
}

// recheck records ids in publicatie_nakomer: the next round's intake takes back those still to
// be delivered.
func recheck(ctx context.Context, q querier, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	if _, err := q.ExecContext(ctx, recheckSQL, pq.Array(ids)); err != nil {
		return fmt.Errorf("record unmarked handelingen: %w", err)
	}
	return nil
}

const recheckSQL = `insert into publicatie_nakomer (admhnd_id) select unnest($1::bigint[]) on conflict do nothing`
