-- Up to $1 fout handelingen, released or not, newest (tsreg, id) first, with their persons.
select a.id, a.soort, publicatie_tsreg_shown(a.tsreg), coalesce(a.foutreden, ''), a.vrijgegeven,
       array(select distinct persoon_id from admhnd_persoon where admhnd_id = a.id order by persoon_id)
from admhnd a
where a.statuslev = 'fout'
order by a.tsreg desc, a.id desc
limit $1
