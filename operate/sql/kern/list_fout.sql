-- list_fout.sql on the kern layout: up to $1 fout (5) handelingen, released or not, newest
-- (tsreg, id) first, with their soort by naam, foutreden and release from admhnd_levering, and
-- their persons.
select a.id, s.naam::text, publicatie_tsreg_shown(a.tsreg), coalesce(l.foutreden, ''), l.vrijgegeven,
       array(select distinct pers from kern.his_persafgeleidadministrati where admhnd = a.id order by pers)
from kern.admhnd a
join kern.srtadmhnd s on s.id = a.srt
left join admhnd_levering l on l.admhnd_id = a.id
where a.statuslev = 5
order by a.tsreg desc, a.id desc
limit $1
