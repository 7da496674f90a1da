-- The records the round reads before its intake, emptied in one statement (on a busy machine
-- every round trip of a round costs milliseconds, docs/performance.md):
--  * publicatie_herlees: its oldest record (registered behind the stand?);
--  * the handelingen recorded in publicatie_nakomer, emptied, which the intake takes in, and
--    the leads recorded with them and where they came from, and the sampled leads and theirs,
--    emptied from publicatie_lead_samples. Each pair of arrays is aggregated in one query
--    level, so their elements correspond. The round learns the lead of every record it empties:
--    a record committed after this statement stays for the next round, whose records read it
--    (when the intake emptied publicatie_nakomer itself, a record committed in between was
--    taken in without its lead). Rows another transaction holds are skipped (a trigger
--    recording a handeling already recorded updates its row until it commits): such a record
--    stays for a later round, and the round never waits for bijhouding or a consumer;
--  * the handelingen of publicatie_laat_personen (persons added to a handeling after it was
--    delivered, migration 0011) and of migration 0009's publicatie_ingehaald, emptied.
-- A data-modifying WITH runs to its end whether the query reads it or not.
with d as (delete from publicatie_herlees returning tsreg, admhnd_id),
n as (
    delete from publicatie_nakomer
    where admhnd_id in (select admhnd_id from publicatie_nakomer for update skip locked)
    returning admhnd_id, voorsprong, bron),
s as (delete from publicatie_lead_samples returning lead, source),
lp as (delete from publicatie_laat_personen returning admhnd_id),
ing as (delete from publicatie_ingehaald returning admhnd_id)
select o.tsreg, o.admhnd_id,
    array(select admhnd_id from n order by 1),
    coalesce(l.leads, '{}'), coalesce(l.sources, '{}'), coalesce(m.leads, '{}'), coalesce(m.sources, '{}'),
    array(select admhnd_id from lp union select admhnd_id from ing order by 1)
from (select 1) x
left join lateral (select tsreg, admhnd_id from d order by tsreg, admhnd_id limit 1) o on true
cross join (
    select array_agg(extract(epoch from voorsprong)::float8) as leads, array_agg(coalesce(bron, '')) as sources
    from n where voorsprong is not null) l
cross join (
    select array_agg(extract(epoch from lead)::float8) as leads, array_agg(coalesce(source, '')) as sources
    from s) m
