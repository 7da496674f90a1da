-- release.sql on the kern layout: an operator's release of fout handeling $1, recorded in
-- admhnd_levering (kern.admhnd has no column for it).
insert into admhnd_levering (admhnd_id, vrijgegeven) values ($1, now())
on conflict (admhnd_id) do update set vrijgegeven = excluded.vrijgegeven
