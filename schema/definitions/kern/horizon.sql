-- The publisher's horizon (definitions/contract/horizon.sql says why and how), registering
-- being a row exclusive lock on kern.admhnd.

create or replace function brp_levering.publicatie_sessions()
    returns table (pid integer, application_name text, state text, wait_event text, xact_start timestamptz, registers boolean)
    language plpgsql stable security definer set search_path = pg_catalog, brp_levering, pg_temp
    as $$
begin
    return query
    select a.pid, a.application_name, a.state, a.wait_event, a.xact_start,
           case when clock_timestamp() - a.xact_start >= interval '1 s' then
               a.pid in (select l.pid from pg_catalog.pg_locks l where l.locktype = 'relation'
                         and l.relation = 'kern.admhnd'::regclass and l.mode = 'RowExclusiveLock')
           end
    from pg_catalog.pg_stat_activity a
    where a.datname = current_database() and a.pid <> pg_backend_pid()
      and a.backend_type = 'client backend' and a.xact_start is not null
      and not coalesce((a.application_name like 'publicatie[%' or a.application_name like 'mutatielevering[%')
                       and has_function_privilege(a.usesysid, 'brp_levering.publicatie_sessions()', 'execute'), false);
end $$;

do $$
declare
    r text;
begin
    revoke execute on function brp_levering.publicatie_sessions() from public;
    for r in
        select distinct a.grantee::regrole::text
        from pg_class c, aclexplode(c.relacl) a
        where c.oid = 'brp_levering.publicatie_horizon'::regclass and a.privilege_type = 'SELECT' and a.grantee <> 0
    loop
        execute format('grant execute on function brp_levering.publicatie_sessions() to %s', r);
    end loop;
end $$;

create or replace view brp_levering.publicatie_horizon as
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
                or clock_timestamp() - s.xact_start < (select coalesce(max(max_wait), '2 s') from brp_levering.publicatie_state)
       end as holds
from brp_levering.publicatie_sessions() s;
