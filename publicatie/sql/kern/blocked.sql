-- blocked.sql on the kern layout: the persons blocked now apart from those a fout holds, of
-- the handelingen in levering (status 3), of those recorded in publicatie_nakomer, and ($1: the
-- strict policy) of those recorded in publicatie_fout_changes, one index probe per handeling.
select distinct p.persoon_id
from (
    select id from kern.admhnd
    where statuslev = 3
    union all
    select admhnd_id from publicatie_nakomer
    union all
    select admhnd_id from publicatie_fout_changes where $1
) a cross join lateral (
    select pers as persoon_id from kern.his_persafgeleidadministrati where admhnd = a.id offset 0) p
