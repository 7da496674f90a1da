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
-- The function runs with its caller's rights (it takes locks and reads the statement's own
-- rows, which any writer may) and names everything of pg_catalog qualified, so a caller's
-- search_path changes nothing in it; without a SET clause it costs a registration less (a
-- function with one saves and restores the settings at every call). Nobody calls it but the
-- trigger. A statement's links count once per row: a person linked twice costs two of the 16.

create or replace function publicatie_persons_open() returns trigger
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
    perform pg_catalog.pg_advisory_xact_lock_shared(7345003, (r.persoon_id % 2147483647)::integer)
    from (select persoon_id from nieuw limit 17 - taken) r;
    get diagnostics n = row_count;
    if taken + n > 16 then
        perform pg_catalog.pg_advisory_xact_lock_shared(7345004, 0);
        n := 17 - taken;
    end if;
    perform pg_catalog.set_config('brp_levering.persons_open', (taken + n)::text, true);
    return null;
end $$;
revoke execute on function publicatie_persons_open() from public;
drop trigger if exists admhnd_persoon_open on admhnd_persoon;
create trigger admhnd_persoon_open after insert on admhnd_persoon referencing new table as nieuw
    for each statement execute function publicatie_persons_open();

-- Migration 0016's view, where a transaction that holds the bulk writer's lock holds the horizon
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
                or clock_timestamp() - s.xact_start < (select coalesce(max(max_wait), '2 s') from publicatie_toestand)
       end as holds
from publicatie_sessions() s
left join (
    select distinct l.pid from pg_locks l
    where l.locktype = 'advisory' and l.classid = 7345004 and l.objid = 0 and l.objsubid = 2
      and l.database = (select oid from pg_database where datname = current_database())
) b on b.pid = s.pid;
