-- held_back.sql on the kern layout: up to $4 handelingen still to be delivered (1) of the
-- persons of handeling $1 (tsreg $2) after it, oldest first, with their total ($3: the excluded
-- soorten by naam), their soort by naam. Found through kern.his_persafgeleidadministrati's
-- (pers) index.
with excluded as (
    select (select publicatie_srt_ids($3::text[])) as srt
), later as (
    select distinct w.id, w.srt, w.tsreg, w.statuslev
    from kern.his_persafgeleidadministrati mine
    join kern.his_persafgeleidadministrati wp on wp.pers = mine.pers and wp.admhnd <> mine.admhnd
    join kern.admhnd w on w.id = wp.admhnd
    cross join excluded x
    where mine.admhnd = $1 and (w.tsreg, w.id) > ($2, $1) and w.srt <> all(x.srt)
)
select l.id, s.naam::text, publicatie_tsreg_shown(l.tsreg), count(*) over ()
from later l join kern.srtadmhnd s on s.id = l.srt
where l.statuslev = 1
order by l.tsreg, l.id limit $4
