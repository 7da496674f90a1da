-- Deliveries per minute of the last 10 minutes, by minutes ago (0 to 9), through the index on
-- tslev of the delivered ones (migration 0005): it reads the window only.
select least(9, greatest(0, floor(extract(epoch from now() - tslev) / 60)))::int, count(*)
from admhnd
where statuslev = 'geleverd' and tslev > now() - interval '10 minutes'
group by 1
