-- The oldest handeling not yet delivered ($1: the excluded soorten) of those not registered in
-- the future: the lesser of the first entry of the index of open work and the first in
-- levering.
select id, soort, publicatie_tsreg_shown(tsreg), extract(epoch from now() - publicatie_tsreg_shown(tsreg))::float8,
       coalesce(statuslev::text, '')
from (
    (select id, soort, tsreg, statuslev from admhnd
     where publicatie_to_deliver(statuslev, soort, $1::text[]) and tsreg <= now() order by tsreg, id limit 1)
    union all
    (select id, soort, tsreg, statuslev from admhnd
     where statuslev = 'in_levering' and tsreg <= now() order by tsreg, id limit 1)
) o
order by tsreg, id limit 1
