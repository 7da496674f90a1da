-- An operator's release of the handelingen $1 still in fout and not released, each with its own
-- audit row ($2 who, $3 the note): they stay fout, later handelingen of their persons may pass
-- them. Returns those released.
with r as (
    update admhnd set vrijgegeven = now()
    where id = any($1) and statuslev = 'fout' and vrijgegeven is null
    returning id
)
insert into admhnd_beheer (admhnd_id, actie, door, toelichting)
select id, 'release', $2, $3 from r
returning admhnd_id
