-- checksum.sql on the kern layout for the default exclusion, soort 37 written in (an index-only
-- scan of brp_levering_te_leveren_idx).
select count(*), coalesce(bit_xor(id), 0) from kern.admhnd
where publicatie_to_deliver(statuslev, srt, '{37}') and (tsreg, id) <= ($1::timestamptz, $2::bigint)
  and publicatie_tsreg_accepted(tsreg)
