package publicatie

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/brp/levering/handeling"
)

// SweepInterval is how often the leader compares its view with the database (readChecksum)
// and rebuilds it when they disagree: handelingen deleted from admhnd or set to another status
// by hand while they waited in the view, or anything else the triggers of migration 0007 do
// not record.
const SweepInterval = 30 * time.Second

// openWork is the leader's view of the open work across its rounds: it owns the view, the
// epoch it belongs to, its sweeps and rebuilds. It reads and writes the database only through
// the round's store (roundStore), never SQL of its own. Only the round's goroutine uses it.
type openWork struct {
	cfg Config
	m   *metrics
	log *slog.Logger

	view        *view // nil: none yet (a follower's, or dropped after a failed round)
	epoch       int64
	leadSeen    []leadSeen  // the window learnLead reads
	leadSources leadSources // the floors of leadSeen's sources
	// recheck are the handelingen the last committed round could not mark (no longer to be
	// delivered, or locked by another session): they left the view, and the next intake takes
	// back those still to be delivered, before anything newer of their persons. Kept here, not
	// in publicatie_nakomer: a round that writes a record may wait for a transaction holding
	// it; a new view (a new leader, a failed round) reads them anyway.
	recheck   []int64
	lastSweep time.Time // of the view against the database
	// disagreed says the last sweep disagreed with the database: the next round sweeps again
	// and rebuilds the view if it disagrees too (sweep).
	disagreed bool
	// intakePersons is the persons per handeling the last intake read (at least 1): how
	// many handelingen the room under ViewBytes holds (intakeBounds).
	intakePersons int
}

func newOpenWork(cfg Config, m *metrics, log *slog.Logger) *openWork {
	return &openWork{cfg: cfg, m: m, log: log}
}

// forEpoch returns the view of epoch, a new empty one if the view belongs to another epoch
// (or none): a new leader, or a rebuild after a failed round, starts from the oldest
// handeling again.
func (w *openWork) forEpoch(epoch int64) *view {
	if w.view == nil || w.epoch != epoch {
		if w.epoch != epoch {
			w.leadSeen, w.leadSources = nil, leadSources{}
		}
		w.view, w.epoch, w.lastSweep, w.disagreed = newView(w.cfg.PersonCap, nil), epoch, time.Now(), false
	}
	return w.view
}

// drop forgets the view: a follower holds none, and after a failed round it may hold what
// the rolled-back transaction took in. The next round builds it again.
func (w *openWork) drop() {
	if w.view != nil {
		w.view = nil
		w.m.setView(nil)
		w.m.horizonWait.Set(0)
		w.m.horizonTx.Set(0)
		w.m.writerTx.Set(0)
		w.m.writerKeys.Set(0)
		w.m.writerAge.Set(0)
	}
}

// done removes the round's handelingen (published, or recorded for a recheck) from the view
// and returns how many handelingen it still holds.
func (w *openWork) done(keep []Candidate) (waiting int) {
	v := w.view
	if v == nil { // the round had no budget and only republished
		return 0
	}
	for _, c := range keep {
		v.remove(c.ID)
	}
	w.m.setView(v)
	return v.size()
}

// rewind rewinds v to its first parked handeling (view.rewind), counted as a rebuild.
func (w *openWork) rewind(v *view) {
	w.m.viewRebuilds.WithLabelValues(rebuildPersonCap).Inc()
	v.rewind()
}

// rebuild starts the view again from the oldest handeling, for the reason given (the label
// of publicatie_view_rebuilds_total).
func (w *openWork) rebuild(reason string) *view {
	w.m.viewRebuilds.WithLabelValues(reason).Inc()
	w.view, w.disagreed = newView(w.cfg.PersonCap, nil), false
	return w.view
}

// takeIn reads, into the view of epoch, the handelingen recorded in publicatie_nakomer (taking
// in those up to the stand; the intake reads the others in their turn) and new ones after the
// stand, as many as Limit, ViewSize and ViewBytes leave room for, and returns the view and
// how many it took in. When publicatie_herlees says a handeling was registered behind the
// stand, it starts from a new, empty view instead. full says the intake read as many as it
// could: more are waiting. Every SweepInterval it compares the view with the database
// afterwards, and starts it again if they disagree. lead is the margin's row as the horizon
// read it: the round learns the lead from what was recorded late (learnLead).
func (w *openWork) takeIn(ctx context.Context, st roundStore, epoch int64, horizon time.Time, lead leadRow) (v *view, taken int, full bool, err error) {
	taken, full, err = w.takeInto(ctx, st, w.forEpoch(epoch), horizon, lead)
	if w.view != nil {
		w.m.setView(w.view)
	}
	return w.view, taken, full, err
}

func (w *openWork) takeInto(ctx context.Context, st roundStore, v *view, horizon time.Time, lead leadRow) (taken int, full bool, err error) {
	rec, err := st.readRecords(ctx)
	if err != nil {
		return 0, false, err
	}
	w.reportLatePersons(rec.latePersons)
	refused, err := st.refuseOddTsreg(ctx, w.cfg.Excluded)
	if err != nil {
		return 0, false, err
	}
	for _, id := range refused {
		// Once per handeling: the next round finds it fout.
		w.m.tsregFout.Inc()
		w.log.Warn("handeling with a tsreg outside the accepted range set fout", slog.Int64("admhnd_id", id),
			slog.String("reason", handeling.FoutTsreg))
	}
	if err := w.learnLead(ctx, st, lead, rec.late, rec.samples); err != nil {
		return 0, false, err
	}
	if oldest := rec.oldest; rec.herlees && !v.stand.Before(oldest) {
		// Registered behind the stand: the view is no longer the prefix it must be.
		w.log.Info("handelingen registered with a tsreg the publisher's view had passed; building the view again",
			slog.Int64("admhnd_id", oldest.ID), slog.Time("tsreg", oldest.Tsreg))
		v = w.rebuild(rebuildLate)
	}
	if err := w.followFout(ctx, st, v); err != nil {
		return 0, false, err
	}
	if v.rewindDue {
		w.rewind(v)
	}
	read, late, full, err := w.intake(ctx, st, v, horizon, rec.nakomer)
	if err != nil {
		return 0, false, err
	}
	w.m.taken.WithLabelValues("nakomer").Add(float64(late))
	w.m.taken.WithLabelValues("intake").Add(float64(read))
	w.tookIn(read + late)
	if time.Since(w.lastSweep) >= SweepInterval {
		w.lastSweep = time.Now()
		if h := w.cfg.Hooks.BeforeSweep; h != nil {
			if err := h(ctx); err != nil {
				return read + late, false, err
			}
		}
		if ok, err := w.sweep(ctx, st, v); err != nil || !ok {
			return read + late, !ok, err
		}
	}
	return read + late, full, nil
}

// intake reads, with readIntake, what v has room for after its stand and the handelingen
// recorded in publicatie_nakomer (nakomer: readRecords emptied it) or left unmarked by the
// last round, into v.
func (w *openWork) intake(ctx context.Context, st roundStore, v *view, horizon time.Time, nakomer []int64) (read, late int, full bool, err error) {
	limit, budget := w.intakeBounds(v)
	rows, cut, err := st.readIntake(ctx, w.cfg.Excluded, horizon, v.stand, limit, budget, slices.Concat(nakomer, w.recheck))
	if err != nil {
		return 0, 0, false, err
	}
	w.recheck = nil
	oldStand, persons := v.stand, 0
	for _, r := range rows {
		if !r.nakomer && v.stand.Before(r.place) {
			v.stand = r.place
		}
	}
	for i := 0; i < len(rows); {
		r := rows[i]
		c := Candidate{ID: r.ID}
		for ; i < len(rows) && rows[i].ID == r.ID && rows[i].nakomer == r.nakomer; i++ {
			if rows[i].persoon.Valid {
				c.Personen = append(c.Personen, rows[i].persoon.Int64)
			}
		}
		switch {
		case !r.nakomer:
			read++
			persons += len(c.Personen)
			v.add(c, r.Tsreg, true)
		case oldStand.Before(r.place):
			// After the old stand: the intake read it above, or reads it in its turn. Taken in
			// now, it would head its persons' queues in front of their older handelingen not
			// yet taken in.
		default:
			// Behind the stand: among the parked it is parked too, with what the view holds
			// of its persons after it (view.put).
			late++
			v.put(c, r.Tsreg)
		}
	}
	if read > 0 {
		w.intakePersons = max(1, (persons+read-1)/read)
	}
	return read, late, limit > 0 && (read == limit || cut && read > 0), nil
}

// followFout keeps v's holds (the strict policy): read whole for a new view, then what changed
// since the last round (readFoutChanges, which also empties the records under the skip
// policy). A handeling that became fout leaves the view; the persons a fout holds from now on
// have their handelingen parked (view.hold); when a person with parked handelingen is released
// the view is rewound (view.release).
func (w *openWork) followFout(ctx context.Context, st roundStore, v *view) error {
	strict := w.cfg.FoutPolicy == handeling.Strict
	if strict && v.holds == nil {
		h, err := st.readHolds(ctx)
		if err != nil {
			return err
		}
		v.holds = h
	}
	changes, err := st.readFoutChanges(ctx)
	if err != nil {
		return err
	}
	if len(changes) == 0 || !strict {
		return nil
	}
	for _, s := range changes {
		if s.held {
			v.remove(s.id) // fout now: no longer to be delivered
		}
		newlyHeld, released := v.holds.set(s)
		v.hold(newlyHeld)
		v.release(released)
	}
	return nil
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
func (w *openWork) intakeBounds(v *view) (limit, budget int) {
	room := w.cfg.ViewBytes - v.bytes
	if room <= 0 {
		return 0, 0
	}
	budget = min(room, max(1, w.cfg.ViewBytes/4))
	limit = min(w.cfg.Limit, w.cfg.ViewSize-v.size(), 1+budget/intakeCost(max(1, w.intakePersons)))
	return max(0, limit), budget
}

// reportLatePersons reports the handelingen bijhouding added persons to after they were
// delivered (records.latePersons): a breach of the contract (a handeling's persons committed
// after it) that nothing can undo. The log names the ids so an operator can find them, never
// the persons.
func (w *openWork) reportLatePersons(found []int64) {
	for _, id := range found {
		w.m.latePersons.Inc()
		w.log.Warn("persons added to a handeling after it was delivered: afnemers received it without them",
			slog.Int64("admhnd_id", id))
	}
}

// sweep compares v with the database. Like with like: each checksum leaves out the handelingen
// recorded since the round read the records (their change committed between the round's reads,
// and the view follows it next round), and the view's side leaves out those of them it holds.
// A disagreement that remains (a handeling of those parked in the view, whose ids it does not
// keep, changed meanwhile) is checked again in the next round, when the view has followed the
// records; only when that round disagrees too does it start the view again (the caller's v is
// then stale; the next round builds on w.view). So a commit between two reads never rebuilds
// the view, and a real disagreement (a fout handeling deleted, triggers disabled) costs one
// round more.
func (w *openWork) sweep(ctx context.Context, st roundStore, v *view) (ok bool, err error) {
	sum, err := st.readChecksum(ctx, w.cfg.Excluded, v.stand)
	if err != nil {
		return false, err
	}
	n, xor := v.size()+v.parkedN, v.xor^v.parkedXor
	for _, id := range sum.pending {
		if e, in := v.byID[id]; in && !v.stand.Before(e.place) {
			n, xor = n-1, xor^id
		}
	}
	if n != sum.n || xor != sum.xor {
		return w.disagree(v, "the publisher's view of the open work disagrees with the database",
			slog.Int("view", n), slog.Int("database", sum.n)), nil
	}
	if v.holds != nil {
		if sum, err = st.readHoldsChecksum(ctx); err != nil {
			return false, err
		}
		n, xor = len(v.holds.fout), v.holds.xor
		for _, id := range sum.pending {
			if _, in := v.holds.fout[id]; in {
				n, xor = n-1, xor^id
			}
		}
		if n != sum.n || xor != sum.xor {
			// A fout handeling deleted, or changed with the triggers disabled: what the view
			// parks behind fout may be wrong.
			return w.disagree(v, "the publisher's knowledge of the fout handelingen disagrees with the database",
				slog.Int("view", n), slog.Int("database", sum.n)), nil
		}
	}
	w.disagreed = false
	return true, nil
}

// disagree handles a sweep's disagreement: the first is checked again next round (lastSweep
// cleared), a second in a row rebuilds the view. It returns whether v is still the view.
func (w *openWork) disagree(v *view, what string, attrs ...any) bool {
	if !w.disagreed {
		w.disagreed = true
		w.lastSweep = time.Time{}
		w.log.Debug(what+"; checking again next round", attrs...)
		return true
	}
	w.disagreed = false
	w.log.Warn(what+"; rebuilding it", attrs...)
	w.rebuild(rebuildSweep)
	return false
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
