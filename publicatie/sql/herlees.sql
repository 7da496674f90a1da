-- Empties publicatie_herlees and returns its oldest record, the leads recorded with
-- publicatie_nakomer's handelingen, and the sampled leads it empties from
-- publicatie_lead_samples.
with d as (delete from publicatie_herlees returning tsreg, admhnd_id),
s as (delete from publicatie_lead_samples returning lead)
select o.tsreg, o.admhnd_id,
    coalesce((select array_agg(extract(epoch from voorsprong)::float8) from publicatie_nakomer where voorsprong is not null), '{}'),
    coalesce((select array_agg(extract(epoch from lead)::float8) from s), '{}')
from (select 1) x left join lateral (select tsreg, admhnd_id from d order by tsreg, admhnd_id limit 1) o on true
