-- What the leading publisher needs to hold back the persons of unreleased fout handelingen
-- without reading all of them in every round (issue 39): a record of each handeling whose fout
-- state changed (it became fout, left fout, or an operator released it), and of each fout
-- handeling that got persons added. The leader reads the fout handelingen once when it builds
-- its view, then in every round only these records, and deletes them. Under the strict policy
-- a person stays blocked while a record of one of its handelingen waits here (the round reads
-- it with the handelingen in levering), so a record the round could not take yet holds back as
-- a fout would.
create table if not exists publicatie_fout_changes (
    admhnd_id bigint primary key
);

-- A record of a handeling already recorded updates that row (as publicatie_nakomer's do,
-- migration 0011): the leader deletes with "skip locked", so a record an open transaction
-- holds stays for a later round, and a change that commits while the leader deletes the older
-- record is never lost.
create or replace function publicatie_fout_changed() returns trigger
    language plpgsql security definer set search_path from current as $$
begin
    insert into publicatie_fout_changes (admhnd_id) values (new.id)
    on conflict (admhnd_id) do update set admhnd_id = excluded.admhnd_id;
    return null;
end $$;

-- Row triggers with WHEN clauses: bijhouding's registrations (statuslev NULL), the
-- publisher's marks and the consumers' deliveries never call the function; a consumer's fout,
-- an operator's retry or release, and a fout set by hand do.
drop trigger if exists admhnd_fout_changed on admhnd;
create trigger admhnd_fout_changed after update of statuslev, vrijgegeven on admhnd
    for each row when (
        coalesce(old.statuslev::text = 'fout', false) <> coalesce(new.statuslev::text = 'fout', false)
        or (new.statuslev::text = 'fout' and old.vrijgegeven is distinct from new.vrijgegeven))
    execute function publicatie_fout_changed();
drop trigger if exists admhnd_fout_inserted on admhnd;
create trigger admhnd_fout_inserted after insert on admhnd
    for each row when (new.statuslev::text = 'fout')
    execute function publicatie_fout_changed();

-- Persons added to a fout handeling (of another transaction) are recorded as well: they are
-- blocked from then on. The rest is migration 0011's function as it was.
create or replace function publicatie_personen_toegevoegd() returns trigger
    language plpgsql security definer set search_path from current as $$
declare
    aantal bigint;
begin
    -- Ordinary bijhouding writes a handeling and its persons in one transaction: one index
    -- probe per person, and nothing else.
    if not exists (select from nieuw n join admhnd a on a.id = n.admhnd_id where not publicatie_own_row(a.xmin)) then
        return null;
    end if;
    -- Persons added to another transaction's handeling. Hold its row as the foreign key does
    -- (bijhouding's table may have none): a consumer delivering it waits for this commit and
    -- then sees the persons, or this waits for the consumer's commit and sees it geleverd.
    perform from admhnd a
    where a.id in (select admhnd_id from nieuw) and not publicatie_own_row(a.xmin)
    order by a.id for key share;
    -- Read after the lock. Delivered without these persons: reported.
    insert into publicatie_laat_personen (admhnd_id)
    select distinct a.id from nieuw n join admhnd a on a.id = n.admhnd_id
    where not publicatie_own_row(a.xmin) and a.statuslev::text = 'geleverd';
    -- In fout: its new persons are blocked from now on.
    insert into publicatie_fout_changes (admhnd_id)
    select distinct a.id from nieuw n join admhnd a on a.id = n.admhnd_id
    where not publicatie_own_row(a.xmin) and a.statuslev::text = 'fout'
    order by a.id
    on conflict (admhnd_id) do update set admhnd_id = excluded.admhnd_id;
    -- Still to be delivered: the publisher's view may hold it with its old persons. (In
    -- levering: the consumer holds it back for its persons, which records it.)
    select count(distinct a.id) into aantal from nieuw n join admhnd a on a.id = n.admhnd_id
    where not publicatie_own_row(a.xmin) and a.statuslev is null;
    if aantal = 0 then
        return null;
    elsif publicatie_nakomer_ruimte(aantal) then
        insert into publicatie_nakomer (admhnd_id)
        select distinct a.id from nieuw n join admhnd a on a.id = n.admhnd_id
        where not publicatie_own_row(a.xmin) and a.statuslev is null
        order by a.id
        on conflict (admhnd_id) do update set voorsprong = null;
    else
        insert into publicatie_herlees (tsreg, admhnd_id)
        select a.tsreg, a.id from nieuw n join admhnd a on a.id = n.admhnd_id
        where not publicatie_own_row(a.xmin) and a.statuslev is null
          and publicatie_tsreg_accepted(a.tsreg)
        order by a.tsreg, a.id limit 1;
    end if;
    return null;
end $$;
