-- intake.sql on the kern layout: takes in, from one snapshot, up to $4 handelingen after the
-- stand ($2, $3) and before the horizon ($1), oldest first, and the handelingen recorded in
-- publicatie_nakomer (records.sql emptied it) or left unmarked by the previous round ($5) up
-- to the new stand: all still to be delivered ($6: the excluded soorten by naam), each with all
-- of its persons (every his row of it, ended ones included), ordered by (tsreg, id), nakomer
-- marking the recorded ones. The open work is read from brp_levering_te_leveren_idx (tsreg, id);
-- see intake.sql of the contract layout for the rest.
with m as (
    select distinct unnest($5::bigint[]) as admhnd_id
), c as (
    select id, tsreg from kern.admhnd
    where publicatie_to_deliver(statuslev, srt, (select publicatie_srt_ids($6::text[])))
      and tsreg < $1 and (tsreg, id) > ($2::timestamptz, $3::bigint)
      and publicatie_tsreg_accepted(tsreg)
    order by tsreg, id
    limit $4
), s as (
    select coalesce(max(tsreg), $2::timestamptz) as tsreg,
           coalesce(max(id) filter (where tsreg = (select max(tsreg) from c)), $3::bigint) as id
    from c
), l as (
    select a.id, a.tsreg from m cross join lateral (
        select id, tsreg, statuslev, srt from kern.admhnd where id = m.admhnd_id offset 0) a, s
    where publicatie_to_deliver(a.statuslev, a.srt, (select publicatie_srt_ids($6::text[])))
      and (a.tsreg, a.id) <= (s.tsreg, s.id)
      and publicatie_tsreg_accepted(a.tsreg)
), cl as (
    select id, tsreg, false as nakomer from c
    union all
    select id, tsreg, true from l
)
select cl.id, cl.tsreg, p.persoon_id, cl.nakomer
from cl left join lateral (
    select distinct pers as persoon_id from kern.his_persafgeleidadministrati where admhnd = cl.id offset 0) p on true
order by cl.tsreg, cl.id, cl.nakomer, p.persoon_id
