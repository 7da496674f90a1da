-- What linking persons to handelingen (an insert into admhnd_persoon) runs of the service
-- (docs/design.md, "Late arrivals", "Open writers"; migrations 0009, 0011, 0014, 0018): one
-- call per inserting statement. Security definer with a fixed search_path, as
-- registration.sql says why.
--
-- Open writers: every statement that inserts into admhnd_persoon takes a transaction-scoped
-- shared advisory lock per person it links, pg_advisory_xact_lock_shared(7345003, key), where
-- key is persoon_id % 2147483647 (publicatie.WriterKey computes the same). The publisher reads
-- them from pg_locks in the statement that reads its horizon, before its intake reads what
-- committed, and holds back those persons' work (like a person in levering) for as long as the
-- transaction stays open. Two persons with one key hold each other back: nothing worse.
-- PostgreSQL's shared lock table is small (max_locks_per_transaction x max_connections, 6,400
-- by default for the whole cluster), so a transaction takes person locks for 16 links
-- (publicatie.MaxWriterLocks; the statement that passes 16 locks one more). One that links
-- more persons then takes the bulk writer's lock, pg_advisory_xact_lock_shared(7345004, 0),
-- and no others: it holds the horizon for as long as it stays open. The locks are shared, so
-- writers never wait for each other; nothing of the service takes them exclusively. The
-- session setting brp_levering.persons_open counts the links a transaction locked.
--
-- Persons added to another transaction's handeling are late: the handeling's row is held (key
-- share, as the foreign key does) until the commit, so that a consumer delivering it either
-- sees the persons or is seen to have delivered it, which is reported
-- (publicatie_laat_personen); added to a fout handeling they are blocked from then on
-- (publicatie_fout_changes); added to one still to be delivered they are recorded as late
-- registrations are (publicatie_nakomer, beyond 100 publicatie_herlees).
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
drop trigger if exists admhnd_persoon_laat on admhnd_persoon;
create trigger admhnd_persoon_laat after insert on admhnd_persoon referencing new table as nieuw
    for each statement execute function publicatie_personen_toegevoegd();

-- A fixed search_path, pg_temp last; no EXECUTE for PUBLIC (a trigger fires without it).
do $$
begin
    execute format('alter function publicatie_personen_toegevoegd() set search_path = pg_catalog, %I, pg_temp',
        (select n.nspname from pg_class c join pg_namespace n on n.oid = c.relnamespace where c.oid = 'admhnd'::regclass));
    execute 'revoke execute on function publicatie_personen_toegevoegd() from public';
end $$;
