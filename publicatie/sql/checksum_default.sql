-- checksum.sql for the default exclusion, its soort written in (an index-only scan of
-- admhnd_te_leveren_zonder_iv_idx).
select count(*), coalesce(bit_xor(a.id), 0),
       (select coalesce(array_agg(p.admhnd_id), '{}') from (
            select admhnd_id from publicatie_nakomer union select admhnd_id from publicatie_fout_changes) p)
from admhnd a
where publicatie_to_deliver(a.statuslev, a.soort, '{GBA_INITIELE_VULLING}'::text[]) and (a.tsreg, a.id) <= ($1::timestamptz, $2::bigint)
  and publicatie_tsreg_accepted(a.tsreg)
  and not exists (select from publicatie_nakomer n where n.admhnd_id = a.id)
  and not exists (select from publicatie_fout_changes f where f.admhnd_id = a.id)
