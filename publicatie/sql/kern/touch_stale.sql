-- touch_stale.sql on the kern layout: records in admhnd_levering that the given handelingen in
-- levering ($1) are published again now, and returns those still in levering. A row another
-- session has locked (a consumer delivering it) is left alone; the lock held until the round
-- commits is the one an update of statuslev takes, so a consumer waits for it as in the
-- contract layout.
with t as (
    select id from kern.admhnd where id = any($1) and statuslev = 3
    for no key update skip locked
), u as (
    insert into admhnd_levering (admhnd_id, tspub) select id, now() from t
    on conflict (admhnd_id) do update set tspub = excluded.tspub
)
select id from t
