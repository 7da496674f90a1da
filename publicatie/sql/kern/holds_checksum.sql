-- holds_checksum.sql on the kern layout: count and xor of the ids of the unreleased fout
-- handelingen, for the sweep, but those recorded in publicatie_fout_changes, which it returns.
-- (publicatie_unreleased_fout written out, as in holds.sql.)
select count(*), coalesce(bit_xor(a.id), 0),
       (select coalesce(array_agg(admhnd_id), '{}') from publicatie_fout_changes)
from kern.admhnd a
where a.statuslev = 5
  and a.id not in (select l.admhnd_id from admhnd_levering l where l.vrijgegeven is not null)
  and not exists (select from publicatie_fout_changes f where f.admhnd_id = a.id)
