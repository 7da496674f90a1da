-- Takes a key share lock, without waiting, on the newer handelingen in levering ($1) that
-- check.sql found outside the batch, and returns the status of those it locked, as of now. A
-- row it locked no other consumer can deliver until this transaction ends (their lock.sql
-- waits for it); one it skipped another consumer is delivering right now.
select id, statuslev::text from admhnd where id = any($1) order by id for key share skip locked
