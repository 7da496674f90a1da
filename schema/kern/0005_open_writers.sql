-- A slow bijhouding transaction delays only its own persons (issue 48): the contract layout's
-- migration 0018, on kern.his_persafgeleidadministrati (pers). Its comment says why and how.

-- kern 0001's publicatie_personen_toegevoegd, which takes the open writer's locks first.
create or replace function brp_levering.publicatie_personen_toegevoegd() returns trigger
    language plpgsql security definer as $$
declare
    aantal bigint;
    taken integer := coalesce(nullif(pg_catalog.current_setting('brp_levering.persons_open', true), ''), '0')::integer;
    linked integer;
begin
    -- Open writers (above): a lock per link, for at most 17 - taken links, then the bulk
    -- writer's lock and no more. A person linked twice is locked twice, which costs nothing.
    if taken <= 16 then
        perform pg_catalog.pg_advisory_xact_lock_shared(7345003, (r.pers % 2147483647)::integer)
        from (select pers from nieuw limit 17 - taken) r;
        get diagnostics linked = row_count;
        if taken + linked > 16 then
            perform pg_catalog.pg_advisory_xact_lock_shared(7345004, 0);
            linked := 17 - taken;
        end if;
        perform pg_catalog.set_config('brp_levering.persons_open', (taken + linked)::text, true);
    end if;
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
alter function brp_levering.publicatie_personen_toegevoegd() set search_path = pg_catalog, brp_levering, pg_temp;
revoke execute on function brp_levering.publicatie_personen_toegevoegd() from public;

-- Kern 0003's publicatie_sessions(), in plpgsql. A SQL function that cannot be inlined
-- (security definer) is planned at every call, and that planning was most of the round's
-- horizon statement (1.05 ms of it, against 0.45 ms now: docs/performance.md, "Open
-- writers"); plpgsql keeps the plan for the session. Same signature, rights and owner.
create or replace function brp_levering.publicatie_sessions()
    returns table (pid integer, application_name text, state text, wait_event text, xact_start timestamptz, registers boolean)
    language plpgsql stable security definer set search_path = pg_catalog, brp_levering, pg_temp
    as $$
begin
    return query
    select a.pid, a.application_name, a.state, a.wait_event, a.xact_start,
           exists (select from pg_catalog.pg_locks l where l.pid = a.pid and l.locktype = 'relation'
                   and l.relation = 'kern.admhnd'::regclass and l.mode = 'RowExclusiveLock')
    from pg_catalog.pg_stat_activity a
    where a.datname = current_database() and a.pid <> pg_backend_pid()
      and a.backend_type = 'client backend' and a.xact_start is not null
      and not coalesce((a.application_name like 'publicatie[%' or a.application_name like 'mutatielevering[%')
                       and has_function_privilege(a.usesysid, 'brp_levering.publicatie_sessions()', 'execute'), false);
end $$;

-- Migration 0003's view, where a transaction that holds the bulk writer's lock holds the horizon
-- until it ends, and a registering transaction holds it while it runs a statement (0018 says
-- why). pg_locks needs no right beyond what every role has. (No column is added: kern 0001
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
                or clock_timestamp() - s.xact_start < (select coalesce(max(max_wait), '2 s') from brp_levering.publicatie_toestand)
       end as holds
from brp_levering.publicatie_sessions() s
left join (
    select distinct l.pid from pg_locks l
    where l.locktype = 'advisory' and l.classid = 7345004 and l.objid = 0 and l.objsubid = 2
      and l.database = (select oid from pg_database where datname = current_database())
) b on b.pid = s.pid;
