-- Handeling $1 with its persons, foutreden, release and status.
select a.id, a.soort, publicatie_tsreg_shown(a.tsreg), coalesce(a.foutreden, ''), a.vrijgegeven, coalesce(a.statuslev::text, ''),
       array(select distinct persoon_id from admhnd_persoon where admhnd_id = a.id order by persoon_id)
from admhnd a where a.id = $1
