package levering

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/brp/levering/broker"
	"github.com/brp/levering/handeling"
	"github.com/brp/levering/internal/backoff"
	"github.com/brp/levering/internal/dbsession"
)

// errBadInput marks a publication that can never be processed; it is set aside.
var errBadInput = errors.New("bad publication")

func parse(m *broker.Delivery) ([]handeling.Member, error) {
	if !broker.IsText(m.Body) {
		// Publications are text (docs/contract.md section 3); encoding/json would read a string
		// with bytes that are not UTF-8 as if they were replacement characters.
		return nil, fmt.Errorf("%w: body is not text (UTF-8 without NUL)", errBadInput)
	}
	p, err := handeling.DecodePublication(m.Body)
	if errors.Is(err, handeling.ErrNoID) {
		return nil, fmt.Errorf("%w: body has no id", errBadInput)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: body is not a publication: %s", errBadInput, jsonProblem(err))
	}
	if h := m.Header(handeling.IDHeader); h != "" && h != strconv.FormatInt(p.ID, 10) {
		return nil, fmt.Errorf("%w: %s header %q differs from body id %d", errBadInput, handeling.IDHeader, h, p.ID)
	}
	members := p.Members()
	if len(members) > maxGroup {
		return nil, fmt.Errorf("%w: %d handelingen in one publication, more than %d", errBadInput, len(members), maxGroup)
	}
	return members, nil
}

// maxGroup bounds the handelingen of one publication a consumer accepts: the publisher's
// GroupSize allows at most 10,000.
const maxGroup = 10_000

// jsonProblem says what is wrong with a body without quoting it: encoding/json's errors quote
// a misfit number, which in "personen" would be a persoon id in the log and the brp-reason.
func jsonProblem(err error) string {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		return fmt.Sprintf("field %s is not %s", te.Field, te.Type)
	case errors.As(err, &se):
		return fmt.Sprintf("not JSON (offset %d)", se.Offset)
	}
	return "not a JSON object"
}

// handle processes a batch until it is done, retrying transient database failures in place
// (the publications stay held, unacknowledged). Unreadable publications and unknown ids are
// set aside. It returns an error only when the broker connection is unusable or ctx ended
// before the work was done; the batch then goes back to the queue.
func (w *worker) handle(ctx context.Context, msgs []*broker.Delivery) error {
	byID := map[int64][]*broker.Delivery{}
	var ids []int64
	carried := map[int64][][]int64{} // the persons each publication named for a handeling
	for _, m := range msgs {
		members, err := parse(m)
		if err != nil {
			w.b.at(stepSetAside)
			if err := w.park(ctx, m, err.Error()); err != nil {
				return err
			}
			continue
		}
		for _, mb := range members {
			if len(byID[mb.ID]) == 0 {
				ids = append(ids, mb.ID)
			}
			if !slices.Contains(byID[mb.ID], m) {
				byID[mb.ID] = append(byID[mb.ID], m)
			}
			carried[mb.ID] = append(carried[mb.ID], mb.Personen)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	slices.Sort(ids)
	w.b.setIDs(ids)
	retry := backoff.New(100*time.Millisecond, 5*time.Second)
	other := backoff.New(5*time.Millisecond, time.Second)
	failing, locked, waited := false, false, false
	for {
		res, err := w.deliver(ctx, ids, carried)
		if errors.Is(err, errNewerInFlight) && ctx.Err() == nil {
			// Another consumer is delivering a newer handeling of one of these persons (a
			// publication no publisher sends): it ends in milliseconds. Then this batch sees
			// it held back, or delivered (and this one overtaken).
			if !waited {
				w.log.Info("waiting for another consumer delivering a newer handeling of a person of this batch", slog.Any("error", err))
				waited = true
			}
			if err := other.Wait(ctx); err != nil {
				return err
			}
			continue
		}
		switch {
		case err == nil:
			if failing {
				w.log.Info("database available again")
			}
			if locked {
				w.log.Info("row locks obtained", slog.Any("admhnd_ids", ids))
			}
			return w.record(ctx, res, byID)
		case errors.Is(err, errBroker), ctx.Err() != nil:
			return err
		case dbsession.IsDeadlock(err):
			// The database broke a cycle of lock waits (DDL beside: locks.go) by ending this
			// batch's transaction: no outage, run it again at once.
			w.log.Warn("batch ended by a deadlock with another session's locks; running it again",
				slog.Any("error", err), slog.String("detail", dbsession.DeadlockDetail(err)))
			continue
		case dbsession.IsLockTimeout(err):
			// Another session holds some of these rows: a consumer with a copy of the same
			// publications, or one that froze inside its transaction until the database ends
			// its session (idle_in_transaction_session_timeout). Wait, naming it once.
			if !locked {
				w.log.Warn("rows locked by another session; retrying", slog.Any("admhnd_ids", ids),
					slog.Any("lock_holders", dbsession.Describe(ctx, w.db, "admhnd")))
				locked = true
			}
		case !failing:
			w.log.Warn("database unavailable, retrying", slog.Any("error", err), slog.Any("admhnd_ids", ids))
			w.reconnects.WithLabelValues("database").Inc()
			failing = true
		}
		w.b.at(stepRetry)
		if err := retry.Wait(ctx); err != nil {
			return err
		}
	}
}

// record counts a committed batch's outcomes, sets unknown ids aside and runs AfterCommit. A
// publication of several handelingen is set aside once, for the first of them that is unknown
// or excluded; the others it carries are delivered all the same.
func (w *worker) record(ctx context.Context, res map[int64]result, byID map[int64][]*broker.Delivery) error {
	var ids []int64
	setAside := map[*broker.Delivery]bool{}
	for id, r := range res {
		o := r.outcome
		ids = append(ids, id)
		copies := int64(len(byID[id]))
		switch o {
		case delivered:
			w.delivered.Add(1)
			w.duplicates.Add(copies - 1)
		case markedFout:
			w.fout.Add(1)
			w.duplicates.Add(copies - 1)
		case heldBack:
			w.heldBack.Add(1)
			w.heldBackBy.WithLabelValues(r.reason).Inc()
		case duplicate:
			w.duplicates.Add(copies)
			w.log.Debug("already delivered; publication absorbed", slog.Int64("admhnd_id", id),
				slog.String("message_id", byID[id][0].MessageID))
		case unknown, excluded:
			reason := fmt.Sprintf("handeling %d does not exist", id)
			if o == excluded {
				reason = fmt.Sprintf("handeling %d is of a soort excluded from delivery", id)
			}
			w.b.at(stepSetAside)
			for _, m := range byID[id] {
				if setAside[m] {
					continue
				}
				setAside[m] = true
				if err := w.park(ctx, m, reason); err != nil {
					return err
				}
			}
		}
	}
	return w.cfg.Hooks.AfterCommit.Run(ctx, ids)
}

// park sets a publication that can never be processed aside on the dead-letter queue, with
// the reason, so that it is acknowledged instead of crash-looping. Its body goes as it came:
// as bytes when it is not text.
func (w *worker) park(ctx context.Context, m *broker.Delivery, reason string) error {
	id := m.Header(handeling.IDHeader)
	w.log.Error("publication set aside", slog.Int64("admhnd_id", handeling.ParseID(id)), slog.String("message_id", m.MessageID),
		slog.String("reason", reason), slog.String("dead_letter_queue", w.cfg.DeadLetterQueue))
	err := w.send.Send(ctx, broker.Message{
		Destination: w.cfg.DeadLetterQueue,
		Body:        m.Body,
		Binary:      !broker.IsText(m.Body),
		Header: map[string]string{
			"brp-reason":              reason,
			"brp-original-message-id": m.MessageID,
			handeling.IDHeader:        id, // as it came, whatever it holds
		},
	})
	if err != nil {
		return fmt.Errorf("%w: %w", errBroker, err)
	}
	w.parked.Add(1)
	return nil
}
