package publicatie

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/lib/pq"

	"github.com/brp/levering/internal/dbsession"
)

// readHorizon returns the registration time before which no handeling can still appear: the
// start of the oldest transaction in progress in this database (bijhouding stamps tsreg at or
// after its transaction's start, so an open transaction may still add handelingen as old as
// its start), or now when none is open. It must be read before the candidates: a transaction
// that commits between the two reads is then either seen open here or visible there.
//
// The service's own sessions (dbsession.ServiceSessionSQL) are left out: they never register
// handelingen, and a consumer frozen inside its transaction would otherwise hold back every
// publication until the database ends its session.
//
// Other roles' transactions are visible in pg_stat_activity only to members of
// pg_read_all_stats (or superusers): see checkHorizonPrivilege.
func readHorizon(ctx context.Context, q querier) (time.Time, error) {
	var h time.Time
	if err := q.QueryRowContext(ctx, horizonSQL).Scan(&h); err != nil {
		return h, fmt.Errorf("read horizon: %w", err)
	}
	return h, nil
}

const horizonSQL = `
		select least(clock_timestamp(), (
			select min(xact_start) from pg_stat_activity
			where datname = current_database() and pid <> pg_backend_pid()
			  and backend_type = 'client backend' and xact_start is not null
			  and not coalesce(` + dbsession.ServiceSessionSQL + `, false)))`

// querier runs statements: a *sqlx.Tx runs them as they are, a prepared.Tx prepared.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// roundSQL are the statements of a round that run prepared (see package prepared); not
// selectionSQL, whose plan depends on its exclusion list.
var roundSQL = []string{renewSQL, roundTimeoutSQL, horizonSQL, countInLeveringSQL, staleSQL, selectionDefaultSQL, touchStaleSQL, markSQL}

// roundTimeoutSQL lowers the transaction's idle_in_transaction_session_timeout to $1 ms where
// the session's is longer or off.
const roundTimeoutSQL = `
		select set_config('idle_in_transaction_session_timeout',
			(select case when setting::bigint = 0 then $1 else least(setting::bigint, $1) end
			 from pg_settings where name = 'idle_in_transaction_session_timeout')::text, true)`

// readSelection returns, from one snapshot, up to limit handelingen still to be delivered
// (statuslev NULL, soort not excluded, registered before horizon), oldest tsreg first, ties by
// id, each with all of its persons, and the persons blocked before the walk: those with a
// handeling in levering and, under the strict policy, with a fout handeling no operator
// released (only those among the candidates' persons). The limit counts handelingen, so a
// multi-person handeling is never cut in half.
//
// One statement, because two would see two snapshots: an operator's retry (fout back to NULL)
// committing between them would hide the retried handeling both as a candidate and as a
// blocker, and its person's next handeling would overtake it.
func readSelection(ctx context.Context, q querier, excluded []string, limit int, horizon time.Time, policy FoutPolicy) ([]Candidate, map[int64]struct{}, error) {
	query, args := selectionSQL, []any{limit, horizon, policy == Strict, pq.Array(excluded)}
	if len(excluded) == 1 && excluded[0] == InitieleVulling {
		query, args = selectionDefaultSQL, args[:3]
	}
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, nil, fmt.Errorf("read selection: %w", err)
	}
	defer rows.Close()
	var cands []Candidate
	blocked := map[int64]struct{}{}
	for rows.Next() {
		var blocker bool
		var id sql.NullInt64
		var tsreg sql.NullTime
		var persoon sql.NullInt64
		if err := rows.Scan(&blocker, &id, &tsreg, &persoon); err != nil {
			return nil, nil, fmt.Errorf("read selection: %w", err)
		}
		if blocker {
			blocked[persoon.Int64] = struct{}{}
			continue
		}
		cands = addRow(cands, id.Int64, persoon)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("read selection: %w", err)
	}
	return cands, blocked, nil
}

// selectionSQL is readSelection's query for any exclusion list ($4). It is not prepared
// (roundSQL): lib/pq has it planned with its parameters on every call, so the planner can
// prove from the list whether admhnd_te_leveren_zonder_iv_idx applies.
//
// The persons are read per handeling through lateral subqueries that the planner cannot flatten
// (offset 0): one index probe per candidate and per handeling in levering, whatever the
// statistics say. Left to itself, the planner hashes all of admhnd_persoon while the table is
// small (measured: twice the time of the probes at 30,000 rows). Only blocked persons that
// are also candidates' persons are returned; the walk looks at no others.
var selectionSQL = fmt.Sprintf(selectionTemplate, "soort <> all($4::text[])")

// selectionDefaultSQL is selectionSQL for the default exclusion, with that soort written in:
// the index's own predicate, so that also the generic plan of the prepared statement uses
// the index (with soort <> all($4) it sorted every candidate instead: measured). It is a
// constant of this package, never input.
var selectionDefaultSQL = fmt.Sprintf(selectionTemplate, "soort <> '"+InitieleVulling+"'")

const selectionTemplate = `
		with c as (
			select id, tsreg from admhnd
			where statuslev is null and %s and tsreg < $2
			order by tsreg, id
			limit $1
		), cp as materialized (
			select c.id, c.tsreg, p.persoon_id
			from c left join lateral (
				select persoon_id from admhnd_persoon where admhnd_id = c.id offset 0) p on true
		), b as materialized (
			select p.persoon_id
			from admhnd a cross join lateral (
				select persoon_id from admhnd_persoon where admhnd_id = a.id offset 0) p
			where a.statuslev = 'in_levering' or ($3 and a.statuslev = 'fout' and a.vrijgegeven is null)
		)
		select false as blocker, id, tsreg, persoon_id from cp
		union all
		select distinct true, null::bigint, null::timestamptz, persoon_id
		from b where persoon_id in (select persoon_id from cp)
		order by 1, 3, 2, 4`

// readStale returns up to limit handelingen that have been in levering for longer than
// timeout: their message was lost or dead-lettered, so they are published again.
func readStale(ctx context.Context, q querier, timeout time.Duration, limit int) ([]Candidate, error) {
	return readHandelingen(ctx, q, staleSQL, timeout.Seconds(), limit)
}

const staleSQL = `
		with c as (
			select id, tsreg from admhnd
			where statuslev = 'in_levering' and coalesce(tspub, '-infinity') < now() - make_interval(secs => $1)
			order by tsreg, id
			limit $2
		)
		select c.id, p.persoon_id
		from c left join admhnd_persoon p on p.admhnd_id = c.id
		order by c.tsreg, c.id, p.persoon_id`

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

const countInLeveringSQL = `select count(*) from admhnd where statuslev = 'in_levering'`

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
			select id from admhnd where id = any($1) and statuslev = 'in_levering'
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

const markSQL = `
		update admhnd set statuslev = 'in_levering', tspub = now()
		where id in (
			select id from admhnd where id = any($1) and statuslev is null
			for update skip locked)
		returning id`

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
