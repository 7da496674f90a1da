-- retry_many.sql on the kern layout: the handelingen $1 still in fout (5) back to 1, their
-- admhnd_levering rows deleted, each with its own audit row ($2 who, $3 the note).
with r as (
    update kern.admhnd set statuslev = 1
    where id = any($1) and statuslev = 5
    returning id
), d as (
    delete from admhnd_levering where admhnd_id in (select id from r)
)
insert into admhnd_beheer (admhnd_id, actie, door, toelichting)
select id, 'retry', $2, $3 from r
returning admhnd_id
