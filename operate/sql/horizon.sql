-- The margin, its bounds, and the oldest open transaction that holds the publisher's horizon
-- (publicatie_horizon, migration 0015), which the publisher reads too, with whether it is a
-- bulk writer (migration 0018: it holds the horizon until it ends); and the open writers:
-- transactions that linked handelingen to persons and hold those persons' work back, how many
-- persons, and the age of the oldest.
with writer as (
    select l.pid, l.classid, l.objid from pg_locks l
    where l.locktype = 'advisory' and l.classid in (7345003, 7345004) and l.objsubid = 2
      and l.database = (select oid from pg_database where datname = current_database())
)
select extract(epoch from v.margin)::float8, extract(epoch from v.max_lead)::float8, extract(epoch from v.max_wait)::float8,
       h.pid, h.application_name, h.state, h.wait_event, h.age_seconds, h.registers,
       coalesce(h.pid in (select pid from writer where classid = 7345004), false),
       (select count(distinct pid) from writer),
       (select count(distinct objid) from writer where classid = 7345003),
       coalesce((select extract(epoch from clock_timestamp() - min(s.xact_start))::float8 from publicatie_sessions() s
                 where s.pid in (select pid from writer)), 0)
from publicatie_state v
left join lateral (select * from publicatie_horizon where holds order by xact_start limit 1) h on true
