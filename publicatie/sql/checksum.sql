-- Count and xor of the ids of the handelingen still to be delivered ($3: the excluded soorten)
-- up to the stand ($1, $2), for the sweep, and in the same snapshot the handelingen recorded
-- since the round read the records (publicatie_nakomer, publicatie_fout_changes): left out of
-- the count, as the sweep leaves them out of the view's, which has not seen their change yet.
select count(*), coalesce(bit_xor(a.id), 0),
       (select coalesce(array_agg(p.admhnd_id), '{}') from (
            select admhnd_id from publicatie_nakomer union select admhnd_id from publicatie_fout_changes) p)
from admhnd a
where publicatie_to_deliver(a.statuslev, a.soort, $3::text[]) and (a.tsreg, a.id) <= ($1::timestamptz, $2::bigint)
  and publicatie_tsreg_accepted(a.tsreg)
  and not exists (select from publicatie_nakomer n where n.admhnd_id = a.id)
  and not exists (select from publicatie_fout_changes f where f.admhnd_id = a.id)
