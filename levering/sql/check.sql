-- Reads, after lock.sql, what the consumer needs to decide on the handelingen of a batch ($1).
-- Kind 'b', one row per handeling of the batch: its soort, its place in delivery order, its
-- status, whether an operator released it, its persons, and whether levering_onderweg records
-- it. Kind 'h', one row per person and handeling: the other handelingen of those persons that
-- may bear on them, of a soort not excluded ($2), and still to be delivered, in levering,
-- geleverd, or ($3: the strict policy) fout and not released; of those only what can bear on a
-- handeling of the batch: open ones older than the person's newest in the batch, all those in
-- levering, geleverd ones newer than the person's oldest in the batch. Go works out the rest
-- (relate): comparing there is cheaper than aggregates and correlated subqueries here. Each
-- person's handelingen are read once (admhnd_persoon by persoon_id, then admhnd by id): the
-- cost grows with the handelingen each person has, not with the table. The batch's own
-- handelingen come back as 'h' rows too, and relate leaves them out: a filter "<> all($1)"
-- here would be evaluated against the array for every handeling of the person in the generic
-- plan.
--
-- The place in delivery order is (tsreg, id), where a tsreg outside the accepted range sorts
-- as its end of it: all below it alike, all above it alike (k, as handeling.Place.Compare in Go sorts).
-- Each row returns which end its tsreg lies beyond (-1, 1; 0 inside) and the tsreg only if
-- inside (lib/pq reads no infinity).
--
-- Every table is read by index probes, forced (lateral subqueries the planner cannot flatten,
-- offset 0): the statement runs prepared, and a generic plan made while the tables were small
-- would read all of admhnd_persoon for every batch.
with b as (
    select a.* from unnest($1::bigint[]) as i(id) cross join lateral (
        select id, soort, tsreg, statuslev, vrijgegeven from admhnd where id = i.id offset 0) a
), bp as (
    select b.id, x.persoon_id from b cross join lateral (
        select persoon_id from admhnd_persoon where admhnd_id = b.id offset 0) x
), bk as (
    select bp.persoon_id, least(greatest(b.tsreg, publicatie_tsreg_from() - interval '1 day'), publicatie_tsreg_until()) as k, b.id
    from bp join b on b.id = bp.id
), pp as (
    select lo.persoon_id, lo.k as lo_k, lo.id as lo_id, hi.k as hi_k, hi.id as hi_id
    from (select distinct on (persoon_id) persoon_id, k, id from bk order by persoon_id, k, id) lo
    join (select distinct on (persoon_id) persoon_id, k, id from bk order by persoon_id, k desc, id desc) hi
      on hi.persoon_id = lo.persoon_id
), h as (
    select pp.persoon_id, h.* from pp
    cross join lateral (select admhnd_id from admhnd_persoon where persoon_id = pp.persoon_id offset 0) op
    cross join lateral (
        select id, soort, tsreg, statuslev, vrijgegeven from admhnd where id = op.admhnd_id offset 0) h
    where h.soort <> all($2::text[])
      and ((h.statuslev is null or publicatie_blocks(h.statuslev, h.vrijgegeven, $3))
            and (least(greatest(h.tsreg, publicatie_tsreg_from() - interval '1 day'), publicatie_tsreg_until()), h.id) < (pp.hi_k, pp.hi_id)
        or h.statuslev = 'in_levering'
        or h.statuslev = 'geleverd'
            and (least(greatest(h.tsreg, publicatie_tsreg_from() - interval '1 day'), publicatie_tsreg_until()), h.id) > (pp.lo_k, pp.lo_id))
)
select 'b', b.id, b.soort,
    case when b.tsreg < publicatie_tsreg_from() then -1 when b.tsreg >= publicatie_tsreg_until() then 1 else 0 end,
    case when publicatie_tsreg_accepted(b.tsreg) then b.tsreg end,
    b.statuslev::text, b.vrijgegeven is not null, coalesce(p.personen, '{}'),
    exists (select from levering_onderweg where admhnd_id = b.id)
from b left join (
    select id, array_agg(distinct persoon_id order by persoon_id) as personen from bp group by id) p on p.id = b.id
union all
select 'h', h.id, '',
    case when h.tsreg < publicatie_tsreg_from() then -1 when h.tsreg >= publicatie_tsreg_until() then 1 else 0 end,
    case when publicatie_tsreg_accepted(h.tsreg) then h.tsreg end,
    h.statuslev::text, h.vrijgegeven is not null, array[h.persoon_id],
    h.statuslev = 'in_levering' and exists (select from levering_onderweg where admhnd_id = h.id)
from h
