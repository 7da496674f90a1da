-- The margin, its bounds, and the oldest open transaction that holds the publisher's horizon
-- (publicatie_horizon, migration 0015), which the publisher reads too.
select extract(epoch from v.marge)::float8, extract(epoch from v.grens)::float8, extract(epoch from v.max_wait)::float8,
       h.pid, h.application_name, h.state, h.wait_event, h.age_seconds, h.registers
from publicatie_toestand v
left join lateral (select * from publicatie_horizon where holds order by xact_start limit 1) h on true
