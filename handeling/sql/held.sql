-- ReadHeld's statement; $1 are the excluded soorten. One row of the recursion per
-- step, carrying as parallel arrays every person known to be held with the earliest place
-- (tsreg, id) after which its handelingen are held (known_*), and those whose place the last
-- step found or improved (front_*), which the next step expands. A recursive term cannot
-- aggregate over its own rows or read earlier steps; carrying the map in one row lets each step
-- keep a person's earliest place and drop what it knew already. The persons of the fout
-- handelingen start from before everything ('-infinity', 0). The recursion ends with a step
-- that improved nothing; its map gives the count.
with recursive step(known_p, known_t, known_i, front_p, front_t, front_i) as (
	select coalesce(array_agg(p), '{}'), coalesce(array_agg(t), '{}'), coalesce(array_agg(i), '{}'),
	       coalesce(array_agg(p), '{}'), coalesce(array_agg(t), '{}'), coalesce(array_agg(i), '{}')
	from (
		select distinct p.persoon_id as p, '-infinity'::timestamptz as t, 0::bigint as i
		from admhnd f join admhnd_persoon p on p.admhnd_id = f.id
		where publicatie_unreleased_fout(f.statuslev, f.vrijgegeven)
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
			where publicatie_to_deliver(h.statuslev, h.soort, $1::text[]) and (h.tsreg, h.id) > (f.t, f.i)
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
	where publicatie_to_deliver(h.statuslev, h.soort, $1::text[]) and (h.tsreg, h.id) > (k.t, k.i)
)
select (select count(*) from held),
       (select count(distinct persoon_id) from admhnd_persoon where admhnd_id in (select id from held))
