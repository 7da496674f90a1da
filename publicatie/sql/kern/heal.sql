-- heal.sql on the kern layout: unreleased fout (5) handelingen whose admhnd_levering row gives
-- foutreden $1, whose his rows have come since, and none of whose persons has a later handeling
-- in levering (3) or delivered (4): back to 1, their admhnd_levering rows deleted, each with
-- an audit row ($2 who, $3 the note). At most 100 a time, skipping rows others hold.
with h as (
    select a.id from kern.admhnd a
    join admhnd_levering l on l.admhnd_id = a.id
    where a.statuslev = 5 and l.vrijgegeven is null and l.foutreden = $1
      and exists (select from kern.his_persafgeleidadministrati p where p.admhnd = a.id)
      and not exists (
          select from kern.his_persafgeleidadministrati mine
          join kern.his_persafgeleidadministrati wp on wp.pers = mine.pers and wp.admhnd <> mine.admhnd
          join kern.admhnd w on w.id = wp.admhnd
          where mine.admhnd = a.id and (w.tsreg, w.id) > (a.tsreg, a.id) and w.statuslev in (3, 4))
    order by a.id
    limit 100
    for update of a skip locked
), r as (
    update kern.admhnd set statuslev = 1
    where id in (select id from h)
    returning id
), d as (
    delete from admhnd_levering where admhnd_id in (select id from r)
)
insert into admhnd_beheer (admhnd_id, actie, door, toelichting)
select id, 'retry', $2, $3 from r
returning admhnd_id
