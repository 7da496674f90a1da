package levering

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/lib/pq"

	"github.com/brp/levering/broker"
	"github.com/brp/levering/handeling"
	"github.com/brp/levering/internal/prepared"
)

// errBroker marks a failure of the broker connection (as opposed to the database).
var errBroker = errors.New("broker")

// errNewerInFlight says another consumer holds a newer handeling of a person of the batch in
// its transaction right now (holdNewer): the batch is tried again when that one has ended.
var errNewerInFlight = errors.New("a newer handeling of a person of the batch is being delivered by another consumer")

// Verzending is the body of a message on the verzending queue (docs/contract.md section 3).
type Verzending struct {
	ID       int64     `json:"id"`
	Soort    string    `json:"soort"`
	Tsreg    time.Time `json:"tsreg"`
	Tslev    time.Time `json:"tslev"`
	Personen []int64   `json:"personen"`
}

// deliver runs the consumer's database transaction for a batch of distinct ids, sorted (the
// order in which their rows are locked): the table locks, the row locks, the check and the
// decision (decideLocked), the writes (apply), then the delivered ones to the verzending queue
// in delivery order (tsreg, id) in one broker transaction confirmed by a receipt, and only then
// commit. carried are the persons each publication of the batch named for each id.
func (e *executor) deliver(ctx context.Context, ids []int64, carried map[int64][][]int64) (map[int64]result, error) {
	// An error preparing is the database being away, which BeginTxx reports.
	e.b.at(stepLock)
	_ = e.stmts.Prepare(ctx, e.sql.batchSQL()...)
	tx, err := e.db.BeginTxx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit

	q := e.stmts.In(tx.Tx)
	rows, res, err := e.decideLocked(ctx, q, ids, carried)
	if err != nil {
		return nil, err
	}
	if err := e.markOnderweg(ctx, res); err != nil {
		return nil, err
	}
	found, err := e.sql.apply(ctx, q, res, rows)
	if err != nil {
		return nil, err
	}
	sent, err := e.sendVerzendingen(ctx, ids, found)
	if err != nil {
		return nil, err
	}
	e.b.at(stepCommit)
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	e.logOutcomes(res, ids, sent)
	e.m.observeDelays(found, sent)
	return res, nil
}

// decideLocked takes the batch's table and row locks, checks the batch and decides on it. It
// fails with errNewerInFlight when another consumer is delivering a newer handeling of a
// person of a handeling in levering of the batch.
func (e *executor) decideLocked(ctx context.Context, q prepared.Tx, ids []int64, carried map[int64][][]int64) ([]row, map[int64]result, error) {
	if _, err := q.ExecContext(ctx, e.sql.batchLocksSQL); err != nil {
		return nil, nil, fmt.Errorf("lock tables: %w", err)
	}
	if _, err := q.ExecContext(ctx, e.sql.lockSQL, pq.Array(ids)); err != nil {
		return nil, nil, fmt.Errorf("lock: %w", err)
	}
	rows, err := e.sql.check(ctx, q, ids, e.excluded, e.strict)
	if err != nil {
		return nil, nil, err
	}
	newer, err := e.sql.holdNewer(ctx, q, rows)
	if err != nil {
		return nil, nil, err
	}
	for _, r := range rows {
		if r.status == handeling.InLevering && slices.ContainsFunc(r.newerInLevering, func(id int64) bool { _, ok := newer[id]; return !ok }) {
			return nil, nil, fmt.Errorf("handeling %d: %w", r.id, errNewerInFlight)
		}
	}
	return rows, decide(rows, carried, newer, e.excluded, e.strict), nil
}

// holdNewer locks the newer handelingen in levering that check found outside the batch (a
// publisher never has a person's handelingen in levering in two publications at once: this is
// a forged or misrouted publication, or persons bijhouding added late) and returns the status
// of those it locked, as of now (holdNewerSQL). One it could not lock another consumer is
// delivering right now, and may not have seen this batch's older handeling (persons committed
// meanwhile): the batch is tried again once that consumer is done (errNewerInFlight), which
// then holds its newer one back or has delivered it. One it locked no consumer can deliver
// until this transaction ends, and then they see this batch's handeling delivered before
// theirs. One that is geleverd by now overtook it.
func (s *statements) holdNewer(ctx context.Context, q prepared.Tx, rows []row) (map[int64]handeling.Status, error) {
	var ids []int64
	for _, r := range rows {
		ids = append(ids, r.newerInLevering...)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	slices.Sort(ids)
	rs, err := q.QueryContext(ctx, s.holdNewerSQL, pq.Array(slices.Compact(ids)))
	if err != nil {
		return nil, fmt.Errorf("lock newer: %w", err)
	}
	defer rs.Close()
	got := map[int64]handeling.Status{}
	for rs.Next() {
		var id int64
		var s handeling.Status
		if err := rs.Scan(&id, &s); err != nil {
			return nil, fmt.Errorf("lock newer: %w", err)
		}
		got[id] = s
	}
	return got, rs.Err()
}

// markOnderweg records, committed on a connection of its own, the handelingen this batch is
// about to send (markOnderwegSQL). One statement a batch that delivers anything; none on a
// batch that does not.
func (e *executor) markOnderweg(ctx context.Context, res map[int64]result) error {
	var ids []int64
	for id, r := range res {
		if r.outcome == delivered {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	slices.Sort(ids)
	if _, err := e.db.ExecContext(ctx, e.sql.markOnderwegSQL, pq.Array(ids)); err != nil {
		return fmt.Errorf("record verzendingen onderweg: %w", err)
	}
	return nil
}

// writes are applySQL's arguments.
type writes struct {
	geleverd, fout, back, blockers, gone []int64
	reasons                              []string // of fout, in its order
}

// writesOf says what applySQL writes for res: geleverd, fout with its reason, set back (held
// back but for one not in levering), the blockers still to be delivered to record, and the
// onderweg records done with (geleverd by now).
func writesOf(res map[int64]result, rows []row) writes {
	var w writes
	for _, r := range rows {
		if r.onderweg && res[r.id].outcome == duplicate {
			w.gone = append(w.gone, r.id)
		}
	}
	for id, r := range res {
		switch r.outcome {
		case delivered:
			w.geleverd = append(w.geleverd, id)
		case markedFout:
			w.fout, w.reasons = append(w.fout, id), append(w.reasons, r.reason)
		case heldBack:
			if r.reason != reasonNotInLevering {
				w.back = append(w.back, id)
			}
		}
	}
	for _, r := range rows {
		if res[r.id].outcome == heldBack && r.blockerNull && !slices.Contains(w.blockers, r.blocker) {
			w.blockers = append(w.blockers, r.blocker)
		}
	}
	return w
}

// apply runs applySQL for res and returns the delivered handelingen's verzendingen.
func (s *statements) apply(ctx context.Context, q prepared.Tx, res map[int64]result, rows []row) (map[int64]*Verzending, error) {
	w := writesOf(res, rows)
	if len(w.geleverd)+len(w.fout)+len(w.back)+len(w.gone) == 0 {
		return nil, nil
	}
	rs, err := q.QueryContext(ctx, s.applySQL, pq.Array(w.geleverd), pq.Array(w.fout), pq.Array(w.reasons), pq.Array(w.back),
		pq.Array(w.blockers), pq.Array(w.gone))
	if err != nil {
		return nil, fmt.Errorf("deliver: %w", err)
	}
	defer rs.Close()
	byID := make(map[int64]row, len(rows))
	for _, r := range rows {
		byID[r.id] = r
	}
	found := make(map[int64]*Verzending, len(w.geleverd))
	for rs.Next() {
		var id int64
		var tslev time.Time
		if err := rs.Scan(&id, &tslev); err != nil {
			return nil, fmt.Errorf("deliver: %w", err)
		}
		r := byID[id]
		found[id] = &Verzending{ID: id, Soort: r.soort, Tsreg: r.tsreg.Time, Tslev: tslev, Personen: r.personen}
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("deliver: %w", err)
	}
	if len(found) != len(w.geleverd) {
		// The rows are locked and were read in levering: nothing else can have changed them.
		return nil, fmt.Errorf("deliver: %d of %d handelingen set geleverd", len(found), len(w.geleverd))
	}
	return found, nil
}

// sendVerzendingen runs the AfterLock hook, sends the verzendingen of found in one broker
// transaction and runs the AfterVerzending hook, and returns the ids sent, in delivery order.
func (e *executor) sendVerzendingen(ctx context.Context, ids []int64, found map[int64]*Verzending) ([]int64, error) {
	if err := e.hooks.AfterLock.Run(ctx, ids); err != nil {
		return nil, fmt.Errorf("%w: %w", errBroker, err)
	}
	msgs, sent, err := verzendingen(found, e.verzendingQueue)
	if err != nil {
		return nil, err
	}
	e.b.at(stepVerzending)
	if err := e.send.Send(ctx, msgs...); err != nil {
		return nil, fmt.Errorf("%w: verzending: %w", errBroker, err)
	}
	if len(sent) > 0 {
		if err := e.hooks.AfterVerzending.Run(ctx, sent); err != nil {
			return nil, fmt.Errorf("%w: %w", errBroker, err)
		}
	}
	return sent, nil
}

// verzendingen returns the verzending messages of the delivered handelingen, in delivery order
// (tsreg, id): each person's in order.
func verzendingen(found map[int64]*Verzending, queue string) ([]broker.Message, []int64, error) {
	sent := make([]int64, 0, len(found))
	for id := range found {
		sent = append(sent, id)
	}
	slices.SortFunc(sent, func(a, b int64) int {
		if c := found[a].Tsreg.Compare(found[b].Tsreg); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	msgs := make([]broker.Message, 0, len(sent))
	for _, id := range sent {
		// encoding/json's output is always text (broker.IsText: it escapes control characters
		// and replaces bytes that are not UTF-8), so Send never refuses a verzending with
		// broker.ErrNotText (TestVerzendingIsText).
		body, err := json.Marshal(found[id])
		if err != nil {
			return nil, nil, fmt.Errorf("encode verzending %d: %w", id, err)
		}
		msgs = append(msgs, broker.Message{Destination: queue, Header: handeling.IDHeaders(id), Body: body})
	}
	return msgs, sent, nil
}

// logOutcomes logs a committed batch's deliveries, fouts and held-back handelingen, by admhnd
// id only: persoon ids are personal data.
func (e *executor) logOutcomes(res map[int64]result, ids, sent []int64) {
	for _, id := range sent {
		e.log.Debug("handeling geleverd", slog.Int64("admhnd_id", id))
	}
	for _, id := range ids {
		switch r := res[id]; {
		case r.outcome == markedFout:
			e.log.Warn("handeling fout", slog.Int64("admhnd_id", id), slog.String("reason", r.reason))
		case r.outcome == heldBack && r.reason == reasonNotInLevering:
			e.log.Info("publication of a handeling that is not in levering left to the publisher", slog.Int64("admhnd_id", id))
		case r.outcome == heldBack:
			attrs := []any{slog.Int64("admhnd_id", id), slog.String("reason", r.reason)}
			if r.blocker != 0 {
				attrs = append(attrs, slog.Int64("waits_for_admhnd_id", r.blocker))
			}
			e.log.Info("handeling held back: set back to be delivered", attrs...)
		}
	}
}
