-- oldest_undelivered.sql on the kern layout: the oldest handeling not yet delivered ($1: the
-- excluded soorten by naam) of those not registered in the future, the lesser of the first
-- still to be delivered (1) and the first in levering (3), its soort by naam.
select o.id, s.naam::text, publicatie_tsreg_shown(o.tsreg), extract(epoch from now() - publicatie_tsreg_shown(o.tsreg))::float8,
       coalesce(publicatie_status_name(o.statuslev), '')
from (
    (select id, srt, tsreg, statuslev from kern.admhnd
     where publicatie_to_deliver(statuslev, srt, (select publicatie_srt_ids($1::text[]))) and tsreg <= now()
     order by tsreg, id limit 1)
    union all
    (select id, srt, tsreg, statuslev from kern.admhnd
     where statuslev = 3 and tsreg <= now() order by tsreg, id limit 1)
) o join kern.srtadmhnd s on s.id = o.srt
order by o.tsreg, o.id limit 1
