-- show.sql on the kern layout: handeling $1 with its soort by naam, its persons, foutreden and
-- release (admhnd_levering) and status by name.
select a.id, s.naam::text, publicatie_tsreg_shown(a.tsreg), coalesce(l.foutreden, ''), l.vrijgegeven,
       coalesce(publicatie_status_name(a.statuslev), ''),
       array(select distinct pers from kern.his_persafgeleidadministrati where admhnd = a.id order by pers)
from kern.admhnd a
join kern.srtadmhnd s on s.id = a.srt
left join admhnd_levering l on l.admhnd_id = a.id
where a.id = $1
