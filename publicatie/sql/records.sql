-- The records the round reads before its intake, emptied in one statement (on a busy machine
-- every round trip of a round costs milliseconds, docs/performance.md):
--  * publicatie_herlees: its oldest record (registered behind the stand?);
--  * the leads recorded with publicatie_nakomer's handelingen and where they came from (read,
--    not emptied: the intake empties publicatie_nakomer), and the sampled leads and theirs,
--    emptied from publicatie_lead_samples. Each pair of arrays is aggregated in one query
--    level, so their elements correspond;
--  * the handelingen of publicatie_laat_personen (persons added to a handeling after it was
--    delivered, migration 0011) and of migration 0009's publicatie_ingehaald, emptied.
-- A data-modifying WITH runs to its end whether the query reads it or not.
with d as (delete from publicatie_herlees returning tsreg, admhnd_id),
s as (delete from publicatie_lead_samples returning lead, source),
lp as (delete from publicatie_laat_personen returning admhnd_id),
ing as (delete from publicatie_ingehaald returning admhnd_id)
select o.tsreg, o.admhnd_id,
    coalesce(l.leads, '{}'), coalesce(l.sources, '{}'), coalesce(m.leads, '{}'), coalesce(m.sources, '{}'),
    array(select admhnd_id from lp union select admhnd_id from ing order by 1)
from (select 1) x
left join lateral (select tsreg, admhnd_id from d order by tsreg, admhnd_id limit 1) o on true
cross join (
    select array_agg(extract(epoch from voorsprong)::float8) as leads, array_agg(coalesce(bron, '')) as sources
    from publicatie_nakomer where voorsprong is not null) l
cross join (
    select array_agg(extract(epoch from lead)::float8) as leads, array_agg(coalesce(source, '')) as sources
    from s) m
