-- first_future.sql on the kern layout: the earliest handeling still to be delivered ($1: the
-- excluded soorten by naam) registered more than $2 seconds in the future, its soort by naam.
select f.id, s.naam::text, publicatie_tsreg_shown(f.tsreg), extract(epoch from publicatie_tsreg_shown(f.tsreg) - now())::float8
from (
    select id, srt, tsreg from kern.admhnd
    where publicatie_to_deliver(statuslev, srt, (select publicatie_srt_ids($1::text[])))
      and tsreg > now() + make_interval(secs => $2)
    order by tsreg, id limit 1
) f join kern.srtadmhnd s on s.id = f.srt
