-- A slow bijhouding transaction delays only its own persons (issue 48; docs/design.md, "Open
-- writers"). The horizon holds a registering transaction for max_wait at most; what it commits
-- later is late, and a late handeling whose person got a newer one delivered meanwhile could
-- only end fout (ingehaald). Now the publisher also learns which persons an open transaction
-- links handelingen to, before it commits, and holds back those persons' work (like a person
-- in levering) for as long as it stays open:
--
-- * Every statement that inserts into admhnd_persoon takes a transaction-scoped shared
--   advisory lock per person it links: pg_advisory_xact_lock_shared(7345003, key), where key
--   is persoon_id % 2147483647 (publicatie.WriterKey computes the same). The publisher reads
--   them from pg_locks in the statement that reads its horizon, before its intake reads what
--   committed: a transaction whose lock it no longer sees has committed, and its rows are in
--   the intake's snapshot. Two persons with one key hold each other back: nothing worse.
-- * PostgreSQL's shared lock table is small (max_locks_per_transaction x max_connections,
--   6,400 by default for the whole cluster), so a transaction takes person locks for 16 links
--   (publicatie.MaxWriterLocks; the statement that passes 16 locks one more). One that links
--   more persons then takes one lock more and no others,
--   pg_advisory_xact_lock_shared(7345004, 0), "a bulk writer is open": it holds the horizon
--   for as long as it stays open, whatever max_wait says (publicatie_horizon.holds), as every
--   registering transaction did before max_wait. A load of 100,000 persons in one transaction
--   holds everyone back until it commits, and then nothing it registered is late.
-- * The locks are shared, so writers never wait for each other; nothing of the service takes
--   them exclusively. Another application that takes advisory locks on (7345003, n) or
--   (7345004, 0) in exclusive mode would make bijhouding wait: the two numbers are the
--   service's (docs/operations.md, "Roles and rights").
--
-- The locks are taken first thing in the person link's trigger function (migration 0014's
-- publicatie_personen_toegevoegd, redefined here with the same body after them): a second
-- trigger of its own cost a registration more (docs/performance.md, "Open writers").
-- The session setting brp_levering.persons_open counts the links a transaction locked.

create or replace function publicatie_personen_toegevoegd() returns trigger
    language plpgsql security definer as $$
declare
    aantal bigint;
    taken integer := coalesce(nullif(pg_catalog.current_setting('brp_levering.persons_open', true), ''), '0')::integer;
    linked integer;
begin
    -- Open writers (above): a lock per link, for at most 17 - taken links, then the bulk
    -- writer's lock and no more. A person linked twice is locked twice, which costs nothing.
    if taken <= 16 then
        perform pg_catalog.pg_advisory_xact_lock_shared(7345003, (r.persoon_id % 2147483647)::integer)
        from (select persoon_id from nieuw limit 17 - taken) r;
        get diagnostics linked = row_count;
        if taken + linked > 16 then
            perform pg_catalog.pg_advisory_xact_lock_shared(7345004, 0);
            linked := 17 - taken;
        end if;
        perform pg_catalog.set_config('brp_levering.persons_open', (taken + linked)::text, true);
    end if;
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

-- Migration 0016's publicatie_sessions(), in plpgsql. A SQL function that cannot be inlined
-- (security definer) is planned at every call, and that planning was most of the round's
-- horizon statement (1.05 ms of it, against 0.45 ms now: docs/performance.md, "Open
-- writers"); plpgsql keeps the plan for the session. Same signature, rights and owner.
create or replace function publicatie_sessions()
    returns table (pid integer, application_name text, state text, wait_event text, xact_start timestamptz, registers boolean)
    language plpgsql stable security definer
    as $$
begin
    return query
    select a.pid, a.application_name, a.state, a.wait_event, a.xact_start,
           exists (select from pg_catalog.pg_locks l where l.pid = a.pid and l.locktype = 'relation'
                   and l.relation = 'admhnd'::regclass and l.mode = 'RowExclusiveLock')
    from pg_catalog.pg_stat_activity a
    where a.datname = current_database() and a.pid <> pg_backend_pid()
      and a.backend_type = 'client backend' and a.xact_start is not null
      and not coalesce((a.application_name like 'publicatie[%' or a.application_name like 'mutatielevering[%')
                       and has_function_privilege(a.usesysid, 'publicatie_sessions()', 'execute'), false);
end $$;

-- As migration 0016 made them: security definer with a fixed search_path; no EXECUTE for PUBLIC
-- on the trigger function (publicatie_sessions() keeps its grants).
do $$
declare
    path text := format('pg_catalog, %I, pg_temp',
        (select n.nspname from pg_class c join pg_namespace n on n.oid = c.relnamespace where c.oid = 'admhnd'::regclass));
begin
    execute format('alter function publicatie_personen_toegevoegd() security definer set search_path = %s', path);
    execute format('alter function publicatie_sessions() security definer set search_path = %s', path);
    execute 'revoke execute on function publicatie_personen_toegevoegd() from public';
end $$;

-- Migration 0016's view, where a transaction that holds the bulk writer's lock holds the horizon
-- until it ends, and a registering transaction holds it while it runs a statement, whatever
-- max_wait says: the trigger takes the locks at the end of a statement, so a COPY or an insert
-- of many rows that takes longer than max_wait would otherwise have let the horizon pass it
-- (and later handelingen of its persons be delivered before it) before it held a lock.
-- pg_locks needs no right beyond what every role has. (No column is added: migration 0015
-- runs again over this view when migrate is interrupted before it records.)
create or replace view publicatie_horizon as
select s.pid, s.application_name, s.state, s.wait_event, s.xact_start,
       extract(epoch from clock_timestamp() - s.xact_start)::float8 as age_seconds,
       s.registers,
       case
           when clock_timestamp() - s.xact_start < interval '1 s' then true
           when b.pid is not null then true
           when not s.registers then false
           else s.wait_event is not distinct from 'SyncRep' or s.state = 'active'
                or clock_timestamp() - s.xact_start < (select coalesce(max(max_wait), '2 s') from publicatie_toestand)
       end as holds
from publicatie_sessions() s
left join (
    select distinct l.pid from pg_locks l
    where l.locktype = 'advisory' and l.classid = 7345004 and l.objid = 0 and l.objsubid = 2
      and l.database = (select oid from pg_database where datname = current_database())
) b on b.pid = s.pid;
