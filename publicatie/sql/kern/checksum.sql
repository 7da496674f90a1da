-- checksum.sql on the kern layout: count and xor of the ids of the handelingen still to be
-- delivered ($3: the excluded soorten by naam) up to the stand ($1, $2), for the sweep, but
-- those recorded since the round read the records, which it returns.
select count(*), coalesce(bit_xor(a.id), 0),
       (select coalesce(array_agg(p.admhnd_id), '{}') from (
            select admhnd_id from publicatie_nakomer union select admhnd_id from publicatie_fout_changes) p)
from kern.admhnd a
where publicatie_to_deliver(a.statuslev, a.srt, (select publicatie_srt_ids($3::text[])))
  and (a.tsreg, a.id) <= ($1::timestamptz, $2::bigint)
  and publicatie_tsreg_accepted(a.tsreg)
  and not exists (select from publicatie_nakomer n where n.admhnd_id = a.id)
  and not exists (select from publicatie_fout_changes f where f.admhnd_id = a.id)
