-- refuse_odd_tsreg.sql on the kern layout: sets fout (5), with the reason $1 in
-- admhnd_levering, the handelingen still to be delivered ($2: the excluded soorten by naam)
-- whose tsreg lies outside the accepted range, and returns their ids.
with f as (
    update kern.admhnd set statuslev = 5
    where publicatie_to_deliver(statuslev, srt, (select publicatie_srt_ids($2::text[])))
      and not publicatie_tsreg_accepted(tsreg)
    returning id
), r as (
    insert into admhnd_levering (admhnd_id, foutreden) select id, $1::text from f
    on conflict (admhnd_id) do update set foutreden = excluded.foutreden
)
select id from f
