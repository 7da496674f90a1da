package publicatie

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/lib/pq"
)

// openWork is the publisher's view of the work still to be delivered (schema migration 0007),
// kept by the leader inside its rounds' transactions, so the fence guards it too and a round
// that rolls back leaves it as it was.
//
// A handeling is ready when it is the oldest open handeling of every person it touches (open:
// not geleverd, not excluded, and not a fout that no longer holds its persons back). Earlier
// rounds read a window of the oldest candidates and walked it; when the window held the queued
// handelingen of a few persons, a round could publish only one of each, so throughput depended
// on how bijhouding interleaved its work. Here each person has one head (publicatie_open.kop)
// and each handeling counts of how many persons it is the head (publicatie_kandidaat.koppen),
// so the ready handelingen come out of one index, oldest first, as many as there are persons
// with ready work.
//
// Handelingen are taken in oldest first, up to LIMIT per round, and only below the round's
// horizon: a handeling registered below a horizon is visible when that horizon is read (see
// readHorizon), so nothing older than what was taken in can appear later, and a person's head
// is always its oldest open handeling among those taken in. The exception is an operator's
// retry of a fout that no longer held anyone back (skip policy, or released): it is taken in
// again and waits behind its persons' handelingen in flight, as the earlier selection did.
//
// A handeling registered below the stand anyway (a tsreg older than its transaction's start,
// a clock behind, admhnd emptied and filled again) is recorded by a trigger on admhnd
// (publicatie_nakomer) and taken in by the next round before anything newer (takeInLate).
// One set back to be delivered by hand after it left the view is found by sweep, at most once
// per sweepEvery and outside the rounds (it reads every open handeling). Either waits behind
// whatever of its persons is in flight: nothing is lost.
type openWork struct {
	excluded []string
	policy   FoutPolicy
	limit    int

	strays    []int64   // found by sweep, for the next round to take in
	lastSweep time.Time // when sweep last ran; zero: at the next step

	// Handelingen taken in since the leader last analysed the view, and in all until then.
	takenSince, takenBefore int
}

// sweepEvery is how often the leader sweeps (see openWork).
const sweepEvery = time.Minute

// needsAnalyze says whether the view has grown so fast that the planner's statistics of it
// are stale: it took in at least LIMIT, and as many as it had taken in before the last
// analyse. A backlog of a million handelingen for a few persons fills the view within
// minutes, before autovacuum's next analyse; until then the rounds' plans read the view
// as if it were small (sequential scans: measured 15 ms a statement at 300,000 rows, 0.1 ms
// after an analyse). Doubling keeps it to a few analyses per backlog.
func (o *openWork) needsAnalyze() bool {
	return o.takenSince >= max(o.limit, o.takenBefore)
}

// analyze refreshes the planner's statistics of the view, outside any round.
func (o *openWork) analyze(ctx context.Context, q querier) error {
	o.takenBefore += o.takenSince
	o.takenSince = 0
	if _, err := q.ExecContext(ctx, `analyze publicatie_kandidaat, publicatie_open`); err != nil {
		return fmt.Errorf("open work: analyze: %w", err)
	}
	return nil
}

// Candidate is a handeling to publish, with its bijgehouden personen.
type Candidate struct {
	ID       int64
	Personen []int64
}

// The states of a publicatie_kandidaat row.
const (
	staatWacht        = "wacht"
	staatGepubliceerd = "gepubliceerd"
	staatAfgerond     = "afgerond"
)

// fingerprint names the rules the tables were built for; another one rebuilds them.
func (o *openWork) fingerprint() string {
	ex := slices.Clone(o.excluded)
	slices.Sort(ex)
	return string(o.policy) + "|" + strings.Join(ex, ",")
}

// holdsBack says whether a fout handeling still holds its persons back.
func (o *openWork) holdsBack(released bool) bool { return o.policy == Strict && !released }

// sync brings the view up to date for a round under horizon: it rebuilds it when the rules
// changed, moves heads past handelingen that finished, notices retries, takes in the strays
// of the last sweep, and takes in up to limit new handelingen. It returns how many new ones
// it took in, and the strays it took in.
func (o *openWork) sync(ctx context.Context, q querier, horizon time.Time) (int, []int64, error) {
	var wmTsreg time.Time
	var wmID int64
	var fp string
	if err := q.QueryRowContext(ctx, standSQL).Scan(&wmTsreg, &wmID, &fp); err != nil {
		return 0, nil, fmt.Errorf("open work: read stand: %w", err)
	}
	if fp != o.fingerprint() {
		if err := o.rebuild(ctx, q); err != nil {
			return 0, nil, err
		}
		wmTsreg, wmID = time.Time{}, 0
		o.strays = nil // the intake reads them again from the beginning
	}
	if err := o.review(ctx, q, nil); err != nil {
		return 0, nil, err
	}
	// Handelingen registered below the stand go first, oldest first: while any are left, the
	// round takes in nothing newer, so none of their persons' later handelingen overtakes them.
	nLate, strays, err := o.takeInLate(ctx, q)
	if err != nil {
		return 0, nil, err
	}
	if nLate == o.limit {
		o.takenSince += nLate
		return nLate, strays, nil
	}
	if len(o.strays) > 0 {
		// Still to be delivered and not taken in meanwhile (the round may roll back: then
		// the next sweep finds them again).
		swept, err := int64s(ctx, q, straysStillSQL, pq.Array(o.strays))
		if err != nil {
			return 0, nil, fmt.Errorf("open work: take in strays: %w", err)
		}
		o.strays = nil
		if len(swept) > 0 {
			if err := o.takeIn(ctx, q, swept, staatWacht); err != nil {
				return 0, nil, err
			}
		}
		strays = append(strays, swept...)
	}
	query, args := ingestSQL, []any{horizon, wmTsreg, wmID, o.limit, pq.Array(o.excluded)}
	if isDefaultExclusion(o.excluded) {
		query, args = ingestDefaultSQL, args[:4]
	}
	if wmTsreg.IsZero() {
		args[1] = pq.NullTime{} // -infinity: from the beginning
	}
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return 0, nil, fmt.Errorf("open work: read new handelingen: %w", err)
	}
	var ids []int64
	for rows.Next() {
		if err := rows.Scan(&wmID, &wmTsreg); err != nil {
			rows.Close()
			return 0, nil, fmt.Errorf("open work: read new handelingen: %w", err)
		}
		ids = append(ids, wmID)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, nil, fmt.Errorf("open work: read new handelingen: %w", err)
	}
	if len(ids) == 0 {
		o.takenSince += nLate
		return nLate, strays, nil
	}
	if err := o.takeIn(ctx, q, ids, staatWacht); err != nil {
		return 0, nil, err
	}
	if _, err := q.ExecContext(ctx, advanceStandSQL, wmTsreg, wmID); err != nil {
		return 0, nil, fmt.Errorf("open work: record stand: %w", err)
	}
	o.takenSince += nLate + len(ids) // counted even if the round rolls back: at worst an early analyse
	return nLate + len(ids), strays, nil
}

// takeInLate takes in up to limit of the handelingen that the trigger on admhnd recorded as
// registered below the stand (publicatie_nakomer), oldest first. It returns how many records
// it used up, and the ids of those still to be delivered, which it took in.
func (o *openWork) takeInLate(ctx context.Context, q querier) (int, []int64, error) {
	rows, err := q.QueryContext(ctx, lateSQL, o.limit, pq.Array(o.excluded))
	if err != nil {
		return 0, nil, fmt.Errorf("open work: read late handelingen: %w", err)
	}
	var all, open []int64
	for rows.Next() {
		var id int64
		var isOpen bool
		if err := rows.Scan(&id, &isOpen); err != nil {
			rows.Close()
			return 0, nil, fmt.Errorf("open work: read late handelingen: %w", err)
		}
		all = append(all, id)
		if isOpen {
			open = append(open, id)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, nil, fmt.Errorf("open work: read late handelingen: %w", err)
	}
	if len(all) == 0 {
		return 0, nil, nil
	}
	if _, err := q.ExecContext(ctx, deleteLateSQL, pq.Array(all)); err != nil {
		return 0, nil, fmt.Errorf("open work: take in late handelingen: %w", err)
	}
	if len(open) > 0 {
		if err := o.takeIn(ctx, q, open, staatWacht); err != nil {
			return 0, nil, err
		}
	}
	return len(all), open, nil
}

// lateSQL reads the recorded late handelingen, oldest first (gone ones first of all), each
// with whether it is to be taken in: still to be delivered, not excluded, not in the view.
const lateSQL = `
		select n.admhnd_id, coalesce(a.statuslev is null and a.soort <> all($2::text[])
		       and not exists (select from publicatie_kandidaat c where c.admhnd_id = n.admhnd_id), false)
		from publicatie_nakomer n left join admhnd a on a.id = n.admhnd_id
		order by a.tsreg nulls first, n.admhnd_id
		limit $1`

const deleteLateSQL = `delete from publicatie_nakomer where admhnd_id = any($1)`

// sweep looks, outside any round, for handelingen to be delivered that the intake passed
// without taking them in (see openWork), up to limit, for the next round to take in.
func (o *openWork) sweep(ctx context.Context, q querier) error {
	o.lastSweep = time.Now()
	ids, err := int64s(ctx, q, straysSQL, pq.Array(o.excluded), o.limit)
	if err != nil {
		return fmt.Errorf("open work: sweep: %w", err)
	}
	o.strays = ids
	return nil
}

const straysSQL = `
		select a.id from admhnd a, publicatie_stand s
		where s.id = 1 and a.statuslev is null and a.soort <> all($1::text[])
		  and (a.tsreg, a.id) <= (s.tsreg, s.admhnd_id)
		  and not exists (select from publicatie_kandidaat c where c.admhnd_id = a.id)
		order by a.tsreg, a.id
		limit $2`

const straysStillSQL = `
		select a.id from admhnd a
		where a.id = any($1) and a.statuslev is null
		  and not exists (select from publicatie_kandidaat c where c.admhnd_id = a.id)`

const standSQL = `select coalesce(nullif(tsreg, '-infinity'), '0001-01-01'), admhnd_id, fingerprint
		from publicatie_stand where id = 1 for update`

const advanceStandSQL = `update publicatie_stand set tsreg = $1, admhnd_id = $2 where id = 1`

// ingestSQL reads the next handelingen to take in: still to be delivered, not excluded
// ($5), below the horizon ($1) and after the stand ($2, $3), oldest first, at most $4.
var ingestSQL = fmt.Sprintf(ingestTemplate, "soort <> all($5::text[])")

// ingestDefaultSQL is ingestSQL for the default exclusion, written in so that the prepared
// statement's generic plan uses admhnd_te_leveren_zonder_iv_idx (with soort <> all($5) it
// sorted every candidate: measured for the earlier selection).
var ingestDefaultSQL = fmt.Sprintf(ingestTemplate, "soort <> '"+InitieleVulling+"'")

const ingestTemplate = `
		select id, tsreg from admhnd
		where statuslev is null and %s and tsreg < $1
		  and (tsreg, id) > (coalesce($2::timestamptz, '-infinity'), $3::bigint)
		order by tsreg, id
		limit $4`

func isDefaultExclusion(excluded []string) bool {
	return len(excluded) == 1 && excluded[0] == InitieleVulling
}

// rebuild empties the view and takes in again what is open but not to be published: in
// levering, and fout that holds its persons back. The handelingen still to be published are
// taken in from the beginning by the following rounds, LIMIT at a time.
func (o *openWork) rebuild(ctx context.Context, q querier) error {
	if _, err := q.ExecContext(ctx, `delete from publicatie_open`); err != nil {
		return fmt.Errorf("open work: rebuild: %w", err)
	}
	if _, err := q.ExecContext(ctx, `delete from publicatie_kandidaat`); err != nil {
		return fmt.Errorf("open work: rebuild: %w", err)
	}
	if _, err := q.ExecContext(ctx, `delete from publicatie_nakomer`); err != nil { // read again from the beginning
		return fmt.Errorf("open work: rebuild: %w", err)
	}
	if _, err := q.ExecContext(ctx, `update publicatie_stand set tsreg = '-infinity', admhnd_id = 0, fingerprint = $1 where id = 1`,
		o.fingerprint()); err != nil {
		return fmt.Errorf("open work: rebuild: %w", err)
	}
	var ids []int64
	rows, err := q.QueryContext(ctx, `
		select id from admhnd
		where (statuslev = 'in_levering' or (statuslev = 'fout' and $1 and vrijgegeven is null))
		  and soort <> all($2::text[])`, o.policy == Strict, pq.Array(o.excluded))
	if err != nil {
		return fmt.Errorf("open work: rebuild: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return fmt.Errorf("open work: rebuild: %w", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("open work: rebuild: %w", err)
	}
	if len(ids) == 0 {
		return nil
	}
	return o.takeIn(ctx, q, ids, staatGepubliceerd)
}

// takeIn adds handelingen with their persons to the view in staat, or, for one that is there
// already (a retried fout), sets its staat; then it sets the heads of their persons.
func (o *openWork) takeIn(ctx context.Context, q querier, ids []int64, staat string) error {
	persons, err := int64s(ctx, q, takeInSQL, pq.Array(ids), staat)
	if err != nil {
		return fmt.Errorf("open work: take in: %w", err)
	}
	return o.heads(ctx, q, persons, ids)
}

const takeInSQL = `
		with h as (
			select a.id, a.tsreg, p.personen
			from admhnd a cross join lateral (
				select array_agg(persoon_id) as personen from admhnd_persoon where admhnd_id = a.id offset 0) p
			where a.id = any($1)
		), c as (
			insert into publicatie_kandidaat (admhnd_id, tsreg, personen, staat)
			select id, tsreg, coalesce(cardinality(personen), 0), $2 from h
			on conflict (admhnd_id) do update set staat = excluded.staat
		), o as (
			insert into publicatie_open (persoon_id, tsreg, admhnd_id)
			select unnest(personen), tsreg, id from h
			on conflict do nothing
		)
		select distinct unnest(personen) from h`

// review moves the view on for handelingen whose status changed since they were published or
// finished: ids, or (nil) every one not waiting to be published.
//
//   - geleverd: finished; its persons' heads move on. So is one deleted from admhnd (by
//     bijhouding, a purge, a test that empties the table): it must not hold anyone back.
//   - fout that no longer holds its persons back (skip policy, or released): afgerond, heads
//     move on; the row stays to notice a retry.
//   - to be delivered again (statuslev NULL: an operator's retry): a published one waits to
//     be published again; an afgerond one is taken in again.
//   - fout that holds its persons back: published (a consumer may set fout on a copy of a
//     handeling that a failed round left NULL).
func (o *openWork) review(ctx context.Context, q querier, ids []int64) error {
	query, args := reviewAllSQL, []any{}
	if ids != nil {
		if len(ids) == 0 {
			return nil
		}
		query, args = reviewSQL, []any{pq.Array(ids)}
	}
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("open work: review: %w", err)
	}
	var finished, afronden, wacht, retried, published []int64
	for rows.Next() {
		var id int64
		var staat string
		var status sql.NullString
		var released, gone bool
		if err := rows.Scan(&id, &staat, &status, &released, &gone); err != nil {
			rows.Close()
			return fmt.Errorf("open work: review: %w", err)
		}
		switch {
		case status.String == "geleverd" || gone:
			finished = append(finished, id)
		case status.String == "fout" && !o.holdsBack(released):
			if staat != staatAfgerond {
				afronden = append(afronden, id)
			}
		case status.String == "fout":
			if staat != staatGepubliceerd {
				published = append(published, id)
			}
		case !status.Valid && staat == staatGepubliceerd:
			wacht = append(wacht, id)
		case !status.Valid && staat == staatAfgerond:
			retried = append(retried, id)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("open work: review: %w", err)
	}
	for _, s := range []struct {
		ids   []int64
		staat string
	}{{afronden, staatAfgerond}, {wacht, staatWacht}, {published, staatGepubliceerd}} {
		if len(s.ids) > 0 {
			if _, err := q.ExecContext(ctx, setStaatSQL, pq.Array(s.ids), s.staat); err != nil {
				return fmt.Errorf("open work: review: %w", err)
			}
		}
	}
	if len(wacht) > 0 {
		// No longer in flight, it holds its persons' heads only where it is their oldest open
		// handeling: a retried older one of theirs may have been waiting behind it.
		persons, err := int64s(ctx, q, openPersonsSQL, pq.Array(wacht))
		if err != nil {
			return fmt.Errorf("open work: review: %w", err)
		}
		if err := o.heads(ctx, q, persons, wacht); err != nil {
			return err
		}
	}
	if len(finished) > 0 {
		if _, err := q.ExecContext(ctx, deleteKandidaatSQL, pq.Array(finished)); err != nil {
			return fmt.Errorf("open work: review: %w", err)
		}
	}
	if done := append(finished, afronden...); len(done) > 0 {
		persons, err := int64s(ctx, q, deleteOpenSQL, pq.Array(done))
		if err != nil {
			return fmt.Errorf("open work: review: %w", err)
		}
		if err := o.heads(ctx, q, persons, nil); err != nil {
			return err
		}
	}
	if len(retried) > 0 {
		return o.takeIn(ctx, q, retried, staatWacht)
	}
	return nil
}

const reviewColumns = `select c.admhnd_id, c.staat, a.statuslev, a.vrijgegeven is not null, a.id is null
		from publicatie_kandidaat c left join admhnd a on a.id = c.admhnd_id`

const reviewAllSQL = reviewColumns + ` where c.staat <> 'wacht'`

const reviewSQL = reviewColumns + ` where c.admhnd_id = any($1)`

const setStaatSQL = `update publicatie_kandidaat set staat = $2 where admhnd_id = any($1)`

const deleteKandidaatSQL = `delete from publicatie_kandidaat where admhnd_id = any($1)`

const openPersonsSQL = `select distinct persoon_id from publicatie_open where admhnd_id = any($1)`

const deleteOpenSQL = `
		with d as (delete from publicatie_open where admhnd_id = any($1) returning persoon_id)
		select distinct persoon_id from d`

// heads makes each of persons' oldest open handeling its head, except where its head is
// published and not finished (only one handeling of a person is ever in flight), and counts
// again of how many persons each handeling concerned is the head: those of ids, and those
// whose head flag changed.
func (o *openWork) heads(ctx context.Context, q querier, persons, ids []int64) error {
	if len(persons) > 0 {
		changed, err := int64s(ctx, q, headsSQL, pq.Array(persons))
		if err != nil {
			return fmt.Errorf("open work: heads: %w", err)
		}
		ids = append(ids, changed...)
	}
	if len(ids) == 0 {
		return nil
	}
	if _, err := q.ExecContext(ctx, countHeadsSQL, pq.Array(ids)); err != nil {
		return fmt.Errorf("open work: count heads: %w", err)
	}
	return nil
}

const headsSQL = `
		with p as (
			select distinct persoon_id from unnest($1::bigint[]) persoon_id
		), kept as (
			select o.persoon_id from publicatie_open o
			join publicatie_kandidaat c on c.admhnd_id = o.admhnd_id
			where o.persoon_id = any($1) and o.kop and c.staat = 'gepubliceerd'
		), first as (
			select p.persoon_id, f.tsreg, f.admhnd_id
			from p cross join lateral (
				select tsreg, admhnd_id from publicatie_open o where o.persoon_id = p.persoon_id
				order by tsreg, admhnd_id limit 1) f
			where p.persoon_id not in (select persoon_id from kept)
		), cleared as (
			update publicatie_open o set kop = false from first
			where o.persoon_id = first.persoon_id and o.kop and o.admhnd_id <> first.admhnd_id
			returning o.admhnd_id
		), set as (
			update publicatie_open o set kop = true from first
			where o.persoon_id = first.persoon_id and o.tsreg = first.tsreg and o.admhnd_id = first.admhnd_id
			  and not o.kop
			returning o.admhnd_id
		)
		select admhnd_id from cleared union select admhnd_id from set`

const countHeadsSQL = `
		update publicatie_kandidaat c
		set koppen = (select count(*) from publicatie_open o where o.admhnd_id = c.admhnd_id and o.kop)
		where c.admhnd_id = any($1)`

// ready returns up to budget handelingen that may be published now, oldest first, with their
// persons.
func (o *openWork) ready(ctx context.Context, q querier, budget int) ([]Candidate, error) {
	return readHandelingen(ctx, q, readySQL, budget)
}

const readySQL = `
		select c.admhnd_id, p.persoon_id
		from (
			select admhnd_id, tsreg from publicatie_kandidaat
			where staat = 'wacht' and koppen = personen
			order by tsreg, admhnd_id
			limit $1
		) c left join lateral (
			select persoon_id from admhnd_persoon where admhnd_id = c.admhnd_id offset 0) p on true
		order by c.tsreg, c.admhnd_id, p.persoon_id`

// published records that ids were published.
func (o *openWork) published(ctx context.Context, q querier, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	if _, err := q.ExecContext(ctx, setStaatSQL, pq.Array(ids), staatGepubliceerd); err != nil {
		return fmt.Errorf("open work: published: %w", err)
	}
	return nil
}

// int64s runs a query of one bigint column.
func int64s(ctx context.Context, q querier, query string, args ...any) ([]int64, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var v int64
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
