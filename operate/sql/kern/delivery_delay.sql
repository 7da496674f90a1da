-- delivery_delay.sql on the kern layout: count, median and 99th percentile of registration to
-- delivery of the handelingen delivered (4) in the last $1 seconds, through kern's plain index
-- on tslev.
select count(*), percentile_cont(0.5) within group (order by delay), percentile_cont(0.99) within group (order by delay)
from (
    select greatest(0, extract(epoch from tslev - tsreg))::float8 as delay
    from kern.admhnd
    where statuslev = 4 and tslev > now() - make_interval(secs => $1)
) d
