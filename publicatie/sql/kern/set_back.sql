-- set_back.sql on the kern layout: sets handelingen this round marked in levering ($1) back to
-- be delivered (1); the update fires brp_levering_teruggezet, which records them in
-- publicatie_nakomer.
with b as (
    update kern.admhnd set statuslev = 1 where id = any($1) and statuslev = 3 returning id
)
update admhnd_levering set tspub = null where admhnd_id in (select id from b)
