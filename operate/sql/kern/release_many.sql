-- release_many.sql on the kern layout: the handelingen $1 still in fout (5) and not released,
-- their rows locked, released in admhnd_levering, each with its own audit row.
with f as (
    select a.id from kern.admhnd a
    where a.id = any($1) and a.statuslev = 5
      and not exists (select from admhnd_levering l where l.admhnd_id = a.id and l.vrijgegeven is not null)
    for update of a
), r as (
    insert into admhnd_levering (admhnd_id, vrijgegeven)
    select id, now() from f
    on conflict (admhnd_id) do update set vrijgegeven = excluded.vrijgegeven
    returning admhnd_id
)
insert into admhnd_beheer (admhnd_id, actie, door, toelichting)
select admhnd_id, 'release', $2, $3 from r
returning admhnd_id
