-- The horizon and publicatie_toestand, read together (readHorizon). A transaction begun
-- before hoog_tot (a lowering of the margin committed after it began) may have compared its
-- leads with the higher margin (hoog), which holds it back. hoog_tot 'infinity' says a
-- lowering committed that no round has dated yet: every transaction is held back by hoog until
-- the round sets it. publicatie_horizon (migrations 0015, 0018) says which transactions hold it.
select least(clock_timestamp(), o.start) - case when o.start < v.hoog_tot then greatest(v.marge, v.hoog) else v.marge end,
    extract(epoch from v.marge)::float8, extract(epoch from v.grens)::float8,
    extract(epoch from case when o.start < v.hoog_tot then greatest(v.marge, v.hoog) else v.marge end)::float8,
    extract(epoch from v.max_wait)::float8, v.hoog_tot = 'infinity', v.lead_sample_rate,
    greatest(extract(epoch from v.lead_sample_until) - extract(epoch from clock_timestamp()), 0)::float8,
    v.slaapt, coalesce(o.start < now(), false),
    extract(epoch from clock_timestamp() - least(clock_timestamp(), o.start)
        + case when o.start < v.hoog_tot then greatest(v.marge, v.hoog) else v.marge end)::float8,
    extract(epoch from clock_timestamp() - o.start)::float8,
    w.persons, w.transactions, w.oldest
from (
    select min(xact_start) as start from publicatie_horizon where holds
) o cross join (
    -- The persons open transactions are linking handelingen to now (migration 0018), as lock
    -- keys, read before the round's intake; how many transactions hold such locks (or the
    -- bulk writer's) and the age of the oldest.
    select array(select distinct l.objid::int8 from pg_locks l
                 where l.locktype = 'advisory' and l.classid = 7345003 and l.objsubid = 2 and l.database = d.oid) as persons,
           (select count(distinct l.pid) from pg_locks l
            where l.locktype = 'advisory' and l.classid in (7345003, 7345004) and l.objsubid = 2 and l.database = d.oid) as transactions,
           coalesce((select extract(epoch from clock_timestamp() - min(s.xact_start))::float8 from publicatie_sessions() s
                     where s.pid in (select l.pid from pg_locks l
                                     where l.locktype = 'advisory' and l.classid in (7345003, 7345004) and l.objsubid = 2
                                       and l.database = d.oid)), 0) as oldest
    from pg_database d where d.datname = current_database()
) w cross join (
    select coalesce(max(marge), '0') as marge, coalesce(max(grens), '0') as grens,
        coalesce(max(hoog), '0') as hoog, coalesce(max(hoog_tot), '-infinity') as hoog_tot,
        coalesce(max(max_wait), '2 s') as max_wait, coalesce(max(lead_sample_rate), 0) as lead_sample_rate,
        coalesce(max(lead_sample_until), '-infinity') as lead_sample_until,
        coalesce(bool_or(slaapt), true) as slaapt
    from publicatie_toestand
) v
