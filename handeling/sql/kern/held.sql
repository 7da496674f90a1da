-- held.sql on the kern layout ($1: the excluded soorten by naam): the same recursion over
-- persons, a handeling's persons the pers of its kern.his_persafgeleidadministrati rows (ended
-- ones included), each step reading the held persons' handelingen through its (pers, tsreg)
-- index; an unreleased fout is status 5 without a release in admhnd_levering.
with recursive step(known_p, known_t, known_i, front_p, front_t, front_i) as (
	select coalesce(array_agg(p), '{}'), coalesce(array_agg(t), '{}'), coalesce(array_agg(i), '{}'),
	       coalesce(array_agg(p), '{}'), coalesce(array_agg(t), '{}'), coalesce(array_agg(i), '{}')
	from (
		select distinct p.pers as p, '-infinity'::timestamptz as t, 0::bigint as i
		from kern.admhnd f
		left join admhnd_levering l on l.admhnd_id = f.id
		join kern.his_persafgeleidadministrati p on p.admhnd = f.id
		where publicatie_unreleased_fout(f.statuslev, l.vrijgegeven)
	) fout
	union all
	select n.known_p, n.known_t, n.known_i, n.front_p, n.front_t, n.front_i
	from step s cross join lateral (
		with front as (
			select * from unnest(s.front_p, s.front_t, s.front_i) as f(p, t, i)
		), open_after as (
			select distinct h.id, h.tsreg
			from front f
			join kern.his_persafgeleidadministrati hp on hp.pers = f.p
			join kern.admhnd h on h.id = hp.admhnd
			where publicatie_to_deliver(h.statuslev, h.srt, (select publicatie_srt_ids($1::text[])))
			  and (h.tsreg, h.id) > (f.t, f.i)
		), reached as (
			select distinct on (q.pers) q.pers as p, o.tsreg as t, o.id as i
			from open_after o join kern.his_persafgeleidadministrati q on q.admhnd = o.id
			order by q.pers, o.tsreg, o.id
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
	join kern.his_persafgeleidadministrati hp on hp.pers = k.p
	join kern.admhnd h on h.id = hp.admhnd
	where publicatie_to_deliver(h.statuslev, h.srt, (select publicatie_srt_ids($1::text[])))
	  and (h.tsreg, h.id) > (k.t, k.i)
)
select (select count(*) from held),
       (select count(distinct pers) from kern.his_persafgeleidadministrati where admhnd in (select id from held))
