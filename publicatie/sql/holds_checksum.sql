-- Count and xor of the ids of the unreleased fout handelingen, for the sweep, but those whose
-- fout state changed since the round read the records (publicatie_fout_changes), which it
-- returns from the same snapshot: the sweep leaves them out of the view's count too.
select count(*), coalesce(bit_xor(a.id), 0),
       (select coalesce(array_agg(admhnd_id), '{}') from publicatie_fout_changes)
from admhnd a
where publicatie_unreleased_fout(a.statuslev, a.vrijgegeven)
  and not exists (select from publicatie_fout_changes f where f.admhnd_id = a.id)
