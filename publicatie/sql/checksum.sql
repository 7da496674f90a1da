-- Count and xor of the ids of the handelingen still to be delivered ($3: the excluded soorten)
-- up to the stand ($1, $2), for the sweep.
select count(*), coalesce(bit_xor(id), 0) from admhnd
where publicatie_to_deliver(statuslev, soort, $3::text[]) and (tsreg, id) <= ($1::timestamptz, $2::bigint)
  and publicatie_tsreg_accepted(tsreg)
