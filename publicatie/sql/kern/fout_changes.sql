-- fout_changes.sql on the kern layout: empties publicatie_fout_changes and returns, for each
-- handeling recorded, whether it is an unreleased fout handeling now (status 5, not released
-- in admhnd_levering), with its persons. Records another transaction holds are skipped: they
-- stay for a later round.
with d as (
    delete from publicatie_fout_changes
    where admhnd_id in (select admhnd_id from publicatie_fout_changes for update skip locked)
    returning admhnd_id
)
select d.admhnd_id, coalesce(publicatie_unreleased_fout(a.statuslev, l.vrijgegeven), false), p.persoon_id
from d left join kern.admhnd a on a.id = d.admhnd_id
left join admhnd_levering l on l.admhnd_id = d.admhnd_id
left join lateral (
    select distinct pers as persoon_id from kern.his_persafgeleidadministrati where admhnd = d.admhnd_id offset 0) p on true
order by 1, 3
