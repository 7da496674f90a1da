package publicatie

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/lib/pq"

	"github.com/brp/levering/handeling"
)

// This file holds every statement the publisher runs on admhnd, admhnd_persoon and the
// service's own tables, except the lease's (handeling/lease.go, shared with status readers).
// The rules they share with the consumer and the operator pages (what is to be delivered, what
// blocks a person, the statuses, the accepted tsreg) are package handeling's.

// readHorizon returns the registration time before which no handeling can still appear, less
// the lead margin (lead.go): the start of the oldest open transaction that holds the horizon
// (the view publicatie_horizon, migration 0015), or now when none does, minus the lead by which
// bijhouding's tsreg may lie before its transaction's start. A transaction that commits between
// this read and the intake is either seen open here or visible there. It also returns the
// margin's row, for the round to learn from, what the horizon waits for (horizonWait), and
// the persons open transactions are linking handelingen to (openWriters, migration 0018).
//
// A transaction holds the horizon for LateWriterGrace whatever it does, and longer only while
// it has registered a handeling (it holds admhnd in row exclusive mode) and is younger than
// Config.MaxWait (or waits for a synchronous standby to confirm its commit). What it commits
// after that is late: migration 0015's trigger records it at its commit, and migration 0011's
// its first registration more than half a second after it began; the publisher takes such
// handelingen in behind its stand. So a report, a batch job or an idle session elsewhere in the
// database holds publication back for a second at most, and a long bijhouding transaction for
// MaxWait. The service's own sessions never hold it: those with its application_name
// (dbsession.AppName) whose role may execute publicatie_sessions(), which a bijhouding role
// may not, so naming itself so does not make a writer's transaction the service's.
//
// The view reads the sessions through publicatie_sessions() (migration 0016), which runs as
// its owner: the owner needs pg_read_all_stats (or superuser) to see other roles'
// transactions, the service's role does not (checkHorizonPrivilege).
func (s *statements) readHorizon(ctx context.Context, q querier) (h time.Time, st roundState, err error) {
	var margin, bound, held, maxWait, sampleRate, sampleLeft float64
	var holder sql.NullFloat64
	var writing pq.Int64Array
	var writers int
	var oldestWriter float64
	if err := q.QueryRowContext(ctx, s.horizonSQL).Scan(&h, &margin, &bound, &held, &maxWait, &st.lead.loweringUndated, &sampleRate, &sampleLeft,
		&st.sleeping, &st.older, &st.wait.seconds, &holder, &writing, &writers, &oldestWriter); err != nil {
		return h, st, fmt.Errorf("read horizon: %w", err)
	}
	st.writers = newOpenWriters(writing, writers, oldestWriter)
	st.lead.margin, st.lead.bound, st.lead.held, st.lead.maxWait = seconds(margin), seconds(bound), seconds(held), seconds(maxWait)
	st.lead.sampleRate, st.lead.sampleLeft = sampleRate, seconds(sampleLeft)
	st.wait.holder = holder.Float64
	return h, st, nil
}

// roundState is publicatie_state as a round read it with its horizon: the lead margin, whether
// registrations wake the publisher (sleeping), whether a transaction that may still register a
// handeling began before the round did (older: it may have read sleeping before the round's
// predecessor changed it), and what the horizon waits for.
type roundState struct {
	lead     leadRow
	sleeping bool
	older    bool
	wait     horizonWait
	writers  openWriters
}

// horizonWait is how far the horizon lies behind the database clock (seconds: the margin and
// the age of the oldest transaction that holds it) and that transaction's age (holder; 0 when
// none holds it).
type horizonWait struct {
	seconds, holder float64
}

// heal retries the fout handelingen whose cause is gone (heal.sql; Publisher.heal) as
// HealedBy, and returns them.
func (s *statements) heal(ctx context.Context, q querier) ([]int64, error) {
	return queryIDs(ctx, q, "heal fout", s.healSQL, handeling.FoutGeenPersonen, HealedBy, healNote)
}

// queryIDs runs a statement that returns one column of ids and returns them in its order;
// what names it in errors.
func queryIDs(ctx context.Context, q querier, what, query string, args ...any) ([]int64, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return ids, nil
}

// querier runs statements: a *sqlx.Tx runs them as they are, a prepared.Tx prepared.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// intakeRow is a (handeling, person) row of the intake, ordered by handeling.
type intakeRow struct {
	place
	persoon sql.NullInt64
	nakomer bool
}

// readIntake takes in, from one snapshot, up to limit handelingen after the stand and before
// horizon, oldest first, and of recorded (those readRecords emptied from publicatie_nakomer and
// those the previous round could not mark) the ones up to the new stand (the last of those):
// all to be delivered (statuslev NULL, soort not excluded), each with all of its persons. The
// recorded ones beyond the new stand come with a later intake in their turn (a load of
// handelingen with tsreg in the past must not come back to the publisher at once). The limit
// counts handelingen, so a multi-person handeling is never cut in half. In the result, ordered
// by (tsreg, id), nakomer marks the recorded ones.
//
// It also stops before the new handeling that would take the view's estimate (intakeCost)
// past budget bytes, except the first, which is always read: a handeling larger than the
// whole budget is taken in when it is next. cut says it stopped there; the rest of the rows
// are left unread (lib/pq still drains them from the connection).
func (s *statements) readIntake(ctx context.Context, q querier, excluded []string, horizon time.Time, stand place, limit, budget int, recorded []int64) (out []intakeRow, cut bool, err error) {
	query, args := s.intakeSQL, []any{horizon, tsregArg(stand), stand.ID, limit, pq.Array(recorded), pq.Array(excluded)}
	if s.layout.IsDefaultExcluded(excluded) {
		query, args = s.intakeDefaultSQL, args[:5]
	}
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, false, fmt.Errorf("read intake: %w", err)
	}
	defer rows.Close()
	// before is the cost of the handelingen read before the current one (last, from row
	// start on, persons so far).
	before, handelingen, start, last, persons := 0, 0, 0, int64(0), 0
	for rows.Next() {
		var r intakeRow
		if err := rows.Scan(&r.ID, &r.Tsreg, &r.persoon, &r.nakomer); err != nil {
			return nil, false, fmt.Errorf("read intake: %w", err)
		}
		if !r.nakomer {
			if handelingen == 0 || r.ID != last {
				if handelingen > 0 {
					before += intakeCost(persons)
				}
				handelingen, start, last, persons = handelingen+1, len(out), r.ID, 0
			}
			if r.persoon.Valid {
				persons++
			}
			if before+intakeCost(persons) > budget && handelingen > 1 {
				// Rows are ordered by place: everything kept lies before this handeling.
				return out[:start], true, nil
			}
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("read intake: %w", err)
	}
	return out, false, nil
}

// readBlocked returns the persons blocked now apart from those a fout holds (holds, kept by
// the view): of the handelingen in levering, of those recorded in publicatie_nakomer since
// the round emptied it (readRecords), and, under the strict policy, of those recorded in
// publicatie_fout_changes since the round read it (readFoutChanges).
//
// The records make separate statements (records, intake, fout changes, then this) as safe as
// one snapshot: an operator's retry (fout back to NULL) that commits after the records were
// read is no longer fout here and may not be taken in (behind the stand, the intake takes in
// only the recorded ones it was given), but its trigger's record is visible here and holds its
// persons back until the next round takes it in; a consumer's fout that commits after the
// round read the changes is no longer in levering here, but its record is.
func (s *statements) readBlocked(ctx context.Context, q querier, strict bool) (map[int64]struct{}, error) {
	blocked := map[int64]struct{}{}
	rows, err := q.QueryContext(ctx, s.blockedSQL, strict)
	if err != nil {
		return nil, fmt.Errorf("read blocked persons: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var p int64
		if err := rows.Scan(&p); err != nil {
			return nil, fmt.Errorf("read blocked persons: %w", err)
		}
		blocked[p] = struct{}{}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read blocked persons: %w", err)
	}
	return blocked, nil
}

// readHolds reads every unreleased fout handeling with its persons: what a new view's holds
// start from (the strict policy).
func (s *statements) readHolds(ctx context.Context, q querier) (*holds, error) {
	h := newHolds()
	states, err := readFoutStates(ctx, q, s.holdsSQL)
	if err != nil {
		return nil, fmt.Errorf("read fout handelingen: %w", err)
	}
	for _, s := range states {
		h.set(s)
	}
	return h, nil
}

// readFoutChanges empties publicatie_fout_changes (migration 0014) and returns the fout state
// of each handeling recorded there: whether it is an unreleased fout handeling now, with its
// persons. Records another transaction holds (recording again what it changes) are skipped,
// as publicatie_nakomer's are: they stay for a later round, and hold their persons back
// meanwhile (readBlocked).
func (s *statements) readFoutChanges(ctx context.Context, q querier) ([]foutState, error) {
	states, err := readFoutStates(ctx, q, s.foutChangesSQL)
	if err != nil {
		return nil, fmt.Errorf("read publicatie_fout_changes: %w", err)
	}
	return states, nil
}

// readFoutStates runs a query of (id, held, persoon_id) rows ordered by handeling.
func readFoutStates(ctx context.Context, q querier, query string) ([]foutState, error) {
	rows, err := q.QueryContext(ctx, query)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []foutState
	for rows.Next() {
		var id int64
		var held bool
		var persoon sql.NullInt64
		if err := rows.Scan(&id, &held, &persoon); err != nil {
			return nil, err
		}
		if len(out) == 0 || out[len(out)-1].id != id {
			out = append(out, foutState{id: id, held: held})
		}
		if persoon.Valid {
			last := &out[len(out)-1]
			last.personen = append(last.personen, persoon.Int64)
		}
	}
	return out, rows.Err()
}

// readHoldsChecksum counts the unreleased fout handelingen and xors their ids: what holds has
// when it and the database agree. Persons added to a fout handeling are recorded by migration
// 0014's trigger, so the sweep reads no persons: with them it reads every fout handeling's
// persons, too dear to do beside the rounds when many are held (docs/performance.md). It
// leaves out, and returns as pending, the handelingen recorded in publicatie_fout_changes from
// the same snapshot: changed since the round read the records, which holds has not seen yet.
func (s *statements) readHoldsChecksum(ctx context.Context, q querier) (sum checksum, err error) {
	var pending pq.Int64Array
	if err := q.QueryRowContext(ctx, s.holdsChecksumSQL).Scan(&sum.n, &sum.xor, &pending); err != nil {
		return sum, fmt.Errorf("read fout checksum: %w", err)
	}
	sum.pending = pending
	return sum, nil
}

// checksum is a count and xor of ids the sweep compares, and the handelingen left out of it:
// those recorded since the round read the records (pending), whose change the view has not
// seen yet.
type checksum struct {
	n       int
	xor     int64
	pending []int64
}

// records is what the round reads from the record tables before its intake (readRecords).
type records struct {
	// oldest is the oldest handeling recorded in publicatie_herlees (herlees false when it was
	// empty): registered late by a transaction that registered many (migrations 0011, 0015),
	// so the intake may have passed it.
	oldest  place
	herlees bool
	// nakomer are the handelingen recorded in publicatie_nakomer, emptied: the intake takes
	// them in (readIntake). late are the leads recorded with them (those within MaxLead),
	// samples the sampled leads of publicatie_lead_samples, each with its source: the margin is
	// learned from them (learnLead). Emptied in the statement that reads the leads, so the
	// round learns the lead of every record it takes in.
	nakomer       []int64
	late, samples []leadObs
	// latePersons are the handelingen of publicatie_laat_personen: persons bijhouding added to
	// them after they were delivered (migration 0011), which nothing can undo, so the leader
	// reports them. Records migration 0009 left in publicatie_ingehaald are reported the same
	// way: whatever became of their handeling, the consumer's order check decides it now.
	latePersons []int64
}

// readRecords empties publicatie_herlees, publicatie_nakomer, publicatie_lead_samples,
// publicatie_laat_personen and publicatie_ingehaald and returns what they held (records.sql).
func (s *statements) readRecords(ctx context.Context, q querier) (records, error) {
	var tsreg sql.NullTime
	var id sql.NullInt64
	var lateSecs, sampleSecs pq.Float64Array
	var lateFrom, sampleFrom pq.StringArray
	var nakomer, latePersons pq.Int64Array
	if err := q.QueryRowContext(ctx, s.recordsSQL).Scan(&tsreg, &id, &nakomer, &lateSecs, &lateFrom, &sampleSecs, &sampleFrom, &latePersons); err != nil {
		return records{}, fmt.Errorf("read the record tables: %w", err)
	}
	return records{oldest: place{Tsreg: tsreg.Time, ID: id.Int64}, herlees: id.Valid, nakomer: nakomer,
		late: leadObservations(lateSecs, lateFrom), samples: leadObservations(sampleSecs, sampleFrom), latePersons: latePersons}, nil
}

// leadObservations pairs leads in seconds with their sources (records.sql aggregates the two in
// one query level, so they correspond).
func leadObservations(secs []float64, sources []string) []leadObs {
	var out []leadObs
	for i, sec := range secs {
		o := leadObs{d: seconds(sec)}
		if i < len(sources) {
			o.source = sources[i]
		}
		out = append(out, o)
	}
	return out
}

// readChecksum counts the handelingen to be delivered up to the stand and xors their ids: what
// the view holds when it and the database agree. It leaves out, and returns as pending, those
// recorded in publicatie_nakomer or publicatie_fout_changes from the same snapshot.
func (s *statements) readChecksum(ctx context.Context, q querier, excluded []string, stand place) (sum checksum, err error) {
	query, args := s.checksumSQL, []any{tsregArg(stand), stand.ID, pq.Array(excluded)}
	if s.layout.IsDefaultExcluded(excluded) {
		query, args = s.checksumDefaultSQL, args[:2]
	}
	var pending pq.Int64Array
	if err := q.QueryRowContext(ctx, query, args...).Scan(&sum.n, &sum.xor, &pending); err != nil {
		return sum, fmt.Errorf("read view checksum: %w", err)
	}
	sum.pending = pending
	return sum, nil
}

// readInLevering returns how many handelingen are in levering and up to limit of them that
// have been in levering for longer than timeout (their message was lost or dead-lettered, so
// they are published again), with every handeling in levering that shares a person with them,
// directly or through others: the rest of their groups, so that a group is never published
// again in parts (components).
func (s *statements) readInLevering(ctx context.Context, q querier, timeout time.Duration, limit int) (n int, stale []Candidate, err error) {
	rows, err := q.QueryContext(ctx, s.inLeveringSQL, timeout.Seconds(), limit)
	if err != nil {
		return 0, nil, fmt.Errorf("read in_levering: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, persoon sql.NullInt64
		if err := rows.Scan(&n, &id, &persoon); err != nil {
			return 0, nil, fmt.Errorf("read in_levering: %w", err)
		}
		if id.Valid {
			stale = addRow(stale, id.Int64, persoon)
		}
	}
	if err := rows.Err(); err != nil {
		return 0, nil, fmt.Errorf("read in_levering: %w", err)
	}
	return n, stale, nil
}

// addRow adds one (handeling, person) row of a query ordered by handeling.
func addRow(cs []Candidate, id int64, persoon sql.NullInt64) []Candidate {
	if len(cs) == 0 || cs[len(cs)-1].ID != id {
		cs = append(cs, Candidate{ID: id})
	}
	if persoon.Valid {
		last := &cs[len(cs)-1]
		last.Personen = append(last.Personen, persoon.Int64)
	}
	return cs
}

// touchStale records that the given in_levering handelingen are published again now and
// returns those still in levering. A row another session has locked is left alone: a
// consumer is delivering it right now, or is frozen holding it until the database ends its
// session; either way a later round looks again, and the round never waits for a consumer.
func (s *statements) touchStale(ctx context.Context, q querier, ids []int64) (map[int64]bool, error) {
	return returningIDs(ctx, q, s.touchStaleSQL, ids)
}

// markInLevering sets the given handelingen in_levering where they are still NULL and returns
// the ids it changed. A handeling a consumer already finished (a copy from a round whose
// database commit failed) is not touched and must not be sent again. One that another session
// has locked (a consumer delivering such a copy, an operator) is skipped, not waited for: it
// stays NULL or becomes geleverd, and in both states it holds back its persons' later
// handelingen, which Select has already held back in this round (docs/robustness.md).
func (s *statements) markInLevering(ctx context.Context, q querier, ids []int64) (map[int64]bool, error) {
	return returningIDs(ctx, q, s.markSQL, ids)
}

// setBack sets handelingen this round marked in_levering back to be delivered: members of a
// group after one that could not be marked. The update fires admhnd_teruggezet (migration
// 0007), which records them in publicatie_nakomer for the next round.
func (s *statements) setBack(ctx context.Context, q querier, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	if _, err := q.ExecContext(ctx, s.setBackSQL, pq.Array(ids)); err != nil {
		return fmt.Errorf("set back: %w", err)
	}
	return nil
}

func returningIDs(ctx context.Context, q querier, query string, ids []int64) (map[int64]bool, error) {
	if len(ids) == 0 {
		return map[int64]bool{}, nil
	}
	rows, err := q.QueryContext(ctx, query, pq.Array(ids))
	if err != nil {
		return nil, fmt.Errorf("update statuses: %w", err)
	}
	defer rows.Close()
	marked := make(map[int64]bool, len(ids))
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("update statuses: %w", err)
		}
		marked[id] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("update statuses: %w", err)
	}
	return marked, nil
}

// refuseOddTsreg sets fout, with handeling.FoutTsreg, the handelingen still to be delivered
// whose tsreg lies outside the accepted range, and returns their ids: they can be neither
// ordered nor encoded, and the intake leaves them out. Two probes of the index of open work,
// at its two ends ('-infinity' sorts first, 'infinity' last).
func (s *statements) refuseOddTsreg(ctx context.Context, q querier, excluded []string) ([]int64, error) {
	return queryIDs(ctx, q, "refuse odd tsreg", s.refuseOddTsregSQL, handeling.FoutTsreg, pq.Array(excluded))
}
