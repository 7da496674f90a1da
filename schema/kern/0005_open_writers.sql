-- A slow bijhouding transaction delays only its own persons (issue 48): the contract layout's
-- migration 0018, on kern.his_persafgeleidadministrati (pers). Its comment says why and how.

create or replace function brp_levering.publicatie_persons_open() returns trigger
    language plpgsql as $$
declare
    taken integer := coalesce(nullif(pg_catalog.current_setting('brp_levering.persons_open', true), ''), '0')::integer;
    n integer;
begin
    if taken > 16 then
        return null; -- the bulk lock is held already
    end if;
    -- One lock per row (a person linked twice is locked twice, which costs nothing more), at
    -- most 17 - taken of them; more rows than that make it a bulk writer.
    perform pg_catalog.pg_advisory_xact_lock_shared(7345003, (r.pers % 2147483647)::integer)
    from (select pers from nieuw limit 17 - taken) r;
    get diagnostics n = row_count;
    if taken + n > 16 then
        perform pg_catalog.pg_advisory_xact_lock_shared(7345004, 0);
        n := 17 - taken;
    end if;
    perform pg_catalog.set_config('brp_levering.persons_open', (taken + n)::text, true);
    return null;
end $$;
revoke execute on function brp_levering.publicatie_persons_open() from public;
drop trigger if exists brp_levering_persons_open on kern.his_persafgeleidadministrati;
create trigger brp_levering_persons_open after insert on kern.his_persafgeleidadministrati
    referencing new table as nieuw
    for each statement execute function brp_levering.publicatie_persons_open();

-- Migration 0003's view, where a transaction that holds the bulk writer's lock holds the horizon
-- until it ends. pg_locks needs no right beyond what every role has. (No column is added:
-- migration 0015 runs again over this view when migrate is interrupted before it records.)
create or replace view publicatie_horizon as
select s.pid, s.application_name, s.state, s.wait_event, s.xact_start,
       extract(epoch from clock_timestamp() - s.xact_start)::float8 as age_seconds,
       s.registers,
       case
           when clock_timestamp() - s.xact_start < interval '1 s' then true
           when b.pid is not null then true
           when not s.registers then false
           else s.wait_event is not distinct from 'SyncRep'
                or clock_timestamp() - s.xact_start < (select coalesce(max(max_wait), '2 s') from brp_levering.publicatie_toestand)
       end as holds
from brp_levering.publicatie_sessions() s
left join (
    select distinct l.pid from pg_locks l
    where l.locktype = 'advisory' and l.classid = 7345004 and l.objid = 0 and l.objsubid = 2
      and l.database = (select oid from pg_database where datname = current_database())
) b on b.pid = s.pid;
