-- apply.sql on the kern layout: writes what the consumer decided, on rows it holds locked and
-- read in levering (see apply.sql of the contract layout). It sets geleverd (4, $1, returning
-- their tslev) and removes their admhnd_levering rows (the table keeps open work only), fout
-- (5, $2) with its reason ($3[i] for $2[i]) in admhnd_levering, back to be delivered (1, $4:
-- the update fires brp_levering_teruggezet), records ($5) the older handelingen still to be
-- delivered that held one back, and removes the levering_onderweg records of those now
-- geleverd ($1, and $6: found geleverd already).
with f as (
    update kern.admhnd set statuslev = 5 where id = any($2)
    returning id
), fr as (
    insert into admhnd_levering (admhnd_id, foutreden)
    select id, ($3::text[])[array_position($2::bigint[], id)] from f
    on conflict (admhnd_id) do update set foutreden = excluded.foutreden
), h as (
    update kern.admhnd set statuslev = 1, tslev = null where id = any($4)
    returning id
), n as (
    insert into publicatie_nakomer (admhnd_id) select x from unnest($5::bigint[]) as x order by x
    on conflict (admhnd_id) do nothing
    returning admhnd_id
), o as (
    delete from levering_onderweg where admhnd_id = any($1) or admhnd_id = any($6)
    returning admhnd_id
), g as (
    update kern.admhnd set statuslev = 4, tslev = now() where id = any($1)
    returning id, tslev
), d as (
    delete from admhnd_levering where admhnd_id = any($1)
)
select id, tslev from g
