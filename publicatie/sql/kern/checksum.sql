-- checksum.sql on the kern layout: count and xor of the ids of the handelingen still to be
-- delivered ($3: the excluded soorten by naam) up to the stand ($1, $2), for the sweep.
select count(*), coalesce(bit_xor(id), 0) from kern.admhnd
where publicatie_to_deliver(statuslev, srt, (select publicatie_srt_ids($3::text[])))
  and (tsreg, id) <= ($1::timestamptz, $2::bigint)
  and publicatie_tsreg_accepted(tsreg)
