-- Late arrivals once the consumer checks the order where it delivers (package levering; issue
-- 32; docs/robustness.md, "Late arrivals"), and registrations that no longer queue behind
-- each other. Migration 0009 kept order at the publisher alone: every registration whose
-- tsreg lay before its transaction's start (what an application server's clock gives, the
-- normal case by docs/contract.md section 1) took an advisory lock that kept rounds from marking,
-- looked up its persons' newer handelingen, and made the publisher build its view again. At
-- 2,000 registrations a second that was every registration, and the service no longer kept up.
-- And every registration and every delivery sent a notification: PostgreSQL commits the
-- transactions that notify one at a time, under one lock held through their WAL flush, so
-- bijhouding's registrations and the consumers' commits queued behind each other. Now:
--
-- * The publisher learns how far before its transaction's start bijhouding's tsreg lies (the
--   lead) and holds its horizon back by that much (publicatie_toestand.marge, at most grens):
--   a registration within the margin is ordinary and costs one look at that row.
-- * A registration beyond the margin (or by a late writer) is recorded in publicatie_nakomer,
--   with its lead, so that the publisher takes it into its view at its place and learns the
--   lead; a transaction that records more than 100 (a load, a conversion) leaves only the
--   oldest of each further statement in publicatie_herlees, and the view is built again.
-- * Persons added to another transaction's handeling are recorded the same way; the
--   handeling's row is held (key share, as the foreign key does) until the commit, so that a
--   consumer delivering it either sees the persons or is seen to have delivered it, which is
--   reported (publicatie_laat_personen).
-- * Only while the publisher sleeps (publicatie_toestand.slaapt: nothing in levering, nothing
--   new) does a registration, or a handeling set back to be delivered, wake it with a
--   notification; while it works it looks for new work itself. Deliveries notify no more.
--
-- The release before keeps running on this schema (docs/operations.md, Upgrade): it finds
-- what it reads where it read it, but it is no longer woken by deliveries (a person's next
-- handeling waits up to its DELAY until the new publisher leads).

do $$ begin if to_regclass('publicatie_state') is null then -- publicatie_toestand until migration 0022
create table if not exists publicatie_toestand (
    enig   boolean     primary key default true check (enig),
    -- the lead the publisher holds its horizon back by, and the largest lead it learns
    marge  interval    not null default '0',
    grens  interval    not null default '2 s',
    -- until sinds, a minute after the margin last changed: the lowest and the highest margin
    -- in force since then. A registration until then is recorded when its lead exceeds the
    -- lowest (the publisher's stand may lie as far ahead as that one let it), and the horizon
    -- holds a transaction begun before then back by the highest (it may have compared its
    -- leads with that one).
    laag   interval    not null default '0',
    hoog   interval    not null default '0',
    sinds  timestamptz not null default '-infinity',
    -- the publisher waits for a notification (until then: none is sent)
    slaapt boolean     not null default true
);
insert into publicatie_toestand default values on conflict do nothing;
end if; end $$;

alter table publicatie_nakomer add column if not exists voorsprong interval null;

-- Persons added to a handeling after it was delivered, for the leader to report. (Not
-- publicatie_ingehaald: the release before reads that table's door_id as never null.)
create table if not exists publicatie_laat_personen (
    admhnd_id bigint      not null,
    tsrec     timestamptz not null default now()
);

-- The advisory lock of 0009 is gone: nothing takes it any more. Deliveries notify no more.
drop trigger if exists admhnd_notify_status on admhnd;

-- A record is an event: the same handeling may be recorded again while the leader deletes
-- what it read. So a record of a handeling already recorded updates that row, rather than
-- doing nothing ("on conflict do nothing" met a committed row the leader was about to delete,
-- and the later event was lost: persons added late went unseen); the leader deletes with
-- "skip locked", so a row an open transaction updated stays for a later round, never waited
-- for.
create or replace function publicatie_nakomer_teruggezet() returns trigger
    language plpgsql security definer set search_path from current as $$
begin
    insert into publicatie_nakomer (admhnd_id) values (new.id)
    on conflict (admhnd_id) do update set voorsprong = null;
    if (select slaapt from publicatie_toestand) is distinct from false then
        perform pg_notify('brp_levering', '');
    end if;
    return null;
end $$;

-- Records n more late rows in publicatie_nakomer for this transaction, or says (false) that
-- it has recorded 100 already: a transaction that registers more (a load, a conversion, a
-- backfill, statement by statement) leaves only the oldest of each further statement in
-- publicatie_herlees, and the publisher builds its view again from the oldest, in bounded
-- reads, instead of taking a million handelingen in at once.
create or replace function publicatie_nakomer_ruimte(n bigint) returns boolean
    language plpgsql as $$
declare
    al bigint := coalesce(nullif(current_setting('brp_levering.nakomers', true), ''), '0')::bigint;
begin
    if al + n > 100 then
        return false;
    end if;
    perform set_config('brp_levering.nakomers', (al + n)::text, true);
    return true;
end $$;

-- One statement trigger per registering statement (it replaces 0003's notification and 0009's
-- record): plpgsql calls are what a registration pays for, so one, reading one row.
--
-- A late writer is a transaction whose first registration comes more than half a second after
-- it began (publicatie.LateWriterGrace): until its first write it had no transaction id, and
-- the publisher's horizon stops waiting for such a transaction after a second, so what it
-- registers may lie behind the publisher's stand. A transaction that registered early held
-- the horizon back from then on: the first registration marks it (brp_levering.vroeg).
create or replace function publicatie_geregistreerd() returns trigger
    language plpgsql security definer set search_path from current as $$
declare
    v publicatie_toestand;
    laat boolean := false;
    n bigint;
begin
    select * into v from publicatie_toestand;
    if not found then
        v.marge := '0';
        v.grens := '0';
    end if;
    if v.slaapt is distinct from false then
        perform pg_notify('brp_levering', '');
    end if;
    if coalesce(current_setting('brp_levering.vroeg', true), '') = '' then
        laat := clock_timestamp() - now() > interval '0.5 s';
        if not laat then
            perform set_config('brp_levering.vroeg', '1', true);
        end if;
    end if;
    if now() < v.sinds then
        v.marge := least(v.marge, v.laag);
    end if;
    select count(*) into n from nieuw
    where (laat or tsreg < now() - v.marge) and tsreg >= '0001-01-02' and tsreg < '9999-12-31';
    if n = 0 then
        return null;
    elsif publicatie_nakomer_ruimte(n) then
        insert into publicatie_nakomer (admhnd_id, voorsprong)
        select id, case when not laat and now() - tsreg <= v.grens then now() - tsreg end from nieuw
        where (laat or tsreg < now() - v.marge) and tsreg >= '0001-01-02' and tsreg < '9999-12-31'
        order by id
        on conflict (admhnd_id) do update set voorsprong = excluded.voorsprong;
    else
        insert into publicatie_herlees (tsreg, admhnd_id)
        select tsreg, id from nieuw
        where (laat or tsreg < now() - v.marge) and tsreg >= '0001-01-02' and tsreg < '9999-12-31'
        order by tsreg, id limit 1;
    end if;
    return null;
end $$;
drop trigger if exists admhnd_notify_insert on admhnd;
drop trigger if exists admhnd_herlees on admhnd;
drop trigger if exists admhnd_geregistreerd on admhnd;
create trigger admhnd_geregistreerd after insert on admhnd referencing new table as nieuw
    for each statement execute function publicatie_geregistreerd();

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
          and a.tsreg >= '0001-01-02' and a.tsreg < '9999-12-31'
        order by a.tsreg, a.id limit 1;
    end if;
    return null;
end $$;

-- 0007 and 0009's functions nothing calls any more.
drop function if exists publicatie_herlees_geregistreerd();
drop function if exists publicatie_late_writer();
drop function if exists brp_levering_notify();
