-- Records that the given handelingen in levering ($1) are published again now, and returns
-- those still in levering. A row another session has locked (a consumer delivering it) is
-- left alone: the round never waits for a consumer.
update admhnd set tspub = now()
where id in (
    select id from admhnd where id = any($1) and statuslev = 'in_levering'
    for update skip locked)
returning id
