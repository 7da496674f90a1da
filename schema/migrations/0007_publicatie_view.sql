-- What the leading publisher needs from the database to keep its view of open work in memory
-- (package publicatie, view.go): how far it has taken handelingen in, and the handelingen
-- that appear below that point afterwards, so that it takes them in before anything newer.

-- How far the leader's intake has read (tsreg, admhnd_id): every handeling to be delivered up
-- to there is in its view. A new leader starts again from '-infinity'.
create table if not exists publicatie_stand (
    id        int         primary key default 1 constraint publicatie_stand_een check (id = 1),
    tsreg     timestamptz not null default '-infinity',
    admhnd_id bigint      not null default 0
);
insert into publicatie_stand (id) values (1) on conflict do nothing;

-- Handelingen that became deliverable below the stand: registered with a tsreg the intake has
-- passed (a writer that stamped tsreg before its transaction began, a clock behind the
-- database's), or set back to be delivered (an operator's retry, by the command or by hand).
-- The leader reads and empties this table in every round.
create table if not exists publicatie_nakomer (
    admhnd_id bigint primary key
);

-- The functions run as their owner, so bijhouding's and operators' roles need no rights on
-- the service's tables.
create or replace function publicatie_nakomer_geregistreerd() returns trigger
    language plpgsql security definer set search_path from current as $$
begin
    insert into publicatie_nakomer (admhnd_id)
    select n.id from nieuw n, publicatie_stand s
    where s.id = 1 and (n.tsreg, n.id) <= (s.tsreg, s.admhnd_id)
    on conflict do nothing;
    return null;
end $$;
drop trigger if exists admhnd_nakomer on admhnd;
create trigger admhnd_nakomer after insert on admhnd referencing new table as nieuw
    for each statement execute function publicatie_nakomer_geregistreerd();

-- A row trigger with a WHEN clause: the consumers' updates (to geleverd or fout) do not call it.
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
