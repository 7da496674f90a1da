-- The handelingen in levering, read once a round: how many there are (the first column of
-- every row), and up to $2 of them in levering for longer than $1 seconds with every
-- handeling in levering that shares a person with one of them, directly or through others (a
-- group published earlier goes again whole, though the limit cut it), one row per person.
-- With none of those, one row with the count and no handeling. One statement: on a busy
-- machine every round trip of a round costs milliseconds (docs/performance.md).
with recursive n as (
    select count(*) as n from admhnd where statuslev = 'in_levering'
), s as (
    select id from admhnd
    where statuslev = 'in_levering' and coalesce(tspub, '-infinity') < now() - make_interval(secs => $1)
    order by tsreg, id
    limit $2
), c(id) as (
    select id from s
    union
    select op.admhnd_id
    from c join admhnd_persoon cp on cp.admhnd_id = c.id
    join admhnd_persoon op on op.persoon_id = cp.persoon_id and op.admhnd_id <> c.id
    join admhnd a on a.id = op.admhnd_id and a.statuslev = 'in_levering'
)
select n.n, c.id, p.persoon_id
from n left join (c join admhnd a on a.id = c.id left join lateral (
    select distinct persoon_id from admhnd_persoon where admhnd_id = c.id) p on true) on true
order by a.tsreg, a.id, p.persoon_id
