-- holds.sql on the kern layout: every unreleased fout handeling with its persons (status 5
-- from brp_levering_fout_idx, released ones in admhnd_levering).
-- (publicatie_unreleased_fout written out: the released ones are one hashed set, whatever the
-- statistics of admhnd_levering, which churns, say.)
select f.id, true, p.persoon_id
from (
    select a.id from kern.admhnd a
    where a.statuslev = 5
      and a.id not in (select l.admhnd_id from admhnd_levering l where l.vrijgegeven is not null)
) f
left join lateral (
    select distinct pers as persoon_id from kern.his_persafgeleidadministrati where admhnd = f.id offset 0) p on true
order by f.id, p.persoon_id
