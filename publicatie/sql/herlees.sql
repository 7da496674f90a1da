-- Empties publicatie_herlees and returns its oldest record, the leads recorded with
-- publicatie_nakomer's handelingen and where they came from, and the sampled leads and theirs,
-- which it empties from publicatie_lead_samples. Each pair of arrays is aggregated in one
-- query level, so their elements correspond.
with d as (delete from publicatie_herlees returning tsreg, admhnd_id),
s as (delete from publicatie_lead_samples returning lead, source)
select o.tsreg, o.admhnd_id,
    coalesce(l.leads, '{}'), coalesce(l.sources, '{}'), coalesce(m.leads, '{}'), coalesce(m.sources, '{}')
from (select 1) x
left join lateral (select tsreg, admhnd_id from d order by tsreg, admhnd_id limit 1) o on true
cross join (
    select array_agg(extract(epoch from voorsprong)::float8) as leads, array_agg(coalesce(bron, '')) as sources
    from publicatie_nakomer where voorsprong is not null) l
cross join (
    select array_agg(extract(epoch from lead)::float8) as leads, array_agg(coalesce(source, '')) as sources
    from s) m
