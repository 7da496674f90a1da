package publicatie

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/brp/levering/broker"
	"github.com/brp/levering/handeling"
)

// A round is one publication round, in one database transaction, in four phases: plan (count
// what is in flight, take what is new into the view of open work, keep its oldest ready
// handelingen whose persons are not blocked), mark (them in_levering, and touch those whose
// earlier message was lost), publish (all of them in one broker transaction) and finish
// (commit only if the lease is still ours, update the view, recheck what could not be marked).
type round struct {
	epoch int64
	start time.Time
	// When plan, mark and publish ended, for the debug log: where a round's time goes.
	planned, markedAt, publishedAt time.Time
	tx                             *sqlx.Tx
	q                              querier    // the transaction, for the fence
	store                          roundStore // the transaction, for everything else

	inLevering int           // in levering when the round began
	budget     int           // MaxInLevering - inLevering
	stale      []Candidate   // in levering past the redelivery timeout: published again
	candidates []Candidate   // ready and not blocked in the view, oldest first, at most window(budget)
	groups     [][]Candidate // what the round publishes: each a ready candidate and those that travel with it
	keep       []Candidate   // every handeling of the groups
	taken      int           // handelingen the intake took into the view
	intakeFull bool          // the intake read as many as it could: more are waiting

	marked, republished map[int64]bool // what mark changed
	msgs                []broker.Message
	sent                []int64

	horizon time.Time  // registered before it: in the view (readHorizon)
	st      roundState // as read with the horizon
	sleep   bool       // the publisher may wait for a notification after this round (sleeping)
}

// round runs one round under epoch (0: standalone) and returns how many handelingen it
// published; more says another round should follow at once, sleep that the publisher may
// wait for a notification (or DELAY) before the next one (wake), and otherwise it looks again
// after busyPoll.
func (p *Publisher) round(ctx context.Context, epoch int64) (published int, more, sleep bool, err error) {
	defer func() {
		if err != nil {
			p.work.drop()
			p.heldEpoch = 0 // what reportHeld wrote may be rolled back: write it again
		}
	}()
	r, err := p.plan(ctx, epoch)
	if r != nil && r.tx != nil {
		defer r.tx.Rollback() //nolint:errcheck // no-op after commit
	}
	if err != nil {
		return 0, false, false, err
	}
	if err := p.sleeping(ctx, r); err != nil {
		return 0, false, false, err
	}
	if err := p.reportHeld(ctx, r); err != nil {
		return 0, false, false, err
	}
	if err := p.heal(ctx, r); err != nil {
		return 0, false, false, err
	}
	if len(r.keep) == 0 && len(r.stale) == 0 {
		if !r.store.changed() {
			return 0, r.intakeFull, r.sleep, nil
		}
		// The round emptied a record table or wrote the service's row (roundStore.changed):
		// committed behind the fence like any round, so that a deposed leader cannot take the
		// new one's records.
		return 0, r.intakeFull, r.sleep, p.commit(ctx, r)
	}
	r.planned = time.Now()
	if err := p.mark(ctx, r); err != nil {
		return 0, false, false, err
	}
	r.markedAt = time.Now()
	if err := p.publish(ctx, r); err != nil {
		return 0, false, false, err
	}
	r.publishedAt = time.Now()
	published, more, err = p.finish(ctx, r)
	return published, more, false, err
}

// busyPoll is how long the leader waits before its next round while work is in levering or a
// round found something, without waiting for a notification: deliveries notify no more, and
// while the leader works registrations do not either (migration 0011: a notifying commit holds
// a lock every other notifying commit of the database waits for).
const busyPoll = 5 * time.Millisecond

// sleeping keeps publicatie_state.sleeping, in the round's transaction: false while the leader
// works (nothing in levering, nothing new: it may sleep), so that registrations do not notify;
// true before it sleeps, so that they wake it. It may sleep only a round after it set
// sleeping, once no transaction that may still register began before this round (one that
// read sleeping before it changed, registered without a notification, and commits later,
// unseen by this round); until then it looks again after busyPoll. In FixedDelay mode nobody
// listens: sleeping stays false.
func (p *Publisher) sleeping(ctx context.Context, r *round) error {
	busy := len(r.keep) > 0 || len(r.stale) > 0 || r.taken > 0 || r.inLevering > 0 || r.intakeFull || p.cfg.FixedDelay
	want := r.st.sleeping
	switch {
	case busy:
		want = false
	case !r.st.sleeping:
		want = true
	default:
		r.sleep = !r.st.older
	}
	if want == r.st.sleeping {
		return nil
	}
	if err := r.store.setSleeping(ctx, want); err != nil {
		return dbErr(err)
	}
	return nil
}

// heldReportEvery is how often at most the leader writes its held counts (reportHeld).
const heldReportEvery = time.Second

// reportHeld writes, in the round's transaction, what the view holds behind fout when that
// changed since the leader last wrote it (at most every heldReportEvery): publicatie status
// and the status page show it when counting it from the tables takes longer than their budget
// (operate.OverviewConfig.Budget). A new leader writes its own once its view holds any.
func (p *Publisher) reportHeld(ctx context.Context, r *round) error {
	v := p.work.view
	if v == nil || v.holds == nil {
		return nil
	}
	now := [2]int{v.heldN, v.heldPersons}
	if (now == p.heldWritten && p.heldEpoch == r.epoch) || time.Since(p.heldAt) < heldReportEvery {
		return nil
	}
	if err := r.store.writeHeldCounts(ctx, v.heldN, v.heldPersons); err != nil {
		return dbErr(err)
	}
	p.heldWritten, p.heldEpoch, p.heldAt = now, r.epoch, time.Now()
	return nil
}

// healEvery is how often at most the leader looks for fouts that heal.
const healEvery = 5 * time.Second

// HealedBy is who the audit trail names for a retry the service made itself (heal).
const HealedBy = "publicatie"

// heal retries, in the round's transaction (behind the fence, as every change the leader
// makes), the fout handelingen whose cause is gone (heal.sql): set fout because they had no
// persons when delivered, whose persons have come since, with nothing of their persons
// delivered after them. An overtaken one (handeling.FoutOvertaken) stays for an operator: it
// can no longer be delivered in order. Released ones stay too: an operator acted on them.
func (p *Publisher) heal(ctx context.Context, r *round) error {
	if time.Since(p.healedAt) < healEvery {
		return nil
	}
	p.healedAt = time.Now()
	ids, err := r.store.heal(ctx)
	if err != nil {
		return dbErr(err)
	}
	if len(ids) == 0 {
		return nil
	}
	p.m.healed.Add(float64(len(ids)))
	p.log.Info("fout handelingen retried: their persons came, and nothing of theirs was delivered after them",
		slog.Any("admhnd_ids", ids), slog.String("foutreden", handeling.FoutGeenPersonen))
	return nil
}

// healNote is the audit trail's note on a retry heal made.
const healNote = "retried by the service: its persons came after its delivery, and nothing of theirs was delivered after it"

// plan begins the round's transaction and decides what it publishes.
//
// It does not renew the lease first: the commit's fence decides whether the round counts,
// and elector.keep renews the lease every lease timeout/5 between rounds. A leader that lost
// the lease while it was frozen finds out at its next keep or at its round's commit; what
// that round published before the commit is absorbed like a round killed after its broker
// commit (docs/robustness.md). A renewal of its own cost each round a commit, and beside a
// busy machine every round trip of a round costs milliseconds (docs/performance.md).
func (p *Publisher) plan(ctx context.Context, epoch int64) (*round, error) {
	r := &round{epoch: epoch, start: time.Now()}
	// An error here is the database being away: BeginTx reports it below, and what did not
	// get prepared runs unprepared.
	_ = p.stmts.Prepare(ctx, p.sql.roundSQL()...)
	tx, err := p.db.BeginTxx(ctx, nil)
	if err != nil {
		return nil, dbErr(fmt.Errorf("begin round: %w", err))
	}
	r.tx, r.q = tx, p.stmts.In(tx.Tx)
	r.store = newSQLStore(p.sql, r.q)
	// A leader frozen inside a round must not hold its row locks forever: the database ends
	// the session, and with it the round, after the lease timeout.
	if err := r.store.start(ctx, p.cfg.LeaseTimeout); err != nil {
		return r, dbErr(err)
	}
	horizon, st, err := r.store.readHorizon(ctx)
	if err != nil {
		return r, dbErr(err)
	}
	r.horizon, r.st = horizon, st
	p.m.horizonWait.Set(st.wait.seconds)
	p.m.horizonTx.Set(st.wait.holder)
	p.m.writerTx.Set(float64(st.writers.transactions))
	p.m.writerKeys.Set(float64(len(st.writers.keys)))
	p.m.writerAge.Set(st.writers.oldest)
	if r.inLevering, r.stale, err = r.store.readInLevering(ctx, p.cfg.RedeliveryTimeout, p.cfg.MaxInLevering); err != nil {
		return r, dbErr(err)
	}
	r.budget = p.cfg.MaxInLevering - r.inLevering
	if r.budget <= 0 {
		return r, nil
	}
	v, taken, full, err := p.work.takeIn(ctx, r.store, epoch, horizon, st.lead)
	if err != nil {
		return r, dbErr(err)
	}
	r.taken, r.intakeFull = taken, full
	if h := p.cfg.Hooks.AfterIntake; h != nil {
		if err := h(ctx); err != nil {
			return r, err
		}
	}
	return r, p.choose(ctx, r, v)
}

// choose decides what the round publishes from the view v: the oldest ready handelingen none of
// whose persons is blocked (in levering, recorded since the intake, or linked by an open
// transaction: openWriters), in groups, up to the budget.
func (p *Publisher) choose(ctx context.Context, r *round, v *view) error {
	blocked, err := r.store.readBlocked(ctx, p.cfg.FoutPolicy == handeling.Strict)
	if err != nil {
		return dbErr(err)
	}
	v.writers = r.st.writers
	v.personlessBefore = r.horizon.Add(-p.cfg.PersonlessGrace)
	r.candidates = v.readyCandidates(window(r.budget), blocked)
	heads := Select(r.candidates, blocked, r.budget)
	r.groups = v.groups(heads, blocked, r.budget, p.cfg.GroupSize, p.cfg.GroupBytes)
	for _, g := range r.groups {
		r.keep = append(r.keep, g...)
	}
	return nil
}

// mark sets the kept handelingen in_levering and touches the stale ones, and encodes the
// publications of those it changed: the stale ones first, then the groups, oldest first. A
// group, or a set of stale ones sharing persons, travels only up to its first member that
// could not be marked or touched; the marked ones after it are set back (they come back
// through publicatie_nakomer).
func (p *Publisher) mark(ctx context.Context, r *round) (err error) {
	stale := components(r.stale)
	if r.republished, err = r.store.touchStale(ctx, ids(slices.Concat(stale...))); err != nil {
		return dbErr(err)
	}
	if r.marked, err = r.store.markInLevering(ctx, ids(r.keep)); err != nil {
		return dbErr(err)
	}
	var bundles bundler
	for _, g := range stale {
		g, rest := cut(g, r.republished)
		for _, c := range rest {
			delete(r.republished, c.ID) // touched, not sent: in levering as it was
		}
		bundles.add(g, p.cfg.GroupSize, p.cfg.GroupBytes)
	}
	var back []int64
	for _, g := range r.groups {
		g, rest := cut(g, r.marked)
		for _, c := range rest {
			if r.marked[c.ID] {
				back = append(back, c.ID)
				delete(r.marked, c.ID)
			}
		}
		bundles.add(g, p.cfg.GroupSize, p.cfg.GroupBytes)
	}
	for _, b := range bundles.pubs {
		if err := p.encode(r, b); err != nil {
			return err
		}
	}
	if err := r.store.setBack(ctx, back); err != nil {
		return dbErr(err)
	}
	if len(r.republished) > 0 {
		p.log.Warn("handelingen in levering past the redelivery timeout published again",
			slog.Any("admhnd_ids", ids(r.stale)), slog.Duration("redelivery_timeout", p.cfg.RedeliveryTimeout))
	}
	return p.cfg.Hooks.AfterMark.Run(ctx, r.sent)
}

// bundler packs a round's groups into publications: groups share no person, so
// several travel in one message as well as one, and every message the broker does not carry
// is CPU it does not spend (about half of the pipeline's per handeling). A publication holds
// whole groups, oldest first, up to GroupSize handelingen and GroupBytes; a group larger than
// that travels alone. The consumer checks every member's order by itself (package levering).
type bundler struct {
	pubs  [][]Candidate
	bytes int // of the last publication
}

func (b *bundler) add(g []Candidate, size, bytes int) {
	if len(g) == 0 {
		return
	}
	n := 0
	for _, c := range g {
		n += memberBytes(c)
	}
	if k := len(b.pubs); k > 0 && len(b.pubs[k-1])+len(g) <= size && b.bytes+n <= bytes {
		b.pubs[k-1] = append(b.pubs[k-1], g...)
		b.bytes += n
		return
	}
	b.pubs = append(b.pubs, slices.Clone(g))
	b.bytes = n
}

// encode adds the publication of g to the round's messages; an empty g adds none.
func (p *Publisher) encode(r *round, g []Candidate) error {
	if len(g) == 0 {
		return nil
	}
	members := make([]handeling.Member, len(g))
	for i, c := range g {
		members[i] = handeling.Member{ID: c.ID, Personen: append([]int64{}, c.Personen...)}
		r.sent = append(r.sent, c.ID)
	}
	body, err := json.Marshal(handeling.NewPublication(members))
	if err != nil {
		return fmt.Errorf("encode publication %d: %w", g[0].ID, err)
	}
	r.msgs = append(r.msgs, broker.Message{Destination: p.cfg.Queue, Header: handeling.IDHeaders(g[0].ID), Body: body})
	return nil
}

// publish puts the round's publications on the queue in one broker transaction.
func (p *Publisher) publish(ctx context.Context, r *round) error {
	if len(r.msgs) > 0 {
		if err := p.send(ctx, r.msgs); err != nil {
			return err
		}
	}
	return p.cfg.Hooks.AfterBrokerCommit.Run(ctx, r.sent)
}

// finish commits behind the fence, takes the round's handelingen out of the view and keeps
// those it could not mark for the next intake's recheck.
func (p *Publisher) finish(ctx context.Context, r *round) (published int, more bool, err error) {
	if err := p.commit(ctx, r); err != nil {
		return 0, false, err
	}
	// Those the round could not mark (no longer to be delivered, or locked by another
	// session) leave the view; the next intake takes back the ones still to be delivered,
	// before anything newer of their persons.
	p.work.recheck = unmarked(r.keep, r.marked)
	waiting := p.work.done(r.keep)
	if len(r.sent) > 0 {
		p.rounds.Add(1)
		p.m.published.Add(float64(len(r.marked)))
		p.m.republished.Add(float64(len(r.republished)))
		p.m.roundTime.Observe(time.Since(r.start).Seconds())
	}
	if h := p.cfg.Hooks.RoundCommitted; h != nil {
		h(r.sent)
	}
	p.log.Debug("round committed", slog.Int64("epoch", r.epoch), slog.Int("published", len(r.sent)),
		slog.Int("republished", len(r.republished)), slog.Int("taken_in", r.taken), slog.Int("candidates", len(r.candidates)),
		slog.Int("in_levering", r.inLevering+len(r.marked)), slog.Duration("duration", time.Since(r.start)),
		slog.Duration("plan", r.planned.Sub(r.start)), slog.Duration("mark", r.markedAt.Sub(r.planned)),
		slog.Duration("publish", r.publishedAt.Sub(r.markedAt)), slog.Duration("commit", time.Since(r.publishedAt)))
	// Another round at once when work is waiting that this one could not publish although it
	// had room: more to take in, or at least a window's worth in the view, whose persons'
	// handelingen in flight may be delivered by now. Waiting for the consumers' notifications
	// instead makes rounds fewer and larger, and the pipeline slower (docs/performance.md).
	return len(r.sent), len(r.keep) < r.budget && (r.intakeFull || waiting >= window(r.budget)), nil
}

// commit commits the round's transaction if the lease is still ours (elector.fence).
func (p *Publisher) commit(ctx context.Context, r *round) error {
	if err := p.lead.fence(ctx, r.q, r.epoch); err != nil {
		return err
	}
	if err := r.tx.Commit(); err != nil {
		return dbErr(fmt.Errorf("commit round: %w", err))
	}
	return nil
}
