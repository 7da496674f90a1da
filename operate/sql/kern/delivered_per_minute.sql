-- delivered_per_minute.sql on the kern layout: deliveries per minute of the last 10 minutes,
-- by minutes ago (0 to 9), geleverd being 4, through kern's plain index on tslev.
select least(9, greatest(0, floor(extract(epoch from now() - tslev) / 60)))::int, count(*)
from kern.admhnd
where statuslev = 4 and tslev > now() - interval '10 minutes'
group by 1
