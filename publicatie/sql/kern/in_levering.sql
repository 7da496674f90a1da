-- in_levering.sql on the kern layout: how many handelingen are in levering (3) (the first
-- column of every row), and up to $2 of them in levering for longer than $1 seconds (tspub in
-- admhnd_levering; none counts as long ago) with every handeling in levering that shares a
-- person with one of them, directly or through others, one row per person; with none of
-- those, one row with the count and no handeling.
-- The handelingen in levering are read whole through kern's index of status 3 (a few
-- thousand at most, MAXINLEVERING), then sorted: in (tsreg) order through ix_admhnd_tsreg
-- the planner would walk every handeling to find none stale. Those published recently are
-- one hashed set (NOT IN a subquery is planned as a hash, whatever the statistics of
-- admhnd_levering say: it churns, and as a join it was scanned once for every handeling).
with recursive o as materialized (
    select a.id, a.tsreg from kern.admhnd a where a.statuslev = 3
), s as (
    select o.id from o
    where o.id not in (
        select l.admhnd_id from admhnd_levering l where l.tspub >= now() - make_interval(secs => $1))
    order by o.tsreg, o.id
    limit $2
), c(id) as (
    select id from s
    union
    select op.admhnd
    from c join kern.his_persafgeleidadministrati cp on cp.admhnd = c.id
    join kern.his_persafgeleidadministrati op on op.pers = cp.pers and op.admhnd <> c.id
    join kern.admhnd a on a.id = op.admhnd and a.statuslev = 3
)
select (select count(*) from o), c.id, p.persoon_id
from (select 1) x left join (c join kern.admhnd a on a.id = c.id left join lateral (
    select distinct pers as persoon_id from kern.his_persafgeleidadministrati where admhnd = c.id) p on true) on true
order by a.tsreg, a.id, p.persoon_id
