-- Writes what the consumer decided, on rows it holds locked and read in levering: nothing else
-- can change them, so no status is tested again (a test of statuslev here would let the
-- planner read every handeling in levering through their index for each batch). It sets
-- geleverd ($1, returning their tslev), fout with a reason ($2, $3: the reason of $2[i] is
-- $3[i]), back to be delivered ($4: the update fires admhnd_teruggezet of migration 0007, so
-- the publisher takes them back before anything newer of their persons), and records ($5) the
-- older handelingen still to be delivered that held one back, for the publisher, whose view
-- may lack them (registered late); and it removes the levering_onderweg records of those now
-- geleverd ($1, and $6: found geleverd already). Each status is assigned as a bare literal:
-- bijhouding's statuslev may be an enum.
with f as (
    update admhnd set statuslev = 'fout', foutreden = ($3::text[])[array_position($2::bigint[], id)]
    where id = any($2)
    returning id
), h as (
    update admhnd set statuslev = null, tslev = null where id = any($4)
    returning id
), n as (
    insert into publicatie_nakomer (admhnd_id) select x from unnest($5::bigint[]) as x order by x
    on conflict (admhnd_id) do nothing
    returning admhnd_id
), o as (
    delete from levering_onderweg where admhnd_id = any($1) or admhnd_id = any($6)
    returning admhnd_id
)
update admhnd set statuslev = 'geleverd', tslev = now() where id = any($1)
returning id, tslev
