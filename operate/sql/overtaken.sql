-- How many handelingen of the persons of handeling $1 (tsreg $2) after it ($3: the excluded
-- soorten) are in levering or delivered: a retry delivers $1 after them.
with later as (
    select distinct w.id, w.soort, w.tsreg, w.statuslev
    from admhnd_persoon mine
    join admhnd_persoon wp on wp.persoon_id = mine.persoon_id and wp.admhnd_id <> mine.admhnd_id
    join admhnd w on w.id = wp.admhnd_id
    where mine.admhnd_id = $1 and (w.tsreg, w.id) > ($2, $1) and w.soort <> all($3::text[])
)
select count(*) from later where statuslev in ('in_levering', 'geleverd')
