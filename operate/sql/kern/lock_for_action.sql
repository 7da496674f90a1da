-- lock_for_action.sql on the kern layout: handeling $1's status by name and whether it was
-- released (admhnd_levering), its kern.admhnd row locked.
select publicatie_status_name(a.statuslev), l.vrijgegeven is not null
from kern.admhnd a left join admhnd_levering l on l.admhnd_id = a.id
where a.id = $1
for update of a
