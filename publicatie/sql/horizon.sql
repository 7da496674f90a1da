-- The horizon and publicatie_state, read together (readHorizon). A transaction begun before
-- high_margin_until (a lowering of the margin committed after it began) may have compared its
-- leads with the higher margin (high_margin), which holds it back. high_margin_until 'infinity'
-- says a lowering committed that no round has dated yet: every transaction is held back by
-- high_margin until the round sets it. publicatie_horizon (migrations 0015, 0018) says which transactions hold it.
select least(clock_timestamp(), o.start) - case when o.start < v.high_margin_until then greatest(v.margin, v.high_margin) else v.margin end,
    extract(epoch from v.margin)::float8, extract(epoch from v.max_lead)::float8,
    extract(epoch from case when o.start < v.high_margin_until then greatest(v.margin, v.high_margin) else v.margin end)::float8,
    extract(epoch from v.max_wait)::float8, v.high_margin_until = 'infinity', v.lead_sample_rate,
    greatest(extract(epoch from v.lead_sample_until) - extract(epoch from clock_timestamp()), 0)::float8,
    v.sleeping, coalesce(o.start < now(), false),
    extract(epoch from clock_timestamp() - least(clock_timestamp(), o.start)
        + case when o.start < v.high_margin_until then greatest(v.margin, v.high_margin) else v.margin end)::float8,
    extract(epoch from clock_timestamp() - o.start)::float8,
    o.persons, o.transactions, o.oldest
from (
    -- The open writers (migration 0018): the service's advisory locks, read once, before the
    -- round's intake, and only while another transaction is open (h): one the read of the
    -- sessions missed began after it, so what it registers within the margin lies after this
    -- horizon and its persons need no holding back yet (migration 0023). The persons' keys,
    -- the transactions, and the oldest one's age.
    with h as materialized (
        select pid, xact_start, holds from publicatie_horizon
    ), l as materialized (
        select pid, classid, objid from pg_locks
        where exists (select from h) and locktype = 'advisory' and classid in (7345003, 7345004) and objsubid = 2
          and database = (select oid from pg_database where datname = current_database())
    )
    select (select min(xact_start) from h where holds) as start,
           array(select distinct objid::int8 from l where classid = 7345003) as persons,
           (select count(distinct pid) from l) as transactions,
           coalesce((select extract(epoch from clock_timestamp() - min(xact_start))::float8
                     from h where pid in (select pid from l)), 0) as oldest
) o cross join (
    select coalesce(max(margin), '0') as margin, coalesce(max(max_lead), '0') as max_lead,
        coalesce(max(high_margin), '0') as high_margin, coalesce(max(high_margin_until), '-infinity') as high_margin_until,
        coalesce(max(max_wait), '2 s') as max_wait, coalesce(max(lead_sample_rate), 0) as lead_sample_rate,
        coalesce(max(lead_sample_until), '-infinity') as lead_sample_until,
        coalesce(bool_or(sleeping), true) as sleeping
    from publicatie_state
) v
