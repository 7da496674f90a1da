-- checksum.sql on the kern layout for the default exclusion, soort 37 written in (an index-only
-- scan of brp_levering_te_leveren_idx).
select count(*), coalesce(bit_xor(a.id), 0),
       (select coalesce(array_agg(p.admhnd_id), '{}') from (
            select admhnd_id from publicatie_nakomer union select admhnd_id from publicatie_fout_changes) p)
from kern.admhnd a
where publicatie_to_deliver(a.statuslev, a.srt, '{37}') and (a.tsreg, a.id) <= ($1::timestamptz, $2::bigint)
  and publicatie_tsreg_accepted(a.tsreg)
  and not exists (select from publicatie_nakomer n where n.admhnd_id = a.id)
  and not exists (select from publicatie_fout_changes f where f.admhnd_id = a.id)
