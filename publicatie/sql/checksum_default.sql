-- checksum.sql for the default exclusion, its soort written in (an index-only scan of
-- admhnd_te_leveren_zonder_iv_idx).
select count(*), coalesce(bit_xor(id), 0) from admhnd
where publicatie_to_deliver(statuslev, soort, '{GBA_INITIELE_VULLING}'::text[]) and (tsreg, id) <= ($1::timestamptz, $2::bigint)
  and publicatie_tsreg_accepted(tsreg)
