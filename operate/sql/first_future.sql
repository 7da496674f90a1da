-- The earliest handeling still to be delivered ($1: the excluded soorten) registered more than
-- $2 seconds in the future: the first entry of the index of open work after that.
select id, soort, publicatie_tsreg_shown(tsreg), extract(epoch from publicatie_tsreg_shown(tsreg) - now())::float8
from admhnd where publicatie_to_deliver(statuslev, soort, $1::text[]) and tsreg > now() + make_interval(secs => $2)
order by tsreg, id limit 1
