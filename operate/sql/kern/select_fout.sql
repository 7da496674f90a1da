-- select_fout.sql on the kern layout: the fout (5) handelingen an operator's bulk retry or
-- release selects, by id after $6, at most $7 (a page);
-- reason and release from admhnd_levering, the person from kern.his_persafgeleidadministrati.
select a.id, s.naam::text, publicatie_tsreg_shown(a.tsreg), coalesce(l.foutreden, ''), l.vrijgegeven
from kern.admhnd a
join kern.srtadmhnd s on s.id = a.srt
left join admhnd_levering l on l.admhnd_id = a.id
where a.statuslev = 5 and a.id > $6
  and (not $1 or l.vrijgegeven is null)
  and ($2::text is null or strpos(lower(coalesce(l.foutreden, '')), lower($2::text)) > 0)
  and ($3::timestamptz is null or a.tsreg >= $3::timestamptz)
  and ($4::timestamptz is null or a.tsreg < $4::timestamptz)
  and ($5::bigint is null or exists (
      select from kern.his_persafgeleidadministrati p where p.admhnd = a.id and p.pers = $5::bigint))
order by a.id
limit $7
