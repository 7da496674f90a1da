-- The service on the BRP kern schema as it is (BRP_DATABASE_LAYOUT=kern; docs/contract.md
-- section 1; docs/kern.md). Handelingen are kern.admhnd, a handeling's persons the pers of its
-- rows in kern.his_persafgeleidadministrati (ended ones included). The service writes only
-- tslev and statuslev there and adds no column; everything else it keeps lives here, in schema
-- brp_levering, which schema.Migrate creates and makes this session's search_path. The rules and
-- defences are those of the contract layout's migrations 0001-0015, in their final form,
-- written for kern's codes: statuslev 1 te leveren, 2 niet leveren (never touched), 3 in
-- levering, 4 geleverd, 5 fout.
--
-- On the kern tables this adds, each named brp_levering_* and documented in docs/kern.md with
-- what it costs bijhouding: two partial indexes and four triggers on kern.admhnd, one trigger
-- on kern.his_persafgeleidadministrati.

-- One row per polling cluster (the contract layout's migration 0002).
create table if not exists publicatie_lease (
    cluster    text        primary key,
    holder     text        not null default '',
    epoch      bigint      not null default 0,
    heartbeat  timestamptz not null default '-infinity',
    acquired   timestamptz null
);

-- What the contract layout keeps in admhnd's own columns, for the handelingen that have any:
-- tspub (published last, for the redelivery timeout), foutreden (why fout), vrijgegeven (an
-- operator released a fout). A consumer deletes the row when it sets the handeling geleverd,
-- so the table holds open work only. No foreign key: one would put triggers on kern.admhnd.
create table if not exists admhnd_levering (
    admhnd_id   bigint      primary key,
    tspub       timestamptz null,
    foutreden   text        null,
    vrijgegeven timestamptz null
);

-- Operator actions on fout handelingen (0004).
create table if not exists admhnd_beheer (
    id          bigserial   primary key,
    admhnd_id   bigint      not null,
    actie       text        not null check (actie in ('retry', 'release')),
    door        text        not null,
    op          timestamptz not null default now(),
    toelichting text        null
);

-- The leader's records of what became deliverable behind its stand (0007, 0011).
create table if not exists publicatie_nakomer (
    admhnd_id  bigint   primary key,
    voorsprong interval null
);
create table if not exists publicatie_herlees (
    tsreg     timestamptz not null,
    admhnd_id bigint      not null
);
-- Overtaken handelingen (0009) and persons added after delivery (0011).
create table if not exists publicatie_ingehaald (
    admhnd_id  bigint      not null,
    persoon_id bigint      not null,
    door_id    bigint      not null,
    tsrec      timestamptz not null default now()
);
create table if not exists publicatie_laat_personen (
    admhnd_id bigint      not null,
    tsrec     timestamptz not null default now()
);
-- The publisher's margin, horizon and sleep (0011, 0015).
do $$ begin if to_regclass('publicatie_state') is null then -- publicatie_toestand until migration 0009
create table if not exists publicatie_toestand (
    enig              boolean     primary key default true check (enig),
    marge             interval    not null default '0',
    grens             interval    not null default '2 s',
    laag              interval    not null default '0',
    hoog              interval    not null default '0',
    sinds             timestamptz not null default '-infinity',
    slaapt            boolean     not null default true,
    max_wait          interval    not null default '2 s',
    hoog_tot          timestamptz not null default '-infinity',
    lead_sample_rate  float8      not null default 0,
    lead_sample_until timestamptz not null default '-infinity'
);
insert into publicatie_toestand default values on conflict do nothing;
end if; end $$;
create table if not exists publicatie_lead_samples (
    lead interval not null
);
-- Verzendingen that may be out while their handeling is in levering (0012).
create table if not exists levering_onderweg (
    admhnd_id bigint      primary key,
    sinds     timestamptz not null default now()
);
-- Fout state changes for the leader's holds (0014).
create table if not exists publicatie_fout_changes (
    admhnd_id bigint primary key
);

-- The statuses by the names the service's code uses (handeling.Status): 1 is NULL, as the
-- contract layout's te leveren.
create or replace function publicatie_status_name(statuslev smallint) returns text
    language sql immutable parallel safe
    as $$ select case statuslev when 2 then 'niet_leveren' when 3 then 'in_levering' when 4 then 'geleverd' when 5 then 'fout' end $$;
create or replace function publicatie_status_code(status text) returns smallint
    language sql immutable parallel safe
    as $$ select case coalesce(status, '') when '' then 1 when 'niet_leveren' then 2 when 'in_levering' then 3 when 'geleverd' then 4 when 'fout' then 5 end::smallint $$;

-- The rules (0013), for kern's columns.
create or replace function publicatie_tsreg_from() returns timestamptz
    language sql immutable parallel safe
    as $$ select '0001-01-02 00:00:00+00'::timestamptz $$;
create or replace function publicatie_tsreg_until() returns timestamptz
    language sql immutable parallel safe
    as $$ select '9999-12-31 00:00:00+00'::timestamptz $$;
create or replace function publicatie_tsreg_accepted(tsreg timestamptz) returns boolean
    language sql immutable parallel safe
    as $$ select tsreg >= publicatie_tsreg_from() and tsreg < publicatie_tsreg_until() $$;
create or replace function publicatie_tsreg_shown(tsreg timestamptz) returns timestamptz
    language sql immutable parallel safe
    as $$ select greatest(least(tsreg, publicatie_tsreg_until() - interval '1 second'), publicatie_tsreg_from()) $$;

-- The ids of the soorten named (the EXCLUDED setting names soorten by kern.srtadmhnd.naam).
-- A statement calls it as a scalar subquery, "(select publicatie_srt_ids($n))", which
-- PostgreSQL runs once per statement.
create or replace function publicatie_srt_ids(names text[]) returns smallint[]
    language sql stable parallel safe
    as $$ select coalesce(array_agg(id), '{}') from kern.srtadmhnd where naam = any(names) $$;

-- Still to be delivered: status 1 (te leveren) and the soort not excluded. Status 2 (niet
-- leveren: bijhouding's own exclusion, soort 37) is never to be delivered.
create or replace function publicatie_to_deliver(statuslev smallint, srt smallint, excluded smallint[])
    returns boolean
    language sql immutable parallel safe
    as $$ select statuslev = 1 and srt <> all(excluded) $$;
create or replace function publicatie_unreleased_fout(statuslev smallint, vrijgegeven timestamptz)
    returns boolean
    language sql immutable parallel safe
    as $$ select statuslev = 5 and vrijgegeven is null $$;
create or replace function publicatie_blocks(statuslev smallint, vrijgegeven timestamptz, strict boolean)
    returns boolean
    language sql immutable parallel safe
    as $$ select statuslev = 3 or (strict and statuslev = 5 and vrijgegeven is null) $$;

-- Whether a row version (its xmin) was written by this transaction (0009).
create or replace function publicatie_own_row(x xid) returns boolean
    language sql stable as $$
    select x = pg_current_xact_id_if_assigned()::xid
$$;

-- Room for n more late rows in publicatie_nakomer in this transaction (0011).
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

-- The open transactions that hold the publisher's horizon (0015), registering being a row
-- exclusive lock on kern.admhnd.
create or replace view publicatie_horizon as
select a.pid, a.application_name, a.state, a.wait_event, a.xact_start,
       extract(epoch from clock_timestamp() - a.xact_start)::float8 as age_seconds,
       exists (select from pg_locks l where l.pid = a.pid and l.locktype = 'relation'
               and l.relation = 'kern.admhnd'::regclass and l.mode = 'RowExclusiveLock') as registers,
       case
           when clock_timestamp() - a.xact_start < interval '1 s' then true
           when not exists (select from pg_locks l where l.pid = a.pid and l.locktype = 'relation'
                            and l.relation = 'kern.admhnd'::regclass and l.mode = 'RowExclusiveLock') then false
           else a.wait_event is not distinct from 'SyncRep'
                or clock_timestamp() - a.xact_start < (select coalesce(max(max_wait), '2 s') from publicatie_toestand)
       end as holds
from pg_stat_activity a
where a.datname = current_database() and a.pid <> pg_backend_pid()
  and a.backend_type = 'client backend' and a.xact_start is not null
  and not coalesce(a.application_name like 'publicatie[%' or a.application_name like 'mutatielevering[%', false);

-- Registrations (0011, 0015): one call per inserting statement. Wakes a sleeping publisher,
-- records late registrations (beyond the margin, or of a late writer), samples leads, and
-- records handelingen inserted in fout (bijhouding does not; a repair by hand may). Rows of
-- status 2 (an initial load) are never recorded.
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
    insert into publicatie_fout_changes (admhnd_id)
    select id from nieuw where statuslev = 5 order by id
    on conflict (admhnd_id) do update set admhnd_id = excluded.admhnd_id;
    select count(*) into n from nieuw
    where statuslev = 1 and (laat or tsreg < now() - v.marge) and publicatie_tsreg_accepted(tsreg);
    if n = 0 then
        if now() < v.lead_sample_until and random() < v.lead_sample_rate then
            insert into publicatie_lead_samples (lead)
            select now() - min(tsreg) from nieuw
            where statuslev = 1 and publicatie_tsreg_accepted(tsreg) having count(*) > 0;
        end if;
        return null;
    elsif publicatie_nakomer_ruimte(n) then
        insert into publicatie_nakomer (admhnd_id, voorsprong)
        select id, case when not laat and now() - tsreg <= v.grens then now() - tsreg end from nieuw
        where statuslev = 1 and (laat or tsreg < now() - v.marge) and publicatie_tsreg_accepted(tsreg)
        order by id
        on conflict (admhnd_id) do update set voorsprong = excluded.voorsprong;
    else
        insert into publicatie_herlees (tsreg, admhnd_id)
        select tsreg, id from nieuw
        where statuslev = 1 and (laat or tsreg < now() - v.marge) and publicatie_tsreg_accepted(tsreg)
        order by tsreg, id limit 1;
    end if;
    return null;
end $$;
drop trigger if exists brp_levering_geregistreerd on kern.admhnd;
create trigger brp_levering_geregistreerd after insert on kern.admhnd referencing new table as nieuw
    for each statement execute function publicatie_geregistreerd();

-- At commit, a transaction that commits more than half a second after it began records what
-- it registered (0015). One call per registration at its commit, which returns at once for an
-- ordinary one.
create or replace function publicatie_vastgelegd() returns trigger
    language plpgsql security definer set search_path from current as $$
begin
    if clock_timestamp() - now() <= interval '0.5 s' or current_setting('brp_levering.herlees', true) = '1' then
        return null;
    end if;
    if not publicatie_tsreg_accepted(new.tsreg) or new.statuslev <> 1 then
        return null;
    end if;
    if publicatie_nakomer_ruimte(1) then
        insert into publicatie_nakomer (admhnd_id) values (new.id)
        on conflict (admhnd_id) do update set voorsprong = null;
    else
        perform set_config('brp_levering.herlees', '1', true);
        insert into publicatie_herlees (tsreg, admhnd_id) values (publicatie_tsreg_from(), 0);
    end if;
    return null;
end $$;
drop trigger if exists brp_levering_vastgelegd on kern.admhnd;
create constraint trigger brp_levering_vastgelegd after insert on kern.admhnd
    deferrable initially deferred
    for each row execute function publicatie_vastgelegd();

-- Set back to be delivered (0007, 0011): an operator's retry, the publisher's set back.
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
drop trigger if exists brp_levering_teruggezet on kern.admhnd;
create trigger brp_levering_teruggezet after update of statuslev on kern.admhnd
    for each row when (old.statuslev <> 1 and new.statuslev = 1)
    execute function publicatie_nakomer_teruggezet();

-- A handeling became fout or left it (0014). A release (vrijgegeven) is a change of
-- admhnd_levering, recorded by its own trigger below.
create or replace function publicatie_fout_changed() returns trigger
    language plpgsql security definer set search_path from current as $$
begin
    insert into publicatie_fout_changes (admhnd_id) values (new.id)
    on conflict (admhnd_id) do update set admhnd_id = excluded.admhnd_id;
    return null;
end $$;
drop trigger if exists brp_levering_fout_changed on kern.admhnd;
create trigger brp_levering_fout_changed after update of statuslev on kern.admhnd
    for each row when ((old.statuslev = 5) <> (new.statuslev = 5))
    execute function publicatie_fout_changed();

create or replace function publicatie_vrijgave_changed() returns trigger
    language plpgsql security definer set search_path from current as $$
begin
    insert into publicatie_fout_changes (admhnd_id) values (new.admhnd_id)
    on conflict (admhnd_id) do update set admhnd_id = excluded.admhnd_id;
    return null;
end $$;
drop trigger if exists admhnd_levering_vrijgegeven on admhnd_levering;
create trigger admhnd_levering_vrijgegeven after insert on admhnd_levering
    for each row when (new.vrijgegeven is not null)
    execute function publicatie_vrijgave_changed();
drop trigger if exists admhnd_levering_vrijgave_changed on admhnd_levering;
create trigger admhnd_levering_vrijgave_changed after update of vrijgegeven on admhnd_levering
    for each row when (old.vrijgegeven is distinct from new.vrijgegeven)
    execute function publicatie_vrijgave_changed();

-- Persons added (0009, 0011, 0014): his rows inserted for another transaction's handeling are
-- late. Ordinary bijhouding writes a handeling and its his rows in one transaction: one call
-- per inserting statement and one index probe per row, nothing else.
create or replace function publicatie_personen_toegevoegd() returns trigger
    language plpgsql security definer set search_path from current as $$
declare
    aantal bigint;
begin
    if not exists (select from nieuw n join kern.admhnd a on a.id = n.admhnd where not publicatie_own_row(a.xmin)) then
        return null;
    end if;
    -- Hold the handeling's row as the foreign key does: a consumer delivering it waits for
    -- this commit and then sees the persons, or this waits for the consumer's commit and sees
    -- it geleverd.
    perform from kern.admhnd a
    where a.id in (select admhnd from nieuw) and not publicatie_own_row(a.xmin)
    order by a.id for key share;
    insert into publicatie_laat_personen (admhnd_id)
    select distinct a.id from nieuw n join kern.admhnd a on a.id = n.admhnd
    where not publicatie_own_row(a.xmin) and a.statuslev = 4;
    insert into publicatie_fout_changes (admhnd_id)
    select distinct a.id from nieuw n join kern.admhnd a on a.id = n.admhnd
    where not publicatie_own_row(a.xmin) and a.statuslev = 5
    order by a.id
    on conflict (admhnd_id) do update set admhnd_id = excluded.admhnd_id;
    select count(distinct a.id) into aantal from nieuw n join kern.admhnd a on a.id = n.admhnd
    where not publicatie_own_row(a.xmin) and a.statuslev = 1;
    if aantal = 0 then
        return null;
    elsif publicatie_nakomer_ruimte(aantal) then
        insert into publicatie_nakomer (admhnd_id)
        select distinct a.id from nieuw n join kern.admhnd a on a.id = n.admhnd
        where not publicatie_own_row(a.xmin) and a.statuslev = 1
        order by a.id
        on conflict (admhnd_id) do update set voorsprong = null;
    else
        insert into publicatie_herlees (tsreg, admhnd_id)
        select a.tsreg, a.id from nieuw n join kern.admhnd a on a.id = n.admhnd
        where not publicatie_own_row(a.xmin) and a.statuslev = 1
          and publicatie_tsreg_accepted(a.tsreg)
        order by a.tsreg, a.id limit 1;
    end if;
    return null;
end $$;
drop trigger if exists brp_levering_personen_toegevoegd on kern.his_persafgeleidadministrati;
create trigger brp_levering_personen_toegevoegd after insert on kern.his_persafgeleidadministrati
    referencing new table as nieuw
    for each statement execute function publicatie_personen_toegevoegd();

-- Indexes, built concurrently: bijhouding keeps registering meanwhile. The publisher's intake
-- reads open work in (tsreg, id) order from brp_levering_te_leveren_idx (kern's own partial
-- index on tsreg alone would make every round sort the whole backlog); the leader reads the
-- fout handelingen from brp_levering_fout_idx when it builds its view.
-- brp:outside-transaction
create index concurrently if not exists brp_levering_te_leveren_idx on kern.admhnd (tsreg, id) where statuslev = 1;
create index concurrently if not exists brp_levering_fout_idx on kern.admhnd (id) where statuslev = 5;
create index concurrently if not exists admhnd_beheer_admhnd_idx on admhnd_beheer (admhnd_id);
