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

// work is what a batch's readable publications ask for.
type work struct {
	ids     []int64                      // the handelingen, sorted, distinct
	byID    map[int64][]*broker.Delivery // the publications that named each
	carried map[int64][][]int64          // the persons each publication named for each
}

// read parses a batch's publications and sets aside those it cannot read. It fails only when
// setting one aside failed.
func (e *executor) read(ctx context.Context, msgs []*broker.Delivery) (work, error) {
	w := work{byID: map[int64][]*broker.Delivery{}, carried: map[int64][][]int64{}}
	for _, m := range msgs {
		members, err := parse(m)
		if err != nil {
			e.b.at(stepSetAside)
			if err := e.park(ctx, m, err.Error()); err != nil {
				return work{}, err
			}
			continue
		}
		for _, mb := range members {
			if len(w.byID[mb.ID]) == 0 {
				w.ids = append(w.ids, mb.ID)
			}
			if !slices.Contains(w.byID[mb.ID], m) {
				w.byID[mb.ID] = append(w.byID[mb.ID], m)
			}
			w.carried[mb.ID] = append(w.carried[mb.ID], mb.Personen)
		}
	}
	slices.Sort(w.ids)
	return w, nil
}

// handle processes a batch until it is done, retrying transient database failures in place
// (the publications stay held, unacknowledged). Unreadable publications and unknown ids are
// set aside. It returns an error only when the broker connection is unusable or ctx ended
// before the work was done; the batch then goes back to the queue.
func (e *executor) handle(ctx context.Context, msgs []*broker.Delivery) error {
	w, err := e.read(ctx, msgs)
	if err != nil || len(w.ids) == 0 {
		return err
	}
	e.b.setIDs(w.ids)
	retry := backoff.New(100*time.Millisecond, 5*time.Second)
	other := backoff.New(5*time.Millisecond, time.Second)
	var s retrying
	for {
		res, err := e.deliver(ctx, w.ids, w.carried)
		switch {
		case errors.Is(err, errNewerInFlight) && ctx.Err() == nil:
			// Another consumer is delivering a newer handeling of one of these persons (a
			// publication no publisher sends): it ends in milliseconds. Then this batch sees
			// it held back, or delivered (and this one overtaken).
			if !s.waited {
				e.log.Info("waiting for another consumer delivering a newer handeling of a person of this batch", slog.Any("error", err))
				s.waited = true
			}
			if err := other.Wait(ctx); err != nil {
				return err
			}
			continue
		case err == nil:
			s.done(e.log, w.ids)
			return e.record(ctx, res, w.byID)
		case errors.Is(err, errBroker), ctx.Err() != nil:
			return err
		case dbsession.IsDeadlock(err):
			// The database broke a cycle of lock waits (DDL beside: batch_locks.sql) by ending
			// this batch's transaction: no outage, run it again at once.
			e.log.Warn("batch ended by a deadlock with another session's locks; running it again",
				slog.Any("error", err), slog.String("detail", dbsession.DeadlockDetail(err)))
			continue
		}
		e.failed(ctx, &s, err, w.ids)
		e.b.at(stepRetry)
		if err := retry.Wait(ctx); err != nil {
			return err
		}
	}
}

// retrying is what a batch's retries have logged so far: each kind of wait is logged once.
type retrying struct {
	failing, locked, waited bool
}

// done logs the end of the waits a batch that got through logged.
func (s retrying) done(log *slog.Logger, ids []int64) {
	if s.failing {
		log.Info("database available again")
	}
	if s.locked {
		log.Info("row locks obtained", slog.Any("admhnd_ids", ids))
	}
}

// failed logs, once, a batch's transaction failing for the database, and counts an outage.
func (e *executor) failed(ctx context.Context, s *retrying, err error, ids []int64) {
	switch {
	case dbsession.IsLockTimeout(err):
		// Another session holds some of these rows: a consumer with a copy of the same
		// publications, or one that froze inside its transaction until the database ends its
		// session (idle_in_transaction_session_timeout). Wait, naming it once.
		if !s.locked {
			e.log.Warn("rows locked by another session; retrying", slog.Any("admhnd_ids", ids),
				slog.Any("lock_holders", dbsession.Describe(ctx, e.db, "admhnd")))
			s.locked = true
		}
	case !s.failing:
		e.log.Warn("database unavailable, retrying", slog.Any("error", err), slog.Any("admhnd_ids", ids))
		e.m.reconnects.WithLabelValues("database").Inc()
		s.failing = true
	}
}

// record counts a committed batch's outcomes, sets unknown ids aside and runs AfterCommit. A
// publication of several handelingen is set aside once, for the first of them that is unknown
// or excluded; the others it carries are delivered all the same.
func (e *executor) record(ctx context.Context, res map[int64]result, byID map[int64][]*broker.Delivery) error {
	var ids []int64
	setAside := map[*broker.Delivery]bool{}
	for id, r := range res {
		ids = append(ids, id)
		copies := int64(len(byID[id]))
		switch r.outcome {
		case delivered:
			e.m.delivered.Add(1)
			e.m.duplicates.Add(copies - 1)
		case markedFout:
			e.m.fout.Add(1)
			e.m.duplicates.Add(copies - 1)
		case heldBack:
			e.m.heldBack.Add(1)
			e.m.heldBackBy.WithLabelValues(r.reason).Inc()
		case duplicate:
			e.m.duplicates.Add(copies)
			e.log.Debug("already delivered; publication absorbed", slog.Int64("admhnd_id", id),
				slog.String("message_id", byID[id][0].MessageID))
		case unknown, excluded:
			reason := fmt.Sprintf("handeling %d does not exist", id)
			if r.outcome == excluded {
				reason = fmt.Sprintf("handeling %d is of a soort excluded from delivery", id)
			}
			e.b.at(stepSetAside)
			for _, m := range byID[id] {
				if setAside[m] {
					continue
				}
				setAside[m] = true
				if err := e.park(ctx, m, reason); err != nil {
					return err
				}
			}
		}
	}
	return e.hooks.AfterCommit.Run(ctx, ids)
}

// park sets a publication that can never be processed aside on the dead-letter queue, with
// the reason, so that it is acknowledged instead of crash-looping. Its body goes as it came:
// as bytes when it is not text.
func (e *executor) park(ctx context.Context, m *broker.Delivery, reason string) error {
	id := m.Header(handeling.IDHeader)
	e.log.Error("publication set aside", slog.Int64("admhnd_id", handeling.ParseID(id)), slog.String("message_id", m.MessageID),
		slog.String("reason", reason), slog.String("dead_letter_queue", e.deadLetterQueue))
	err := e.send.Send(ctx, broker.Message{
		Destination: e.deadLetterQueue,
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
	e.m.parked.Add(1)
	return nil
}
