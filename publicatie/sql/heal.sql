-- Fouts that heal (issue 48): unreleased fout handelingen set fout because they had no persons
-- when their consumer delivered them ($1: handeling.FoutGeenPersonen), whose persons have come
-- since, and none of whose persons has a later handeling in levering or delivered (their
-- delivery now keeps every person's order). Each goes back to be delivered at its place, with
-- an audit row as an operator's retry has ($2 who, $3 the note). At most 100 a time, skipping
-- rows an operator or a consumer holds.
with h as (
    select f.id from admhnd f
    where publicatie_unreleased_fout(f.statuslev, f.vrijgegeven) and f.foutreden = $1
      and exists (select from admhnd_persoon p where p.admhnd_id = f.id)
      and not exists (
          select from admhnd_persoon mine
          join admhnd_persoon wp on wp.persoon_id = mine.persoon_id and wp.admhnd_id <> mine.admhnd_id
          join admhnd w on w.id = wp.admhnd_id
          where mine.admhnd_id = f.id and (w.tsreg, w.id) > (f.tsreg, f.id)
            and w.statuslev in ('in_levering', 'geleverd'))
    order by f.id
    limit 100
    for update of f skip locked
), r as (
    update admhnd set statuslev = null, foutreden = null, vrijgegeven = null, tspub = null
    where id in (select id from h)
    returning id
)
insert into admhnd_beheer (admhnd_id, actie, door, toelichting)
select id, 'retry', $2, $3 from r
returning admhnd_id
