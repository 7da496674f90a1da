-- The publisher's horizon (docs/design.md, "The horizon"; migrations 0015, 0016 and 0018): the
-- open transactions of this database's other clients, with whether each holds the horizon and
-- why. The publisher's horizon is the earliest xact_start of those that hold; the status page
-- shows them.

-- The open transactions of this database's clients other than the service's own sessions: what
-- the horizon needs of them and nothing more (no query text, no client address, no other
-- database), run as its owner (who needs pg_read_all_stats or superuser; the grants file gives
-- it). registers: it holds admhnd in row exclusive mode (it inserted, updated or deleted rows
-- of it); null while it is younger than a second (publicatie.LateWriterGrace): it holds the
-- horizon whatever it does then, and not looking saves a read of pg_locks, which takes every
-- lock-manager partition lock that registrations take their advisory locks through (migration
-- 0023). The service's own sessions are those with its application_name AND a role that may
-- execute this function: a bijhouding session that names itself publicatie[...] is still
-- waited for. In plpgsql: a SQL function that cannot be inlined (security definer) is planned
-- at every call, and that planning was most of the round's horizon statement; plpgsql keeps
-- the plan for the session.
create or replace function publicatie_sessions()
    returns table (pid integer, application_name text, state text, wait_event text, xact_start timestamptz, registers boolean)
    language plpgsql stable security definer
    as $$
begin
    return query
    select a.pid, a.application_name, a.state, a.wait_event, a.xact_start,
           case when clock_timestamp() - a.xact_start >= interval '1 s' then
               a.pid in (select l.pid from pg_catalog.pg_locks l where l.locktype = 'relation'
                         and l.relation = 'admhnd'::regclass and l.mode = 'RowExclusiveLock')
           end
    from pg_catalog.pg_stat_activity a
    where a.datname = current_database() and a.pid <> pg_backend_pid()
      and a.backend_type = 'client backend' and a.xact_start is not null
      and not coalesce((a.application_name like 'publicatie[%' or a.application_name like 'mutatielevering[%')
                       and has_function_privilege(a.usesysid, 'publicatie_sessions()', 'execute'), false);
end $$;

-- A fixed search_path, pg_temp last, so nothing a caller creates can stand in for an object the
-- function names (the schema that holds admhnd, which the DBA chose). EXECUTE only to the roles
-- that may read publicatie_horizon (so a release before migration 0016 keeps running in a
-- rolling upgrade) and to those the grants file names.
do $$
declare
    r text;
begin
    execute format('alter function publicatie_sessions() security definer set search_path = pg_catalog, %I, pg_temp',
        (select n.nspname from pg_class c join pg_namespace n on n.oid = c.relnamespace where c.oid = 'admhnd'::regclass));
    execute 'revoke execute on function publicatie_sessions() from public';
    for r in
        select distinct a.grantee::regrole::text
        from pg_class c, aclexplode(c.relacl) a
        where c.oid = 'publicatie_horizon'::regclass and a.privilege_type = 'SELECT' and a.grantee <> 0
    loop
        execute format('grant execute on function publicatie_sessions() to %s', r);
    end loop;
end $$;

-- A transaction holds the horizon for one second (publicatie.LateWriterGrace) whatever it
-- does; longer only while it has registered and runs a statement, or is younger than max_wait
-- (BRP_LEVERING_ADMHNDPUBLICATIE_MAXWAIT, written by the leader), or waits for a synchronous
-- standby to confirm its commit; and for as long as it stays open when it holds the bulk
-- writer's lock (pg_advisory_xact_lock_shared(7345004, 0), taken by the registration and
-- person link triggers: docs/design.md, "Open writers"). The trigger takes its locks at the
-- end of a statement, so a COPY or an insert of many rows that takes longer than max_wait
-- would otherwise let the horizon pass it before it held a lock. The bulk writer's lock is
-- looked up only for a transaction older than a second (an uncorrelated subquery, read once
-- when first needed), registers is null for a younger one, and a null registers holds as one
-- that registers does: the function's second may end a moment before the view's. pg_locks
-- needs no right beyond what every role has.
create or replace view publicatie_horizon as
select s.pid, s.application_name, s.state, s.wait_event, s.xact_start,
       extract(epoch from clock_timestamp() - s.xact_start)::float8 as age_seconds,
       s.registers,
       case
           when clock_timestamp() - s.xact_start < interval '1 s' then true
           when s.pid in (
               select l.pid from pg_locks l
               where l.locktype = 'advisory' and l.classid = 7345004 and l.objid = 0 and l.objsubid = 2
                 and l.database = (select oid from pg_database where datname = current_database())
           ) then true
           when not s.registers then false
           else s.wait_event is not distinct from 'SyncRep' or s.state = 'active'
                or clock_timestamp() - s.xact_start < (select coalesce(max(max_wait), '2 s') from publicatie_state)
       end as holds
from publicatie_sessions() s;
