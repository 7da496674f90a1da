-- Up to $4 handelingen still to be delivered of the persons of handeling $1 (tsreg $2) after
-- it, oldest first, with their total ($3: the excluded soorten): what the fout holds back.
-- Found through admhnd_persoon's persoon index.
with later as (
    select distinct w.id, w.soort, w.tsreg, w.statuslev
    from admhnd_persoon mine
    join admhnd_persoon wp on wp.persoon_id = mine.persoon_id and wp.admhnd_id <> mine.admhnd_id
    join admhnd w on w.id = wp.admhnd_id
    where mine.admhnd_id = $1 and (w.tsreg, w.id) > ($2, $1) and w.soort <> all($3::text[])
)
select id, soort, publicatie_tsreg_shown(tsreg), count(*) over () from later where statuslev is null
order by tsreg, id limit $4
