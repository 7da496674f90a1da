-- Sets handelingen this round marked in levering ($1) back to be delivered; the update fires
-- admhnd_teruggezet (migration 0007), which records them in publicatie_nakomer.
update admhnd set statuslev = null, tspub = null where id = any($1) and statuslev = 'in_levering'
