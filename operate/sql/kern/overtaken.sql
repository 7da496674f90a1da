-- overtaken.sql on the kern layout: how many handelingen of the persons of handeling $1 (tsreg
-- $2) after it ($3: the excluded soorten by naam) are in levering (3) or delivered (4).
with excluded as (
    select (select publicatie_srt_ids($3::text[])) as srt
), later as (
    select distinct w.id, w.statuslev
    from kern.his_persafgeleidadministrati mine
    join kern.his_persafgeleidadministrati wp on wp.pers = mine.pers and wp.admhnd <> mine.admhnd
    join kern.admhnd w on w.id = wp.admhnd
    cross join excluded x
    where mine.admhnd = $1 and (w.tsreg, w.id) > ($2, $1) and w.srt <> all(x.srt)
)
select count(*) from later where statuslev in (3, 4)
