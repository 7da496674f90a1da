-- check.sql on the kern layout: what the consumer needs to decide on the handelingen of a batch
-- ($1), as check.sql of the contract layout reads it: 'b' rows for the batch (the soort by its
-- naam, the status by its name, released from admhnd_levering), 'h' rows for the other
-- handelingen of its persons that may bear on them, of a soort not excluded ($2, by naam) and
-- still to be delivered (1), in levering (3), geleverd (4), or ($3: the strict policy) fout (5)
-- and not released. A handeling's persons are the pers of all its his rows, ended ones
-- included; a person's handelingen are read from the his index brp_levering_his_pers_idx
-- (pers, admhnd), without visiting his rows (schema/kern/0002). Released
-- (admhnd_levering) is read for a fout one only: that table is small and churns (a row from
-- publication to delivery), so its statistics are often those of an empty table, and the
-- planner then scanned it whole for every row of every person's history.
with b as (
    select a.* from unnest($1::bigint[]) as i(id) cross join lateral (
        select a.id, s.naam as soort, a.tsreg, a.statuslev,
            case when a.statuslev = 5 then (select l.vrijgegeven from admhnd_levering l where l.admhnd_id = a.id) end as vrijgegeven
        from kern.admhnd a join kern.srtadmhnd s on s.id = a.srt
        where a.id = i.id offset 0) a
), bp as (
    select b.id, x.persoon_id from b cross join lateral (
        select pers as persoon_id from kern.his_persafgeleidadministrati where admhnd = b.id offset 0) x
), bk as (
    select bp.persoon_id, least(greatest(b.tsreg, publicatie_tsreg_from() - interval '1 day'), publicatie_tsreg_until()) as k, b.id
    from bp join b on b.id = bp.id
), pp as (
    select lo.persoon_id, lo.k as lo_k, lo.id as lo_id, hi.k as hi_k, hi.id as hi_id
    from (select distinct on (persoon_id) persoon_id, k, id from bk order by persoon_id, k, id) lo
    join (select distinct on (persoon_id) persoon_id, k, id from bk order by persoon_id, k desc, id desc) hi
      on hi.persoon_id = lo.persoon_id
), x as (
    select (select publicatie_srt_ids($2::text[])) as excluded
), h as (
    select pp.persoon_id, h.* from pp cross join x
    cross join lateral (select admhnd from kern.his_persafgeleidadministrati where pers = pp.persoon_id offset 0) op
    cross join lateral (
        select a.id, a.srt, a.tsreg, a.statuslev,
            case when a.statuslev = 5 then (select l.vrijgegeven from admhnd_levering l where l.admhnd_id = a.id) end as vrijgegeven
        from kern.admhnd a
        where a.id = op.admhnd offset 0) h
    where h.srt <> all(x.excluded)
      and ((h.statuslev = 1 or publicatie_blocks(h.statuslev, h.vrijgegeven, $3))
            and (least(greatest(h.tsreg, publicatie_tsreg_from() - interval '1 day'), publicatie_tsreg_until()), h.id) < (pp.hi_k, pp.hi_id)
        or h.statuslev = 3
        or h.statuslev = 4
            and (least(greatest(h.tsreg, publicatie_tsreg_from() - interval '1 day'), publicatie_tsreg_until()), h.id) > (pp.lo_k, pp.lo_id))
)
select 'b', b.id, b.soort,
    case when b.tsreg < publicatie_tsreg_from() then -1 when b.tsreg >= publicatie_tsreg_until() then 1 else 0 end,
    case when publicatie_tsreg_accepted(b.tsreg) then b.tsreg end,
    publicatie_status_name(b.statuslev), b.vrijgegeven is not null, coalesce(p.personen, '{}'),
    exists (select from levering_onderweg where admhnd_id = b.id)
from b left join (
    select id, array_agg(distinct persoon_id order by persoon_id) as personen from bp group by id) p on p.id = b.id
union all
select 'h', h.id, '',
    case when h.tsreg < publicatie_tsreg_from() then -1 when h.tsreg >= publicatie_tsreg_until() then 1 else 0 end,
    case when publicatie_tsreg_accepted(h.tsreg) then h.tsreg end,
    publicatie_status_name(h.statuslev), h.vrijgegeven is not null, array[h.persoon_id],
    h.statuslev = 3 and exists (select from levering_onderweg where admhnd_id = h.id)
from h
