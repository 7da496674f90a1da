-- Every unreleased fout handeling with its persons: what a new view's holds start from.
select f.id, true, p.persoon_id
from (select id from admhnd where publicatie_unreleased_fout(statuslev, vrijgegeven)) f
left join lateral (select distinct persoon_id from admhnd_persoon where admhnd_id = f.id offset 0) p on true
order by f.id, p.persoon_id
