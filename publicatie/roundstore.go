package publicatie

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// roundStore is everything a round reads and writes in the database, in the round's
// transaction. The planner (openWork, the view, the lead margin, the selection and grouping)
// decides on what it returns and never sees SQL; the round drives both.
//
// sqlStore is its one implementation for both layouts: they differ only in the statements'
// text (statementsFor), never in what the Go code does with the rows, so one type with each
// layout's statements is what "one implementation per layout" comes to here. The tests' fake
// (memStore, planner_test.go) lets the planner's tests run without PostgreSQL.
type roundStore interface {
	// start sets the round's statement timeout (the lease timeout: a frozen leader's session
	// ends) and takes its table locks.
	start(ctx context.Context, leaseTimeout time.Duration) error
	readHorizon(ctx context.Context) (time.Time, roundState, error)
	// readInLevering counts the handelingen in levering and reads those past timeout, at
	// most limit of them, with the rest of their groups.
	readInLevering(ctx context.Context, timeout time.Duration, limit int) (int, []Candidate, error)

	// The intake (openWork.takeIn).
	readRecords(ctx context.Context) (records, error)
	refuseOddTsreg(ctx context.Context, excluded []string) ([]int64, error)
	setLead(ctx context.Context, l leadWrite) error
	readIntake(ctx context.Context, excluded []string, horizon time.Time, stand place, limit, budget int, recorded []int64) ([]intakeRow, bool, error)
	readHolds(ctx context.Context) (*holds, error)
	readFoutChanges(ctx context.Context) ([]foutState, error)
	readChecksum(ctx context.Context, excluded []string, stand place) (checksum, error)
	readHoldsChecksum(ctx context.Context) (checksum, error)

	// Choosing and marking.
	readBlocked(ctx context.Context, strict bool) (map[int64]struct{}, error)
	touchStale(ctx context.Context, ids []int64) (map[int64]bool, error)
	markInLevering(ctx context.Context, ids []int64) (map[int64]bool, error)
	setBack(ctx context.Context, ids []int64) error

	// The service's own rows.
	setSleeping(ctx context.Context, sleeping bool) error
	writeHeldCounts(ctx context.Context, held, persons int) error
	heal(ctx context.Context) ([]int64, error)

	// changed says a statement of the round emptied a record table or wrote one of the
	// service's rows: a round that publishes nothing must commit it all the same (a rolled-back
	// round would leave the records for the next, which would count them again).
	changed() bool
}

// leadWrite is what learnLead sets in publicatie_state (lead.sql).
type leadWrite struct {
	margin, bound, hold, maxWait time.Duration
	sampleRate                   float64
	sampleLease                  time.Duration
}

// sqlStore is roundStore on the round's transaction q with a layout's statements.
type sqlStore struct {
	s     *statements
	q     querier
	dirty bool
}

func newSQLStore(s *statements, q querier) *sqlStore { return &sqlStore{s: s, q: q} }

func (st *sqlStore) changed() bool { return st.dirty }

func (st *sqlStore) start(ctx context.Context, leaseTimeout time.Duration) error {
	if _, err := st.q.ExecContext(ctx, st.s.roundTimeoutSQL, strconv.FormatInt(leaseTimeout.Milliseconds(), 10)); err != nil {
		return fmt.Errorf("round timeout: %w", err)
	}
	return st.s.lockRoundTables(ctx, st.q)
}

func (st *sqlStore) readHorizon(ctx context.Context) (time.Time, roundState, error) {
	return st.s.readHorizon(ctx, st.q)
}

func (st *sqlStore) readInLevering(ctx context.Context, timeout time.Duration, limit int) (int, []Candidate, error) {
	return st.s.readInLevering(ctx, st.q, timeout, limit)
}

func (st *sqlStore) readRecords(ctx context.Context) (records, error) {
	rec, err := st.s.readRecords(ctx, st.q)
	// Emptied a record table: a round that rolled back would leave its records for the next
	// one, which would count them again (three counts of one lead set a floor) or report a
	// late person twice.
	st.dirty = st.dirty || rec.herlees || len(rec.nakomer) > 0 || len(rec.samples) > 0 || len(rec.latePersons) > 0
	return rec, err
}

func (st *sqlStore) refuseOddTsreg(ctx context.Context, excluded []string) ([]int64, error) {
	ids, err := st.s.refuseOddTsreg(ctx, st.q, excluded)
	st.dirty = st.dirty || len(ids) > 0 // set them fout
	return ids, err
}

func (st *sqlStore) setLead(ctx context.Context, l leadWrite) error {
	if _, err := st.q.ExecContext(ctx, st.s.leadSQL, l.margin.Seconds(), l.bound.Seconds(), l.hold.Seconds(), l.maxWait.Seconds(),
		l.sampleRate, l.sampleLease.Seconds()); err != nil {
		return fmt.Errorf("lead margin: %w", err)
	}
	st.dirty = true
	return nil
}

func (st *sqlStore) readIntake(ctx context.Context, excluded []string, horizon time.Time, stand place, limit, budget int, recorded []int64) ([]intakeRow, bool, error) {
	return st.s.readIntake(ctx, st.q, excluded, horizon, stand, limit, budget, recorded)
}

func (st *sqlStore) readHolds(ctx context.Context) (*holds, error) { return st.s.readHolds(ctx, st.q) }

func (st *sqlStore) readFoutChanges(ctx context.Context) ([]foutState, error) {
	changes, err := st.s.readFoutChanges(ctx, st.q)
	st.dirty = st.dirty || len(changes) > 0 // emptied publicatie_fout_changes
	return changes, err
}

func (st *sqlStore) readChecksum(ctx context.Context, excluded []string, stand place) (checksum, error) {
	return st.s.readChecksum(ctx, st.q, excluded, stand)
}

func (st *sqlStore) readHoldsChecksum(ctx context.Context) (checksum, error) {
	return st.s.readHoldsChecksum(ctx, st.q)
}

func (st *sqlStore) readBlocked(ctx context.Context, strict bool) (map[int64]struct{}, error) {
	return st.s.readBlocked(ctx, st.q, strict)
}

func (st *sqlStore) touchStale(ctx context.Context, ids []int64) (map[int64]bool, error) {
	return st.s.touchStale(ctx, st.q, ids)
}

func (st *sqlStore) markInLevering(ctx context.Context, ids []int64) (map[int64]bool, error) {
	return st.s.markInLevering(ctx, st.q, ids)
}

func (st *sqlStore) setBack(ctx context.Context, ids []int64) error {
	return st.s.setBack(ctx, st.q, ids)
}

func (st *sqlStore) setSleeping(ctx context.Context, sleeping bool) error {
	if _, err := st.q.ExecContext(ctx, st.s.sleepingSQL, sleeping); err != nil {
		return fmt.Errorf("publicatie_state: %w", err)
	}
	st.dirty = true
	return nil
}

func (st *sqlStore) writeHeldCounts(ctx context.Context, held, persons int) error {
	if _, err := st.q.ExecContext(ctx, st.s.heldCountsSQL, held, persons); err != nil {
		return fmt.Errorf("publicatie_state held counts: %w", err)
	}
	st.dirty = true
	return nil
}

func (st *sqlStore) heal(ctx context.Context) ([]int64, error) {
	ids, err := st.s.heal(ctx, st.q)
	st.dirty = st.dirty || len(ids) > 0
	return ids, err
}
