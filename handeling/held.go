package handeling

import (
	"context"
	"fmt"

	"github.com/lib/pq"
)

// Held is what unreleased fout handelingen hold back under the strict policy (ReadHeld).
type Held struct {
	// Handelingen counts the handelingen still to be delivered that the publisher cannot
	// publish because of them, also through multi-person handelingen.
	Handelingen int64
	// Personen counts the distinct persons of those handelingen: who waits.
	Personen int64
}

// ReadHeld counts, in one statement, every handeling held back behind a fout: the number the
// publisher actually holds back under the strict policy (strict false, the skip policy: none).
// excluded are the soorten not delivered; they never hold anyone.
//
// The rule is the publisher's. A person of an unreleased fout handeling is blocked (BlocksSQL:
// the publisher blocks persons, not places), so every open handeling of that person is held:
// still to be delivered (statuslev NULL) and its soort not excluded. A held handeling heads
// the queue of each of its persons and is not published, so it holds every later (tsreg, id)
// open handeling of each of them, and so on. Handelingen in levering are not counted: they are
// published, and what they hold up they hold up as in levering (the blocked persons show it).
//
// heldSQL walks this as a recursion over persons, keeping for each only the earliest place from
// which it is held: a person is expanded again only when a place earlier than its known one is
// found, and a handeling's persons are read once per step however many held persons share it.
// Each step reads the handelingen of the persons it expands through admhnd_persoon's persoon
// index, so the cost grows with the held persons' handelingen, not with the table. Measured:
// a fout of 50,000 persons followed by two more handelingen of all of them, 1.7 s; the common
// case (a fout, a few multi-person handelingen, their persons' queues) a few milliseconds.
func ReadHeld(ctx context.Context, q RowQueryer, excluded []string, strict bool) (Held, error) {
	var h Held
	if !strict {
		return h, nil
	}
	if err := q.QueryRowContext(ctx, heldSQL, pq.Array(excluded)).Scan(&h.Handelingen, &h.Personen); err != nil {
		return Held{}, fmt.Errorf("read held behind fout: %w", err)
	}
	return h, nil
}

// heldSQL is ReadHeld's statement; $1 are the excluded soorten. One row of the recursion per
// step, carrying as parallel arrays every person known to be held with the earliest place
// (tsreg, id) after which its handelingen are held (known_*), and those whose place the last
// step found or improved (front_*), which the next step expands. A recursive term cannot
// aggregate over its own rows or read earlier steps; carrying the map in one row lets each step
// keep a person's earliest place and drop what it knew already. The persons of the fout
// handelingen start from before everything ('-infinity', 0). The recursion ends with a step
// that improved nothing; its map gives the count.
var heldSQL = `
	with recursive step(known_p, known_t, known_i, front_p, front_t, front_i) as (
		select coalesce(array_agg(p), '{}'), coalesce(array_agg(t), '{}'), coalesce(array_agg(i), '{}'),
		       coalesce(array_agg(p), '{}'), coalesce(array_agg(t), '{}'), coalesce(array_agg(i), '{}')
		from (
			select distinct p.persoon_id as p, '-infinity'::timestamptz as t, 0::bigint as i
			from admhnd f join admhnd_persoon p on p.admhnd_id = f.id
			where ` + UnreleasedFoutSQL + `
		) fout
		union all
		select n.known_p, n.known_t, n.known_i, n.front_p, n.front_t, n.front_i
		from step s cross join lateral (
			with front as (
				select * from unnest(s.front_p, s.front_t, s.front_i) as f(p, t, i)
			), open_after as (
				select distinct h.id, h.tsreg
				from front f
				join admhnd_persoon hp on hp.persoon_id = f.p
				join admhnd h on h.id = hp.admhnd_id
				where ` + ToDeliverSQL("$1") + ` and (h.tsreg, h.id) > (f.t, f.i)
			), reached as (
				select distinct on (q.persoon_id) q.persoon_id as p, o.tsreg as t, o.id as i
				from open_after o join admhnd_persoon q on q.admhnd_id = o.id
				order by q.persoon_id, o.tsreg, o.id
			), known as (
				select * from unnest(s.known_p, s.known_t, s.known_i) as k(p, t, i)
			), better as (
				select r.* from reached r left join known k on k.p = r.p
				where k.p is null or (r.t, r.i) < (k.t, k.i)
			), merged as (
				select k.* from known k where not exists (select 1 from better b where b.p = k.p)
				union all
				select * from better
			)
			select (select coalesce(array_agg(p), '{}') from merged) as known_p,
			       (select coalesce(array_agg(t), '{}') from merged) as known_t,
			       (select coalesce(array_agg(i), '{}') from merged) as known_i,
			       (select coalesce(array_agg(p), '{}') from better) as front_p,
			       (select coalesce(array_agg(t), '{}') from better) as front_t,
			       (select coalesce(array_agg(i), '{}') from better) as front_i
		) n
		where cardinality(s.front_p) > 0
	), held_from as (
		select k.p, k.t, k.i
		from step cross join lateral unnest(step.known_p, step.known_t, step.known_i) as k(p, t, i)
		where cardinality(step.front_p) = 0
	), held as (
		select distinct h.id
		from held_from k
		join admhnd_persoon hp on hp.persoon_id = k.p
		join admhnd h on h.id = hp.admhnd_id
		where ` + ToDeliverSQL("$1") + ` and (h.tsreg, h.id) > (k.t, k.i)
	)
	select (select count(*) from held),
	       (select count(distinct persoon_id) from admhnd_persoon where admhnd_id in (select id from held))`
