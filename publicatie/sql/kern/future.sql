-- future.sql on the kern layout: up to $2 handelingen still to be delivered ($1: the excluded
-- soorten by naam) registered more than $3 seconds in the future, earliest first.
select id, tsreg, extract(epoch from tsreg - now())::float8 from kern.admhnd
where publicatie_to_deliver(statuslev, srt, (select publicatie_srt_ids($1::text[])))
  and tsreg > now() + make_interval(secs => $3)
  and publicatie_tsreg_accepted(tsreg)
order by tsreg, id
limit $2
