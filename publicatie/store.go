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
// margin's row, for the round to learn from, and what the horizon waits for (horizonWait).
//
// A transaction holds the horizon for LateWriterGrace whatever it does, and longer only while
// it has registered a handeling (it holds admhnd in row exclusive mode) and is younger than
// Config.MaxWait (or waits for a synchronous standby to confirm its commit). What it commits
// after that is late: migration 0015's trigger records it at its commit, and migration 0011's
// its first registration more than half a second after it began; the publisher takes such
// handelingen in behind its stand. So a report, a batch job or an idle session elsewhere in the
// database holds publication back for a second at most, and a long bijhouding transaction for
// MaxWait. The service's own sessions (dbsession.ServiceSessionSQL) never hold it.
//
// Other roles' transactions are visible in pg_stat_activity only to members of
// pg_read_all_stats (or superusers): see checkHorizonPrivilege.
func readHorizon(ctx context.Context, q querier) (h time.Time, st toestand, err error) {
	var marge, grens, held, maxWait, sampleRate, sampleLeft float64
	var holder sql.NullFloat64
	if err := q.QueryRowContext(ctx, horizonSQL).Scan(&h, &marge, &grens, &held, &maxWait, &st.lead.hoogPending, &sampleRate, &sampleLeft,
		&st.slaapt, &st.older, &st.wait.seconds, &holder); err != nil {
		return h, st, fmt.Errorf("read horizon: %w", err)
	}
	st.lead.marge, st.lead.grens, st.lead.held, st.lead.maxWait = seconds(marge), seconds(grens), seconds(held), seconds(maxWait)
	st.lead.sampleRate, st.lead.sampleLeft = sampleRate, seconds(sampleLeft)
	st.wait.holder = holder.Float64
	return h, st, nil
}

// toestand is publicatie_toestand as a round read it with its horizon: the lead margin, whether
// registrations wake the publisher (slaapt), whether a transaction that may still register a
// handeling began before the round did (older: it may have read slaapt before the round's
// predecessor changed it), and what the horizon waits for.
type toestand struct {
	lead   leadRow
	slaapt bool
	older  bool
	wait   horizonWait
}

// horizonWait is how far the horizon lies behind the database clock (seconds: the margin and
// the age of the oldest transaction that holds it) and that transaction's age (holder; 0 when
// none holds it).
type horizonWait struct {
	seconds, holder float64
}

// LateWriterGrace is how long any transaction holds back the horizon, whether it registers or
// not (publicatie_horizon, migration 0015, writes it in): migration 0011 calls a transaction
// whose first registration comes more than half of it after its start a late writer, and
// migration 0015 records what a transaction commits more than half of it after its start. The
// other half covers the time between a round's clock reading and its look at
// pg_stat_activity, and a commit's becoming visible.
const LateWriterGrace = time.Second

// horizonSQL computes the horizon and reads publicatie_toestand: a transaction begun before
// hoog_tot (a lowering of the margin committed after it began) may have compared its leads with
// the higher margin (hoog), which holds it back. hoog_tot 'infinity' says a lowering committed
// that no round has dated yet: every transaction is held back by hoog until the round sets it.
const horizonSQL = `
		select least(clock_timestamp(), o.start) - case when o.start < v.hoog_tot then greatest(v.marge, v.hoog) else v.marge end,
			extract(epoch from v.marge)::float8, extract(epoch from v.grens)::float8,
			extract(epoch from case when o.start < v.hoog_tot then greatest(v.marge, v.hoog) else v.marge end)::float8,
			extract(epoch from v.max_wait)::float8, v.hoog_tot = 'infinity', v.lead_sample_rate,
			greatest(extract(epoch from v.lead_sample_until) - extract(epoch from clock_timestamp()), 0)::float8,
			v.slaapt, coalesce(o.start < now(), false),
			extract(epoch from clock_timestamp() - least(clock_timestamp(), o.start)
				+ case when o.start < v.hoog_tot then greatest(v.marge, v.hoog) else v.marge end)::float8,
			extract(epoch from clock_timestamp() - o.start)::float8
		from (
			select min(xact_start) as start from publicatie_horizon where holds
		) o cross join (
			select coalesce(max(marge), '0') as marge, coalesce(max(grens), '0') as grens,
				coalesce(max(hoog), '0') as hoog, coalesce(max(hoog_tot), '-infinity') as hoog_tot,
				coalesce(max(max_wait), '2 s') as max_wait, coalesce(max(lead_sample_rate), 0) as lead_sample_rate,
				coalesce(max(lead_sample_until), '-infinity') as lead_sample_until,
				coalesce(bool_or(slaapt), true) as slaapt
			from publicatie_toestand
		) v`

// readLatePersons empties publicatie_laat_personen and returns its handelingen: persons
// bijhouding added to them after they were delivered (migration 0011), which nothing can undo,
// so the leader reports them. Records migration 0009 left in publicatie_ingehaald are reported
// the same way: whatever became of their handeling, the consumer's order check decides it now.
func readLatePersons(ctx context.Context, q querier) ([]int64, error) {
	rows, err := q.QueryContext(ctx, latePersonsSQL)
	if err != nil {
		return nil, fmt.Errorf("read late persons: %w", err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("read late persons: %w", err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read late persons: %w", err)
	}
	return out, nil
}

const latePersonsSQL = `
		with a as (delete from publicatie_laat_personen returning admhnd_id),
		b as (delete from publicatie_ingehaald returning admhnd_id)
		select admhnd_id from a union select admhnd_id from b order by 1`

// querier runs statements: a *sqlx.Tx runs them as they are, a prepared.Tx prepared.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// roundSQL are the statements of a round that run prepared (see package prepared); not
// intakeSQL, whose plan depends on its exclusion list.
var roundSQL = []string{handeling.LeaseRenewSQL, roundTimeoutSQL, horizonSQL, countInLeveringSQL, staleSQL, herleesSQL, intakeDefaultSQL,
	foutChangesSQL, blockedSQL, touchStaleSQL, markSQL, latePersonsSQL}

// roundTimeoutSQL lowers the transaction's idle_in_transaction_session_timeout to $1 ms where
// the session's is longer or off, and turns JIT compilation off for the round: its statements
// are short, but with large handelingen (or statistics that think so) the intake's estimate
// passed jit_above_cost and every round spent 155 ms compiling a 1 ms query (measured,
// TestViewBoundedInBytes).
const roundTimeoutSQL = `
		select set_config('idle_in_transaction_session_timeout',
			(select case when setting::bigint = 0 then $1 else least(setting::bigint, $1) end
			 from pg_settings where name = 'idle_in_transaction_session_timeout')::text, true),
			set_config('jit', 'off', true)`

// intakeRow is a (handeling, person) row of the intake, ordered by handeling.
type intakeRow struct {
	place
	persoon sql.NullInt64
	nakomer bool
}

// readIntake takes in, from one snapshot, up to limit handelingen after the stand and before
// horizon, oldest first, and the handelingen recorded in
// publicatie_nakomer up to the new stand (the last of those): all to be delivered (statuslev
// NULL, soort not excluded), each with all of its persons. It empties publicatie_nakomer; the
// recorded ones beyond the new stand come with a later intake in their turn (a load of a
// million handelingen with tsreg in the past is recorded whole, and must not come back to
// the publisher at once). The limit counts handelingen, so a multi-person handeling is never
// cut in half. In the result, ordered by (tsreg, id), nakomer marks the recorded ones.
//
// It also stops before the new handeling that would take the view's estimate (intakeCost)
// past budget bytes, except the first, which is always read: a handeling larger than the
// whole budget is taken in when it is next. cut says it stopped there; the rest of the rows
// are left unread (lib/pq still drains them from the connection).
func readIntake(ctx context.Context, q querier, excluded []string, horizon time.Time, stand place, limit, budget int, recheck []int64) (out []intakeRow, cut bool, err error) {
	query, args := intakeSQL, []any{horizon, stand.tsregArg(), stand.id, limit, pq.Array(recheck), pq.Array(excluded)}
	if handeling.IsDefaultExcluded(excluded) {
		query, args = intakeDefaultSQL, args[:5]
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
		if err := rows.Scan(&r.id, &r.tsreg, &r.persoon, &r.nakomer); err != nil {
			return nil, false, fmt.Errorf("read intake: %w", err)
		}
		if !r.nakomer {
			if handelingen == 0 || r.id != last {
				if handelingen > 0 {
					before += intakeCost(persons)
				}
				handelingen, start, last, persons = handelingen+1, len(out), r.id, 0
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

// intakeSQL is readIntake's query for any exclusion list ($6). It is not prepared (roundSQL):
// lib/pq has it planned with its parameters on every call, so the planner can prove from the
// list whether admhnd_te_leveren_zonder_iv_idx applies.
//
// The persons are read per handeling through a lateral subquery that the planner cannot
// flatten (offset 0): one index probe per handeling, whatever the statistics say. Left to
// itself, the planner hashes all of admhnd_persoon while the table is small. The handelingen
// recorded in publicatie_nakomer are looked up the same way: joined, with statistics taken
// while nothing was open, they were found by reading every open handeling (48 ms per round
// with 200,000 open; TestRoundFindsRowsByID).
var intakeSQL = fmt.Sprintf(intakeTemplate, handeling.NotExcludedSQL("$6"))

// intakeDefaultSQL is intakeSQL for the default exclusion, with that soort written in
// (handeling.NotExcludedDefaultSQL): the index's own predicate, so that also the generic plan
// of the prepared statement uses the index (with soort <> all($5) it sorted every candidate
// instead: measured). It is a constant, never input.
var intakeDefaultSQL = fmt.Sprintf(intakeTemplate, handeling.NotExcludedDefaultSQL)

// The records of publicatie_nakomer are deleted skipping rows another transaction holds (a
// trigger recording a handeling already recorded updates its row until it commits): such a
// record stays for a later round, and the round never waits for bijhouding or a consumer. $5
// are the handelingen the previous round could not mark (openWork.recheck), looked up the same
// way.
var intakeTemplate = `
		with n as (
			delete from publicatie_nakomer
			where admhnd_id in (select admhnd_id from publicatie_nakomer for update skip locked)
			returning admhnd_id
		), m as (
			select admhnd_id from n union select unnest($5::bigint[])
		), c as (
			select id, tsreg from admhnd
			where statuslev is null and %[1]s and tsreg < $1 and (tsreg, id) > ($2::timestamptz, $3::bigint)
			  and ` + handeling.TsregAcceptedSQL + `
			order by tsreg, id
			limit $4
		), s as (
			select coalesce(max(tsreg), $2::timestamptz) as tsreg,
			       coalesce(max(id) filter (where tsreg = (select max(tsreg) from c)), $3::bigint) as id
			from c
		), l as (
			select a.id, a.tsreg from m cross join lateral (
				select id, tsreg, statuslev, soort from admhnd where id = m.admhnd_id offset 0) a, s
			where a.statuslev is null and %[1]s and (a.tsreg, a.id) <= (s.tsreg, s.id)
			  and ` + handeling.TsregAcceptedOn("a.tsreg") + `
		), cl as (
			select id, tsreg, false as nakomer from c
			union all
			select id, tsreg, true from l
		)
		select cl.id, cl.tsreg, p.persoon_id, cl.nakomer
		from cl left join lateral (
			select distinct persoon_id from admhnd_persoon where admhnd_id = cl.id offset 0) p on true
		order by cl.tsreg, cl.id, cl.nakomer, p.persoon_id`

// readBlocked returns the persons blocked now apart from those a fout holds (holds, kept by
// the view): of the handelingen in levering, of those recorded in publicatie_nakomer since
// the round's intake read it, and, under the strict policy, of those recorded in
// publicatie_fout_changes since the round read it (readFoutChanges).
//
// The records make separate statements (intake, fout changes, then this) as safe as one
// snapshot: an operator's retry (fout back to NULL) that commits between the intake and this
// is no longer fout here and was not yet taken in there, but its trigger's record is visible
// here and holds its persons back until the next round takes it in; a consumer's fout that
// commits after the round read the changes is no longer in levering here, but its record is.
func readBlocked(ctx context.Context, q querier, strict bool) (map[int64]struct{}, error) {
	blocked := map[int64]struct{}{}
	rows, err := q.QueryContext(ctx, blockedSQL, strict)
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

// blockedSQL reads readBlocked's persons, one index probe per handeling. All of them, not only
// the candidates' persons: in a prepared plan a filter "= any($array)" is a linear search per
// row, which a handeling of 100,000 persons in flight would turn into 10^8 comparisons per
// round. Its cost is bounded by what the service puts in levering (MaxInLevering) and by what
// was recorded since the last round, never by the fout handelingen.
var blockedSQL = `
		select distinct p.persoon_id
		from (
			select id from admhnd
			where statuslev = ` + handeling.InLeveringSQL + `
			union all
			select admhnd_id from publicatie_nakomer
			union all
			select admhnd_id from publicatie_fout_changes where $1
		) a cross join lateral (
			select persoon_id from admhnd_persoon where admhnd_id = a.id offset 0) p`

// readHolds reads every unreleased fout handeling with its persons: what a new view's holds
// start from (the strict policy).
func readHolds(ctx context.Context, q querier) (*holds, error) {
	h := newHolds()
	states, err := readFoutStates(ctx, q, holdsSQL)
	if err != nil {
		return nil, fmt.Errorf("read fout handelingen: %w", err)
	}
	for _, s := range states {
		h.set(s)
	}
	return h, nil
}

var holdsSQL = `
		select f.id, true, p.persoon_id
		from (select id from admhnd where ` + handeling.UnreleasedFoutSQL + `) f
		left join lateral (select distinct persoon_id from admhnd_persoon where admhnd_id = f.id offset 0) p on true
		order by f.id, p.persoon_id`

// readFoutChanges empties publicatie_fout_changes (migration 0014) and returns the fout state
// of each handeling recorded there: whether it is an unreleased fout handeling now, with its
// persons. Records another transaction holds (recording again what it changes) are skipped,
// as publicatie_nakomer's are: they stay for a later round, and hold their persons back
// meanwhile (readBlocked).
func readFoutChanges(ctx context.Context, q querier) ([]foutState, error) {
	states, err := readFoutStates(ctx, q, foutChangesSQL)
	if err != nil {
		return nil, fmt.Errorf("read publicatie_fout_changes: %w", err)
	}
	return states, nil
}

var foutChangesSQL = `
		with d as (
			delete from publicatie_fout_changes
			where admhnd_id in (select admhnd_id from publicatie_fout_changes for update skip locked)
			returning admhnd_id
		)
		select d.admhnd_id, coalesce(a.statuslev = ` + handeling.FoutSQL + ` and a.vrijgegeven is null, false), p.persoon_id
		from d left join admhnd a on a.id = d.admhnd_id
		left join lateral (select distinct persoon_id from admhnd_persoon where admhnd_id = d.admhnd_id offset 0) p on true
		order by 1, 3`

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
// 0014's trigger, so the sweep reads no persons (reading them made it 25 times dearer: half a
// second with 100,000 held, docs/performance.md).
func readHoldsChecksum(ctx context.Context, q querier) (n int, xor int64, err error) {
	if err := q.QueryRowContext(ctx, holdsChecksumSQL).Scan(&n, &xor); err != nil {
		return 0, 0, fmt.Errorf("read fout checksum: %w", err)
	}
	return n, xor, nil
}

var holdsChecksumSQL = `select count(*), coalesce(bit_xor(id), 0) from admhnd where ` + handeling.UnreleasedFoutSQL

// readHerlees empties publicatie_herlees and returns the oldest handeling recorded there (ok
// false when it was empty): registered late by a transaction that registered many (migrations
// 0011, 0015), so the intake may have passed it. It also returns the leads of the handelingen
// the registration trigger recorded in publicatie_nakomer (those within MaxLead) and empties
// publicatie_lead_samples, returning the sampled leads: the margin is learned from them
// (learnLead) before the intake empties publicatie_nakomer.
func readHerlees(ctx context.Context, q querier) (oldest place, ok bool, late, samples []time.Duration, err error) {
	var tsreg sql.NullTime
	var id sql.NullInt64
	var lateSecs, sampleSecs pq.Float64Array
	if err := q.QueryRowContext(ctx, herleesSQL).Scan(&tsreg, &id, &lateSecs, &sampleSecs); err != nil {
		return place{}, false, nil, nil, fmt.Errorf("read publicatie_herlees: %w", err)
	}
	for _, s := range lateSecs {
		late = append(late, seconds(s))
	}
	for _, s := range sampleSecs {
		samples = append(samples, seconds(s))
	}
	return place{tsreg: tsreg.Time, id: id.Int64}, id.Valid, late, samples, nil
}

const herleesSQL = `
		with d as (delete from publicatie_herlees returning tsreg, admhnd_id),
		s as (delete from publicatie_lead_samples returning lead)
		select o.tsreg, o.admhnd_id,
			coalesce((select array_agg(extract(epoch from voorsprong)::float8) from publicatie_nakomer where voorsprong is not null), '{}'),
			coalesce((select array_agg(extract(epoch from lead)::float8) from s), '{}')
		from (select 1) x left join lateral (select tsreg, admhnd_id from d order by tsreg, admhnd_id limit 1) o on true`

// readChecksum counts the handelingen to be delivered up to the stand and xors their ids: what
// the view holds when it and the database agree.
func readChecksum(ctx context.Context, q querier, excluded []string, stand place) (n int, xor int64, err error) {
	query, args := checksumSQL, []any{stand.tsregArg(), stand.id, pq.Array(excluded)}
	if handeling.IsDefaultExcluded(excluded) {
		query, args = checksumDefaultSQL, args[:2]
	}
	if err := q.QueryRowContext(ctx, query, args...).Scan(&n, &xor); err != nil {
		return 0, 0, fmt.Errorf("read view checksum: %w", err)
	}
	return n, xor, nil
}

var (
	checksumSQL        = fmt.Sprintf(checksumTemplate, handeling.NotExcludedSQL("$3"))
	checksumDefaultSQL = fmt.Sprintf(checksumTemplate, handeling.NotExcludedDefaultSQL)
)

const checksumTemplate = `
		select count(*), coalesce(bit_xor(id), 0) from admhnd
		where statuslev is null and %s and (tsreg, id) <= ($1::timestamptz, $2::bigint) and ` + handeling.TsregAcceptedSQL

// readStale returns up to limit handelingen that have been in levering for longer than
// timeout (their message was lost or dead-lettered, so they are published again), and every
// handeling in levering that shares a person with them, directly or through others: the rest
// of their groups, so that a group is never published again in parts (components).
func readStale(ctx context.Context, q querier, timeout time.Duration, limit int) ([]Candidate, error) {
	return readHandelingen(ctx, q, staleSQL, timeout.Seconds(), limit)
}

const staleSQL = `
		with recursive s as (
			select id from admhnd
			where statuslev = ` + handeling.InLeveringSQL + ` and coalesce(tspub, '-infinity') < now() - make_interval(secs => $1)
			order by tsreg, id
			limit $2
		), c(id) as (
			-- Every handeling in levering that shares a person with one of them, and so on: a
			-- group published earlier goes again whole, though the limit cut it.
			select id from s
			union
			select op.admhnd_id
			from c join admhnd_persoon cp on cp.admhnd_id = c.id
			join admhnd_persoon op on op.persoon_id = cp.persoon_id and op.admhnd_id <> c.id
			join admhnd a on a.id = op.admhnd_id and a.statuslev = ` + handeling.InLeveringSQL + `
		)
		select c.id, p.persoon_id
		from c join admhnd a on a.id = c.id left join lateral (
			select distinct persoon_id from admhnd_persoon where admhnd_id = c.id) p on true
		order by a.tsreg, a.id, p.persoon_id`

// readHandelingen runs a query of (id, persoon_id) rows ordered by handeling and groups them.
func readHandelingen(ctx context.Context, q querier, query string, args ...any) ([]Candidate, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("read handelingen: %w", err)
	}
	defer rows.Close()
	var out []Candidate
	for rows.Next() {
		var id int64
		var persoon sql.NullInt64
		if err := rows.Scan(&id, &persoon); err != nil {
			return nil, fmt.Errorf("read handelingen: %w", err)
		}
		out = addRow(out, id, persoon)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read handelingen: %w", err)
	}
	return out, nil
}

// countInLevering counts the handelingen in flight.
func countInLevering(ctx context.Context, q querier) (int, error) {
	var n int
	if err := q.QueryRowContext(ctx, countInLeveringSQL).Scan(&n); err != nil {
		return 0, fmt.Errorf("count in_levering: %w", err)
	}
	return n, nil
}

const countInLeveringSQL = `select count(*) from admhnd where statuslev = ` + handeling.InLeveringSQL

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
func touchStale(ctx context.Context, q querier, ids []int64) (map[int64]bool, error) {
	return returningIDs(ctx, q, touchStaleSQL, ids)
}

const touchStaleSQL = `
		update admhnd set tspub = now()
		where id in (
			select id from admhnd where id = any($1) and statuslev = ` + handeling.InLeveringSQL + `
			for update skip locked)
		returning id`

// markInLevering sets the given handelingen in_levering where they are still NULL and returns
// the ids it changed. A handeling a consumer already finished (a copy from a round whose
// database commit failed) is not touched and must not be sent again. One that another session
// has locked (a consumer delivering such a copy, an operator) is skipped, not waited for: it
// stays NULL or becomes geleverd, and in both states it holds back its persons' later
// handelingen, which Select has already held back in this round (docs/robustness.md).
func markInLevering(ctx context.Context, q querier, ids []int64) (map[int64]bool, error) {
	return returningIDs(ctx, q, markSQL, ids)
}

// markSQL finds its rows by id, never through the index of open work: it tests for a NULL
// status as a coalesce with the empty string (the check constraint allows no empty status),
// a form that index's predicate cannot match. With "statuslev is null" written out,
// statistics taken while little was open (every row delivered at the last analyze, then a
// bulk correction) made the planner scan all open work for the ids, every round: 27 ms per
// round with 200,000 open; the benchmark's chain beside 200,000 background handelingen took
// 12-20 s instead of 4 (TestRoundFindsRowsByID).
const markSQL = `
		update admhnd set statuslev = ` + handeling.InLeveringSQL + `, tspub = now()
		where id in (
			select id from admhnd where id = any($1) and coalesce(statuslev::text, '') = ''
			for update skip locked)
		returning id`

// setBack sets handelingen this round marked in_levering back to be delivered: members of a
// group after one that could not be marked. The update fires admhnd_teruggezet (migration
// 0007), which records them in publicatie_nakomer for the next round.
func setBack(ctx context.Context, q querier, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	if _, err := q.ExecContext(ctx, setBackSQL, pq.Array(ids)); err != nil {
		return fmt.Errorf("set back: %w", err)
	}
	return nil
}

const setBackSQL = `update admhnd set statuslev = null, tspub = null where id = any($1) and statuslev = ` + handeling.InLeveringSQL

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
func refuseOddTsreg(ctx context.Context, q querier, excluded []string) ([]int64, error) {
	rows, err := q.QueryContext(ctx, refuseOddTsregSQL, handeling.FoutTsreg, pq.Array(excluded))
	if err != nil {
		return nil, fmt.Errorf("refuse odd tsreg: %w", err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("refuse odd tsreg: %w", err)
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

var refuseOddTsregSQL = `
		update admhnd set statuslev = ` + handeling.FoutSQL + `, foutreden = $1
		where ` + handeling.ToDeliverSQL("$2") + `
		  and not ` + handeling.TsregAcceptedSQL + `
		returning id`

// futureSQL reads, earliest first, up to $2 handelingen still to be delivered ($1: the
// excluded soorten) registered in the future: a range at the end of the index of open work.
// A tsreg outside the accepted range is the intake's to set fout (refuseOddTsreg), and could
// not be read into a time.Time.
var futureSQL = `
		select id, tsreg, extract(epoch from tsreg - now())::float8 from admhnd
		where ` + handeling.ToDeliverSQL("$1") + ` and ` + handeling.FutureSQL + ` and ` + handeling.TsregAcceptedSQL + `
		order by tsreg, id
		limit $2`

// leadSQL sets the margin ($1 seconds), its bound ($2), the wait bound ($4) and the rate ($5)
// at which the registration trigger samples leads, for $6 seconds from now. When the margin
// changes, it keeps the lowest and the highest margin in force since the last change that is
// less than $3 seconds old, until $3 seconds from now (sinds); a lowering leaves hoog_tot to
// be dated by the next round ('infinity'), which sets it to its own start (after this commit).
// The expressions read the row as it was.
const leadSQL = `
		update publicatie_toestand set
			laag = case when make_interval(secs => $1) = marge then laag
				else least(marge, make_interval(secs => $1), case when sinds > now() then laag else marge end) end,
			hoog = case when make_interval(secs => $1) = marge then hoog
				else greatest(marge, make_interval(secs => $1), case when sinds > now() then hoog else marge end) end,
			sinds = case when make_interval(secs => $1) = marge then sinds
				else clock_timestamp() + make_interval(secs => $3) end,
			hoog_tot = case when make_interval(secs => $1) < marge then 'infinity'
				when hoog_tot = 'infinity' then now() else hoog_tot end,
			marge = make_interval(secs => $1), grens = make_interval(secs => $2), max_wait = make_interval(secs => $4),
			lead_sample_rate = $5, lead_sample_until = clock_timestamp() + make_interval(secs => $6)`

// slaaptSQL records whether the leader sleeps: registrations and deliveries notify only a
// sleeping publisher (migration 0011).
const slaaptSQL = `update publicatie_toestand set slaapt = $1`
