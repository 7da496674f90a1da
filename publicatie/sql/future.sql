-- Up to $2 handelingen still to be delivered ($1: the excluded soorten) registered more than
-- $3 seconds in the future, earliest first: a range at the end of the index of open work.
select id, tsreg, extract(epoch from tsreg - now())::float8 from admhnd
where publicatie_to_deliver(statuslev, soort, $1::text[]) and tsreg > now() + make_interval(secs => $3)
  and publicatie_tsreg_accepted(tsreg)
order by tsreg, id
limit $2
