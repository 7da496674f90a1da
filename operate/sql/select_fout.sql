-- The fout handelingen an operator's bulk retry or release selects, by id after $6, at most $7
-- (a page; the action pages through them all). Every condition narrows it: $1 only those
-- not released; $2 a reason that contains $2, in any case; $3 tsreg from, $4 tsreg before; $5
-- one person's. NULL leaves a condition out. The fout index (admhnd_fout_idx) gives them in id
-- order.
select a.id, a.soort, publicatie_tsreg_shown(a.tsreg), coalesce(a.foutreden, ''), a.vrijgegeven
from admhnd a
where a.statuslev = 'fout' and a.id > $6
  and (not $1 or a.vrijgegeven is null)
  and ($2::text is null or strpos(lower(coalesce(a.foutreden, '')), lower($2::text)) > 0)
  and ($3::timestamptz is null or a.tsreg >= $3::timestamptz)
  and ($4::timestamptz is null or a.tsreg < $4::timestamptz)
  and ($5::bigint is null or exists (
      select from admhnd_persoon p where p.admhnd_id = a.id and p.persoon_id = $5::bigint))
order by a.id
limit $7
