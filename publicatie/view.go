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
type view struct {
	byID   map[int64]*entry
	queues map[int64][]*entry // per person, oldest first
	ready  *btree.BTreeG[*entry]
	// stand is the last handeling the intake read: everything up to it is in the view. The
	// zero place (an empty view) is before every handeling.
	stand place
	xor   int64 // of the ids in the view: compared with the database's by the sweep
}

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

func newView() *view {
	return &view{
		byID:   map[int64]*entry{},
		queues: map[int64][]*entry{},
		ready:  btree.NewG(32, (*entry).less),
	}
}

// size is the number of handelingen in the view.
func (v *view) size() int { return len(v.byID) }

// add takes a handeling in; one that is already in is left as it is.
func (v *view) add(c Candidate, tsreg time.Time) {
	if _, ok := v.byID[c.ID]; ok {
		return
	}
	e := &entry{place: place{tsreg: tsreg, id: c.ID}, personen: c.Personen}
	v.byID[e.id] = e
	v.xor ^= e.id
	for _, p := range e.personen {
		q := v.queues[p]
		i, _ := slices.BinarySearchFunc(q, e, func(a, b *entry) int {
			if a.less(b) {
				return -1
			}
			return 1
		})
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
	for _, p := range e.personen {
		q := v.queues[p]
		i := slices.Index(q, e)
		if i < 0 {
			continue
		}
		q = slices.Delete(q, i, i+1)
		if len(q) == 0 {
			delete(v.queues, p)
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
		p.view, p.viewEpoch, p.lastSweep = newView(), epoch, time.Now()
	}
	return p.view
}

// takeIn reads the handelingen recorded in publicatie_nakomer (taking in those up to the
// stand; the intake reads the others in their turn) and up to Limit new ones after the stand
// into v, and returns how many it took in. When publicatie_herlees says a handeling was
// registered behind the stand, it starts from a new, empty view (p.view) instead. full says
// the intake read as many as it could: more are waiting. Every SweepInterval it compares v
// with the database afterwards, and starts v again if they disagree.
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
			p.m.viewRebuilds.Inc()
			p.view = newView()
			v = p.view
		}
	}
	limit := max(0, min(p.cfg.Limit, p.cfg.ViewSize-v.size()))
	rows, err := readIntake(ctx, q, p.cfg.Excluded, horizon, v.stand, limit)
	if err != nil {
		return 0, false, err
	}
	read, late, recorded := 0, 0, false
	for _, r := range rows {
		recorded = recorded || r.nakomer
		if !r.nakomer && v.stand.before(r.place) {
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
		case !v.stand.before(r.place):
			late++
		default:
			// Beyond the stand: the intake reads it in its turn. Taken in now, it would head
			// its persons' queues in front of their older handelingen not yet taken in.
			continue
		}
		v.add(c, r.tsreg)
	}
	if recorded {
		p.viewDirty = true // the intake emptied publicatie_nakomer
	}
	p.m.taken.WithLabelValues("nakomer").Add(float64(late))
	p.m.taken.WithLabelValues("intake").Add(float64(read))
	if time.Since(p.lastSweep) >= SweepInterval {
		p.lastSweep = time.Now()
		if ok, err := p.sweep(ctx, q, v); err != nil || !ok {
			return read + late, !ok, err
		}
	}
	return read + late, limit > 0 && read == limit, nil
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
	if n == v.size() && xor == v.xor {
		return true, nil
	}
	p.log.Warn("the publisher's view of the open work disagrees with the database; rebuilding it",
		slog.Int("view", v.size()), slog.Int("database", n))
	p.m.viewRebuilds.Inc()
	p.view = newView()
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
