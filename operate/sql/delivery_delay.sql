-- Count, median and 99th percentile of registration to delivery (tslev - tsreg, a tsreg after
-- its tslev counting 0) of the handelingen delivered in the last $1 seconds, through the index
-- on tslev of the delivered ones (migration 0005).
select count(*), percentile_cont(0.5) within group (order by delay), percentile_cont(0.99) within group (order by delay)
from (
    select greatest(0, extract(epoch from tslev - tsreg))::float8 as delay
    from admhnd
    where statuslev = 'geleverd' and tslev > now() - make_interval(secs => $1)
) d
