-- Nothing outside the service holds delivery back for long (issue 40; docs/design.md, "The
-- horizon"). The publisher publishes only handelingen registered before the horizon: the start
-- of the oldest open transaction that may still register an older one, less the lead margin.
-- Three things held it back without bound: a report or batch job elsewhere in the database that
-- holds a transaction id, a long bijhouding transaction, and a margin learned from a burst or a
-- lagging clock that came down only after ten minutes. Now:
--
-- * A transaction holds the horizon for one second (publicatie.LateWriterGrace) whatever it
--   does, and longer only while it has registered (it holds admhnd in row exclusive mode) and
--   is younger than max_wait (BRP_LEVERING_ADMHNDPUBLICATIE_MAXWAIT, written here by the
--   leader), or while it waits for a synchronous standby to confirm its commit.
-- * What such a transaction commits later takes the late path: its first registration more
--   than half a second after it began is recorded by the registration trigger (migration 0011),
--   and at its commit, more than half a second after it began, a deferred trigger records what
--   it registered (admhnd_vastgelegd).
-- * The leader learns the margin from what ordinary registrations show now: the registration
--   trigger samples their leads (publicatie_lead_samples) while the leader asks for them
--   (lead_sample_until), beside the leads of the late ones it records.
-- * A lowered margin holds, by the margin before it (hoog), only transactions begun before the
--   lowering committed (hoog_tot): the leader sets it a round later.

do $$ begin if to_regclass('publicatie_state') is null then -- publicatie_toestand until migration 0022
alter table publicatie_toestand add column if not exists max_wait interval not null default '2 s';
alter table publicatie_toestand add column if not exists hoog_tot timestamptz not null default '-infinity';
alter table publicatie_toestand add column if not exists lead_sample_rate float8 not null default 0;
alter table publicatie_toestand add column if not exists lead_sample_until timestamptz not null default '-infinity';
end if; end $$;

-- Leads (now() - tsreg at registration) of ordinary registrations, sampled; the leader reads and
-- deletes them in every round.
create table if not exists publicatie_lead_samples (
    lead interval not null
);

-- The open transactions of this database's clients, but the service's own sessions
-- (dbsession.ServiceSessionSQL), with whether each holds the publisher's horizon and why. The
-- publisher's horizon is the earliest xact_start of those that hold; the status page shows them.
-- Selecting registers costs a look at pg_locks per transaction; holds looks only for those
-- older than a second.
create or replace view publicatie_horizon as
select a.pid, a.application_name, a.state, a.wait_event, a.xact_start,
       extract(epoch from clock_timestamp() - a.xact_start)::float8 as age_seconds,
       exists (select from pg_locks l where l.pid = a.pid and l.locktype = 'relation'
               and l.relation = 'admhnd'::regclass and l.mode = 'RowExclusiveLock') as registers,
       case
           when clock_timestamp() - a.xact_start < interval '1 s' then true
           when not exists (select from pg_locks l where l.pid = a.pid and l.locktype = 'relation'
                            and l.relation = 'admhnd'::regclass and l.mode = 'RowExclusiveLock') then false
           else a.wait_event is not distinct from 'SyncRep'
                or clock_timestamp() - a.xact_start < (select coalesce(max(max_wait), '2 s') from publicatie_toestand)
       end as holds
from pg_stat_activity a
where a.datname = current_database() and a.pid <> pg_backend_pid()
  and a.backend_type = 'client backend' and a.xact_start is not null
  and not coalesce(a.application_name like 'publicatie[%' or a.application_name like 'mutatielevering[%', false);

-- At commit (deferred): a transaction that commits more than half a second after it began may
-- have been left out of the horizon (it holds it for max_wait, at least a second) while the
-- publisher's stand passed what it registered. Its registrations still to be delivered are
-- recorded as late ones are: the first 100 of the transaction one by one, then one record in
-- publicatie_herlees, at the first accepted tsreg, that makes the leader build its view again
-- from the oldest. One plpgsql
-- call per registration at its commit, which returns at once for an ordinary one.
create or replace function publicatie_vastgelegd() returns trigger
    language plpgsql security definer set search_path from current as $$
begin
    -- An ordinary registration, or a transaction that has already made the view be built
    -- again: nothing more to record (a bulk load pays these two tests a row).
    if clock_timestamp() - now() <= interval '0.5 s' or current_setting('brp_levering.herlees', true) = '1' then
        return null;
    end if;
    if not publicatie_tsreg_accepted(new.tsreg) or new.statuslev is not null then
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
drop trigger if exists admhnd_vastgelegd on admhnd;
create constraint trigger admhnd_vastgelegd after insert on admhnd
    deferrable initially deferred
    for each row execute function publicatie_vastgelegd();

-- Migration 0011's registration trigger, and: a registration that records nothing late samples
-- its lead, at the rate the leader asks for, while it asks (lead_sample_until).
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
    where (laat or tsreg < now() - v.marge) and publicatie_tsreg_accepted(tsreg);
    if n = 0 then
        if now() < v.lead_sample_until and random() < v.lead_sample_rate then
            insert into publicatie_lead_samples (lead)
            select now() - min(tsreg) from nieuw where publicatie_tsreg_accepted(tsreg) having count(*) > 0;
        end if;
        return null;
    elsif publicatie_nakomer_ruimte(n) then
        insert into publicatie_nakomer (admhnd_id, voorsprong)
        select id, case when not laat and now() - tsreg <= v.grens then now() - tsreg end from nieuw
        where (laat or tsreg < now() - v.marge) and publicatie_tsreg_accepted(tsreg)
        order by id
        on conflict (admhnd_id) do update set voorsprong = excluded.voorsprong;
    else
        insert into publicatie_herlees (tsreg, admhnd_id)
        select tsreg, id from nieuw
        where (laat or tsreg < now() - v.marge) and publicatie_tsreg_accepted(tsreg)
        order by tsreg, id limit 1;
    end if;
    return null;
end $$;
