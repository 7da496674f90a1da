-- The Counts ($1: the excluded soorten, $2: FutureSkew in seconds, $3: also the geleverd
-- count). The oldest age is the lesser of two minima: the first entry of the index of open
-- work (ordered by tsreg) and the few in levering (a min over their union was planned as a
-- bitmap of the whole index of open work). It leaves out the handelingen registered in the
-- future: their age would be negative, and an ageing alert on the oldest could never fire. The
-- geleverd count is the one exact count over the delivered history, a sequential scan of
-- admhnd: evaluated only when $3 asks for it.
select now(),
    (select count(*) from admhnd where publicatie_to_deliver(statuslev, soort, $1::text[])),
    (select count(*) from admhnd where statuslev = 'in_levering'),
    (select count(*) from admhnd where statuslev = 'fout'),
    (select count(*) from admhnd where publicatie_unreleased_fout(statuslev, vrijgegeven)),
    coalesce(extract(epoch from now() - least(
        (select min(tsreg) from admhnd where publicatie_to_deliver(statuslev, soort, $1::text[]) and tsreg <= now()),
        (select min(tsreg) from admhnd where statuslev = 'in_levering' and tsreg <= now())
    ))::float8, 0),
    (select count(*) from admhnd where publicatie_to_deliver(statuslev, soort, $1::text[]) and tsreg > now() + make_interval(secs => $2)),
    case when $3 then (select count(*) from admhnd where statuslev = 'geleverd') else -1 end
