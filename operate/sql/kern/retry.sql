-- retry.sql on the kern layout: an operator's retry of fout handeling $1: from 5 back to 1 (te
-- leveren) in its (tsreg, id) place, and its admhnd_levering row deleted, which clears
-- foutreden, vrijgegeven and tspub.
with r as (
    update kern.admhnd set statuslev = 1 where id = $1 and statuslev = 5
    returning id
)
delete from admhnd_levering where admhnd_id in (select id from r)
