-- Empties publicatie_fout_changes (migration 0014) and returns, for each handeling recorded,
-- whether it is an unreleased fout handeling now, with its persons. Records another
-- transaction holds are skipped: they stay for a later round.
with d as (
    delete from publicatie_fout_changes
    where admhnd_id in (select admhnd_id from publicatie_fout_changes for update skip locked)
    returning admhnd_id
)
select d.admhnd_id, coalesce(publicatie_unreleased_fout(a.statuslev, a.vrijgegeven), false), p.persoon_id
from d left join admhnd a on a.id = d.admhnd_id
left join lateral (select distinct persoon_id from admhnd_persoon where admhnd_id = d.admhnd_id offset 0) p on true
order by 1, 3
