-- mark.sql on the kern layout: sets the given handelingen ($1) in levering (3) where they are
-- still to be delivered (1), records when they were published in admhnd_levering, and returns
-- those it changed; a row another session has locked is skipped, not waited for. The test
-- "statuslev + 0 = 1" keeps the planner from finding the rows through the index of open work
-- (its predicate "statuslev = 1" would match), which with statistics taken while little was
-- open it did by scanning all open work (TestRoundFindsRowsByID). The row lock is "no key
-- update", the lock of the update itself: bijhouding adding persons (a foreign key's key
-- share) is not held up by it.
with m as (
    update kern.admhnd set statuslev = 3
    where id in (
        select id from kern.admhnd where id = any($1) and statuslev + 0 = 1
        for no key update skip locked)
    returning id
), t as (
    insert into admhnd_levering (admhnd_id, tspub) select id, now() from m
    on conflict (admhnd_id) do update set tspub = excluded.tspub
)
select id from m
