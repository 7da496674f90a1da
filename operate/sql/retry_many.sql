-- An operator's retry of the handelingen $1 still in fout: back to be delivered in their
-- (tsreg, id) places, each with its own audit row ($2 who, $3 the note). Returns those retried;
-- one that left fout since it was selected is left alone.
with r as (
    update admhnd set statuslev = null, foutreden = null, vrijgegeven = null, tspub = null
    where id = any($1) and statuslev = 'fout'
    returning id
)
insert into admhnd_beheer (admhnd_id, actie, door, toelichting)
select id, 'retry', $2, $3 from r
returning admhnd_id
