-- blocked_persons.sql on the kern layout: up to $3 persons held up now, longest-blocked first,
-- with the handeling that holds each back (in levering 3, or under the strict policy, $2, a
-- fout 5 without a release in admhnd_levering, read through the partial indexes on both
-- codes), how many of theirs wait ($1: the excluded soorten by naam), and the total. A
-- person's handelingen are read through kern.his_persafgeleidadministrati's (pers) index.
with blocking as (
    select a.id, a.tsreg, a.statuslev, l.foutreden, l.tspub
    from kern.admhnd a left join admhnd_levering l on l.admhnd_id = a.id
    where (a.statuslev = 3 or a.statuslev = 5) and publicatie_blocks(a.statuslev, l.vrijgegeven, $2)
), per_person as (
    select distinct on (p.pers) p.pers as persoon_id, b.id, b.tsreg, publicatie_status_name(b.statuslev) as statuslev,
           coalesce(b.foutreden, '') as foutreden,
           coalesce(extract(epoch from now() - b.tspub)::float8, -1) as since
    from blocking b join kern.his_persafgeleidadministrati p on p.admhnd = b.id
    order by p.pers, b.tsreg, b.id
)
select pp.persoon_id, pp.id, pp.statuslev, pp.foutreden, pp.since, w.n, count(*) over ()
from per_person pp
cross join lateral (
    select count(distinct w.id) as n
    from kern.his_persafgeleidadministrati wp join kern.admhnd w on w.id = wp.admhnd
    where wp.pers = pp.persoon_id
      and publicatie_to_deliver(w.statuslev, w.srt, (select publicatie_srt_ids($1::text[])))
) w
where w.n > 0
order by pp.tsreg, pp.id, pp.persoon_id
limit $3
