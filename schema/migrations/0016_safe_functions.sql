-- Nothing the service installs lets a caller gain rights (issue 47; docs/operations.md, "Roles
-- and rights"). Until now every trigger function was security definer with the search_path of
-- the migrating session ("set search_path from current"), which did not name pg_temp: a
-- session's temporary schema was searched first, so a writer that created a temporary table
-- named like one of the service's, with a trigger of its own, had that trigger run as the
-- function's owner. And the horizon read pg_stat_activity with the caller's rights, so the
-- service's role needed pg_read_all_stats (every session's query text in the cluster).
--
-- Now, as PostgreSQL's "Writing SECURITY DEFINER Functions Safely" says:
--
-- * The trigger functions stay security definer: any writer of admhnd and admhnd_persoon
--   fires them (bijhouding, an operator by hand), and they write the service's tables, on
--   which those writers need no right. Each gets a fixed search_path: pg_catalog, the schema
--   that holds admhnd (the service's schema in this layout, which the DBA chose, hence the
--   format below), and pg_temp last, so nothing a caller creates can stand in for an object
--   the function names. Their bodies name the service's objects unqualified: with this path
--   that is the one schema, which only its owner may create objects in (schema/grants).
-- * EXECUTE on them is revoked from PUBLIC: a trigger fires without it, and nobody calls a
--   trigger function otherwise. The rules of migration 0013 and publicatie_own_row and
--   publicatie_nakomer_ruimte are not security definer (they run with their caller's rights
--   and read nothing): PUBLIC keeps EXECUTE on them, as the release before needs.
-- * publicatie_sessions() replaces the horizon's read of pg_stat_activity: the open
--   transactions of this database's other clients, with no query text, run as its owner (who
--   needs pg_read_all_stats or superuser; the grants file gives it). EXECUTE only to the roles
--   that could read publicatie_horizon before (so a release before this one keeps running in a
--   rolling upgrade) and to those the grants file names.
-- * The service's own sessions are those with its application_name AND a role that may
--   execute publicatie_sessions(): a bijhouding session that names itself publicatie[...]
--   is still waited for.

-- The open transactions of this database's clients other than the service's own sessions:
-- what the horizon needs of them and nothing more (no query text, no client address, no
-- other database). registers: it holds admhnd in row exclusive mode (it inserted, updated or
-- deleted rows of it).
create or replace function publicatie_sessions()
    returns table (pid integer, application_name text, state text, wait_event text, xact_start timestamptz, registers boolean)
    language sql stable security definer
    as $$
    select a.pid, a.application_name, a.state, a.wait_event, a.xact_start,
           exists (select from pg_catalog.pg_locks l where l.pid = a.pid and l.locktype = 'relation'
                   and l.relation = 'admhnd'::regclass and l.mode = 'RowExclusiveLock')
    from pg_catalog.pg_stat_activity a
    where a.datname = current_database() and a.pid <> pg_backend_pid()
      and a.backend_type = 'client backend' and a.xact_start is not null
      and not coalesce((a.application_name like 'publicatie[%' or a.application_name like 'mutatielevering[%')
                       and has_function_privilege(a.usesysid, 'publicatie_sessions()', 'execute'), false)
$$;

-- Execute on publicatie_sessions(): nobody but the roles that could read the horizon before.
do $$
declare
    r text;
begin
    execute 'revoke execute on function publicatie_sessions() from public';
    for r in
        select distinct a.grantee::regrole::text
        from pg_class c, aclexplode(c.relacl) a
        where c.oid = 'publicatie_horizon'::regclass and a.privilege_type = 'SELECT' and a.grantee <> 0
    loop
        execute format('grant execute on function publicatie_sessions() to %s', r);
    end loop;
end $$;

-- Migration 0015's view, on publicatie_sessions() instead of pg_stat_activity.
create or replace view publicatie_horizon as
select s.pid, s.application_name, s.state, s.wait_event, s.xact_start,
       extract(epoch from clock_timestamp() - s.xact_start)::float8 as age_seconds,
       s.registers,
       case
           when clock_timestamp() - s.xact_start < interval '1 s' then true
           when not s.registers then false
           else s.wait_event is not distinct from 'SyncRep'
                or clock_timestamp() - s.xact_start < (select coalesce(max(max_wait), '2 s') from publicatie_toestand)
       end as holds
from publicatie_sessions() s;

-- Every security definer function of the service: a fixed search_path, no EXECUTE for PUBLIC.
do $$
declare
    path text := format('pg_catalog, %I, pg_temp',
        (select n.nspname from pg_class c join pg_namespace n on n.oid = c.relnamespace where c.oid = 'admhnd'::regclass));
    f regprocedure;
begin
    foreach f in array array[
        'publicatie_geregistreerd()', 'publicatie_vastgelegd()', 'publicatie_personen_toegevoegd()',
        'publicatie_nakomer_teruggezet()', 'publicatie_fout_changed()', 'publicatie_sessions()'
    ]::regprocedure[] loop
        execute format('alter function %s security definer set search_path = %s', f, path);
    end loop;
    foreach f in array array[
        'publicatie_geregistreerd()', 'publicatie_vastgelegd()', 'publicatie_personen_toegevoegd()',
        'publicatie_nakomer_teruggezet()', 'publicatie_fout_changed()'
    ]::regprocedure[] loop
        execute format('revoke execute on function %s from public', f);
    end loop;
end $$;
