-- hold_newer.sql on the kern layout: a key share lock, without waiting, on the newer
-- handelingen in levering ($1) that check.sql found outside the batch, and the status of those
-- it locked, as of now, by its name.
select id, publicatie_status_name(statuslev) from kern.admhnd where id = any($1) order by id for key share skip locked
