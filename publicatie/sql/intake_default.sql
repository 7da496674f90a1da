-- intake.sql for the default exclusion, its soort written in: then the planner proves the
-- predicate of admhnd_te_leveren_zonder_iv_idx also in the prepared statement's generic plan
-- (with a parameter it sorted every candidate instead).
-- Takes in, from one snapshot, up to $4 handelingen after the stand ($2, $3) and before the
-- horizon ($1), oldest first, and the handelingen recorded in publicatie_nakomer (records.sql
-- emptied it) or left unmarked by the previous round ($5) up to the new stand: all still to be
-- delivered, each with all of its persons, ordered by (tsreg, id), nakomer marking the
-- recorded ones.
--
-- The persons and the recorded handelingen are read per handeling through lateral subqueries
-- the planner cannot flatten (offset 0): one index probe per handeling, whatever the
-- statistics say.
with m as (
    select distinct unnest($5::bigint[]) as admhnd_id
), c as (
    select id, tsreg from admhnd
    where publicatie_to_deliver(statuslev, soort, '{GBA_INITIELE_VULLING}'::text[]) and tsreg < $1 and (tsreg, id) > ($2::timestamptz, $3::bigint)
      and publicatie_tsreg_accepted(tsreg)
    order by tsreg, id
    limit $4
), s as (
    select coalesce(max(tsreg), $2::timestamptz) as tsreg,
           coalesce(max(id) filter (where tsreg = (select max(tsreg) from c)), $3::bigint) as id
    from c
), l as (
    select a.id, a.tsreg from m cross join lateral (
        select id, tsreg, statuslev, soort from admhnd where id = m.admhnd_id offset 0) a, s
    where publicatie_to_deliver(a.statuslev, a.soort, '{GBA_INITIELE_VULLING}'::text[]) and (a.tsreg, a.id) <= (s.tsreg, s.id)
      and publicatie_tsreg_accepted(a.tsreg)
), cl as (
    select id, tsreg, false as nakomer from c
    union all
    select id, tsreg, true from l
)
select cl.id, cl.tsreg, p.persoon_id, cl.nakomer
from cl left join lateral (
    select distinct persoon_id from admhnd_persoon where admhnd_id = cl.id offset 0) p on true
order by cl.tsreg, cl.id, cl.nakomer, p.persoon_id
