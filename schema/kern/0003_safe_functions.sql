-- Nothing the service installs lets a caller gain rights (issue 47): the contract layout's
-- migration 0016 for the kern layout, where the service's schema is brp_levering. Every
-- trigger function stays security definer (bijhouding's inserts into kern.admhnd and
-- kern.his_persafgeleidadministrati fire them, and they write brp_levering's tables, on which
-- bijhouding needs no right) with a fixed search_path, pg_temp last, and no EXECUTE for
-- PUBLIC. publicatie_sessions() replaces the horizon's read of pg_stat_activity. See
-- migrations/0016_safe_functions.sql for the reasons.

create or replace function publicatie_sessions()
    returns table (pid integer, application_name text, state text, wait_event text, xact_start timestamptz, registers boolean)
    language sql stable security definer set search_path = pg_catalog, brp_levering, pg_temp
    as $$
    select a.pid, a.application_name, a.state, a.wait_event, a.xact_start,
           exists (select from pg_catalog.pg_locks l where l.pid = a.pid and l.locktype = 'relation'
                   and l.relation = 'kern.admhnd'::regclass and l.mode = 'RowExclusiveLock')
    from pg_catalog.pg_stat_activity a
    where a.datname = current_database() and a.pid <> pg_backend_pid()
      and a.backend_type = 'client backend' and a.xact_start is not null
      and not coalesce((a.application_name like 'publicatie[%' or a.application_name like 'mutatielevering[%')
                       and has_function_privilege(a.usesysid, 'brp_levering.publicatie_sessions()', 'execute'), false)
$$;

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

create or replace view publicatie_horizon as
select s.pid, s.application_name, s.state, s.wait_event, s.xact_start,
       extract(epoch from clock_timestamp() - s.xact_start)::float8 as age_seconds,
       s.registers,
       case
           when clock_timestamp() - s.xact_start < interval '1 s' then true
           when not s.registers then false
           else s.wait_event is not distinct from 'SyncRep'
                or clock_timestamp() - s.xact_start < (select coalesce(max(max_wait), '2 s') from brp_levering.publicatie_toestand)
       end as holds
from brp_levering.publicatie_sessions() s;

alter function brp_levering.publicatie_geregistreerd() set search_path = pg_catalog, brp_levering, pg_temp;
alter function brp_levering.publicatie_vastgelegd() set search_path = pg_catalog, brp_levering, pg_temp;
alter function brp_levering.publicatie_nakomer_teruggezet() set search_path = pg_catalog, brp_levering, pg_temp;
alter function brp_levering.publicatie_fout_changed() set search_path = pg_catalog, brp_levering, pg_temp;
alter function brp_levering.publicatie_vrijgave_changed() set search_path = pg_catalog, brp_levering, pg_temp;
alter function brp_levering.publicatie_personen_toegevoegd() set search_path = pg_catalog, brp_levering, pg_temp;
revoke execute on function brp_levering.publicatie_geregistreerd(), brp_levering.publicatie_vastgelegd(),
    brp_levering.publicatie_nakomer_teruggezet(), brp_levering.publicatie_fout_changed(),
    brp_levering.publicatie_vrijgave_changed(), brp_levering.publicatie_personen_toegevoegd() from public;
