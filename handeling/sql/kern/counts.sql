-- counts.sql on the kern layout: the Counts ($1: the excluded soorten by naam, $2: FutureSkew
-- in seconds, $3: also the geleverd count) by kern's codes: in levering 3 and fout 5 through
-- their partial indexes, a release in admhnd_levering, geleverd 4 (the one sequential scan).
select now(),
    (select count(*) from kern.admhnd where publicatie_to_deliver(statuslev, srt, (select publicatie_srt_ids($1::text[])))),
    (select count(*) from kern.admhnd where statuslev = 3),
    (select count(*) from kern.admhnd where statuslev = 5),
    (select count(*) from kern.admhnd a left join admhnd_levering l on l.admhnd_id = a.id
     where publicatie_unreleased_fout(a.statuslev, l.vrijgegeven)),
    coalesce(extract(epoch from now() - least(
        (select min(tsreg) from kern.admhnd
         where publicatie_to_deliver(statuslev, srt, (select publicatie_srt_ids($1::text[]))) and tsreg <= now()),
        (select min(tsreg) from kern.admhnd where statuslev = 3 and tsreg <= now())
    ))::float8, 0),
    (select count(*) from kern.admhnd
     where publicatie_to_deliver(statuslev, srt, (select publicatie_srt_ids($1::text[])))
       and tsreg > now() + make_interval(secs => $2)),
    case when $3 then (select count(*) from kern.admhnd where statuslev = 4) else -1 end
