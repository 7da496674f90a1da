-- Up to $3 persons held up now, longest-blocked first, with the handeling that holds each
-- back (publicatie_blocks: in levering, or under the strict policy, $2, an unreleased fout)
-- and how many of theirs wait ($1: the excluded soorten), and the total. The blocking
-- handelingen are few (at most MAXINLEVERING plus the fout ones, read through the partial
-- indexes on both statuses); each person's waiting ones are counted through admhnd_persoon's
-- persoon index.
with blocking as (
    select id, tsreg, statuslev, foutreden, tspub from admhnd where publicatie_blocks(statuslev, vrijgegeven, $2)
), per_person as (
    select distinct on (p.persoon_id) p.persoon_id, b.id, b.tsreg, b.statuslev,
           coalesce(b.foutreden, '') as foutreden,
           coalesce(extract(epoch from now() - b.tspub)::float8, -1) as since
    from blocking b join admhnd_persoon p on p.admhnd_id = b.id
    order by p.persoon_id, b.tsreg, b.id
)
select pp.persoon_id, pp.id, pp.statuslev, pp.foutreden, pp.since, w.n, count(*) over ()
from per_person pp
cross join lateral (
    select count(distinct w.id) as n
    from admhnd_persoon wp join admhnd w on w.id = wp.admhnd_id
    where wp.persoon_id = pp.persoon_id and publicatie_to_deliver(w.statuslev, w.soort, $1::text[])
) w
where w.n > 0
order by pp.tsreg, pp.id, pp.persoon_id
limit $3
