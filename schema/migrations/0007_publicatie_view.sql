-- What the leading publisher needs from the database to keep its view of open work in memory
-- (package publicatie, view.go): the handelingen that became deliverable where its intake,
-- which reads forward in (tsreg, id) order, may already have passed. The leader reads and
-- empties both tables in every round.

-- Handelingen set back to be delivered: the next round takes them in before anything newer
-- of their persons.
create table if not exists publicatie_nakomer (
    admhnd_id bigint primary key
);

-- Registered with a tsreg before the registering transaction's start (a tsreg stamped by an
-- application server whose clock is behind, a load or a correction with tsreg in the past):
-- the late-writer horizon does not hold such handelingen back, so the intake may have passed
-- them. One row per inserting statement, the oldest such handeling: when it lies behind the
-- leader's stand, the leader builds its view again from the oldest handeling. One row, not
-- one per handeling: a load of a million rows with tsreg in the past must not leave a
-- million rows for every round to read. Bijhouding that stamps tsreg at or after its
-- transaction's start (as docs/contract.md's delivery order assumes) is never recorded.
create table if not exists publicatie_herlees (
    tsreg     timestamptz not null,
    admhnd_id bigint      not null
);

-- The functions run as their owner, so bijhouding's and operators' roles need no rights on
-- the service's tables.
create or replace function publicatie_herlees_geregistreerd() returns trigger
    language plpgsql security definer set search_path from current as $$
begin
    insert into publicatie_herlees (tsreg, admhnd_id)
    select tsreg, id from nieuw where tsreg < now() order by tsreg, id limit 1;
    return null;
end $$;
drop trigger if exists admhnd_herlees on admhnd;
create trigger admhnd_herlees after insert on admhnd referencing new table as nieuw
    for each statement execute function publicatie_herlees_geregistreerd();

-- Set back to be delivered (an operator's retry, by the command or by hand). A row trigger
-- with a WHEN clause: the consumers' updates (to geleverd or fout) do not call it.
create or replace function publicatie_nakomer_teruggezet() returns trigger
    language plpgsql security definer set search_path from current as $$
begin
    insert into publicatie_nakomer (admhnd_id) values (new.id) on conflict do nothing;
    return null;
end $$;
drop trigger if exists admhnd_teruggezet on admhnd;
create trigger admhnd_teruggezet after update of statuslev on admhnd
    for each row when (old.statuslev is not null and new.statuslev is null)
    execute function publicatie_nakomer_teruggezet();
