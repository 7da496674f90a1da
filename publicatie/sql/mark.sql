-- Sets the given handelingen ($1) in levering where they are still to be delivered, and
-- returns those it changed; a row another session has locked is skipped, not waited for. It
-- finds its rows by id, never through the index of open work: it tests for a NULL status as a
-- coalesce with the empty string (the check constraint allows no empty status), a form that
-- index's predicate cannot match. With "statuslev is null" written out, statistics taken while
-- little was open made the planner scan all open work for the ids, every round
-- (TestRoundFindsRowsByID).
update admhnd set statuslev = 'in_levering', tspub = now()
where id in (
    select id from admhnd where id = any($1) and coalesce(statuslev::text, '') = ''
    for update skip locked)
returning id
