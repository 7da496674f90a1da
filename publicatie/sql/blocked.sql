-- The persons blocked now apart from those a fout holds (the view's holds): of the handelingen
-- in levering, of those recorded in publicatie_nakomer, and ($1: the strict policy) of those
-- recorded in publicatie_fout_changes, one index probe per handeling. All of them, not only
-- the candidates' persons: in a prepared plan a filter "= any($array)" is a linear search per
-- row, which a handeling of 100,000 persons in flight would turn into 10^8 comparisons.
select distinct p.persoon_id
from (
    select id from admhnd
    where statuslev = 'in_levering'
    union all
    select admhnd_id from publicatie_nakomer
    union all
    select admhnd_id from publicatie_fout_changes where $1
) a cross join lateral (
    select persoon_id from admhnd_persoon where admhnd_id = a.id offset 0) p
