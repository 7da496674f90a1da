-- Late arrivals (docs/robustness.md, "Late arrivals"): what bijhouding can commit after the
-- publisher may already have passed it, and what would otherwise break the order per person.
--
-- 1. Persons added to a handeling after the handeling itself was committed (another
--    transaction), or to a handeling registered with a tsreg in the past.
-- 2. A "late writer": a transaction that registers its first handeling more than half a second
--    after it began, with tsreg = now() (its start). Until its first write it has no
--    transaction id, and the publisher's horizon leaves such sessions out after one second
--    (a pg_dump or a report must not hold back publication), so its handelingen may lie behind
--    the publisher's stand.
--
-- Both are recorded in publicatie_herlees, so the leader builds its view again and sees the
-- handeling with all its persons. While such a transaction is open it holds advisory lock
-- 7345002 shared; a round marks handelingen in_levering only when it holds that lock
-- exclusively (publicatie/store.go, horizonSQL), so no round publishes a handeling between the
-- trigger's check below and the transaction's commit. A handeling whose person already has a
-- newer handeling published was overtaken: delivering it now would break that person's order,
-- so it is recorded in publicatie_ingehaald, and the leader sets it fout (still to be
-- delivered) or reports it (already published).

create table if not exists publicatie_ingehaald (
    admhnd_id  bigint      not null,
    persoon_id bigint      not null,
    -- the newer handeling of that person that was published first
    door_id    bigint      not null,
    tsrec      timestamptz not null default now()
);

-- Registered handelingen outside the accepted tsreg range (handeling.TsregFrom, TsregUntil)
-- are never recorded: the leader sets them fout at intake.

-- Whether this transaction registered its first handeling late (see 2 above). The first
-- registration's time is kept in a transaction-local setting; a transaction that wrote early
-- held back the horizon from then on and is never late.
create or replace function publicatie_late_writer() returns boolean
    language plpgsql as $$
declare
    eerste text := current_setting('brp_levering.eerste_registratie', true);
begin
    if coalesce(eerste, '') = '' then
        eerste := clock_timestamp()::text;
        perform set_config('brp_levering.eerste_registratie', eerste, true);
    end if;
    return eerste::timestamptz - now() > interval '0.5 s';
end $$;

-- Whether a row version (its xmin) was written by this transaction. A row written in a
-- subtransaction counts as another transaction's: a harmless extra check.
create or replace function publicatie_own_row(x xid) returns boolean
    language sql stable as $$
    select x = pg_current_xact_id_if_assigned()::xid
$$;

create or replace function publicatie_herlees_geregistreerd() returns trigger
    language plpgsql security definer set search_path from current as $$
begin
    if publicatie_late_writer() then
        insert into publicatie_herlees (tsreg, admhnd_id)
        select tsreg, id from nieuw where tsreg >= '0001-01-02' and tsreg < '9999-12-31'
        order by tsreg, id limit 1;
    else
        insert into publicatie_herlees (tsreg, admhnd_id)
        select tsreg, id from nieuw where tsreg < now() and tsreg >= '0001-01-02' and tsreg < '9999-12-31'
        order by tsreg, id limit 1;
    end if;
    return null;
end $$;

-- Persons inserted: those of another transaction's handeling, of a handeling with a tsreg in
-- the past or of a late writer are late. For ordinary bijhouding (handeling and persons in one
-- early-writing transaction, tsreg = now()) this is one index probe per person and nothing else.
create or replace function publicatie_personen_toegevoegd() returns trigger
    language plpgsql security definer set search_path from current as $$
declare
    laat_schrijver boolean := publicatie_late_writer();
begin
    if not exists (
        select from nieuw n join admhnd a on a.id = n.admhnd_id
        where laat_schrijver or a.tsreg < now() or not publicatie_own_row(a.xmin)) then
        return null;
    end if;
    -- Wait for a round that is marking, and keep rounds from marking until this commits.
    perform pg_advisory_xact_lock_shared(7345002);
    insert into publicatie_herlees (tsreg, admhnd_id)
    select a.tsreg, a.id from nieuw n join admhnd a on a.id = n.admhnd_id
    where (laat_schrijver or a.tsreg < now() or not publicatie_own_row(a.xmin))
      and a.tsreg >= '0001-01-02' and a.tsreg < '9999-12-31'
    order by a.tsreg, a.id limit 1;
    insert into publicatie_ingehaald (admhnd_id, persoon_id, door_id)
    select l.id, l.persoon_id, d.id
    from (
        select distinct a.id, a.tsreg, n.persoon_id from nieuw n join admhnd a on a.id = n.admhnd_id
        where laat_schrijver or a.tsreg < now() or not publicatie_own_row(a.xmin)
    ) l cross join lateral (
        select b.id from admhnd_persoon bp join admhnd b on b.id = bp.admhnd_id
        where bp.persoon_id = l.persoon_id and (b.tsreg, b.id) > (l.tsreg, l.id)
          and b.statuslev::text in ('in_levering', 'geleverd')
        order by b.tsreg, b.id limit 1) d;
    return null;
end $$;
drop trigger if exists admhnd_persoon_laat on admhnd_persoon;
create trigger admhnd_persoon_laat after insert on admhnd_persoon referencing new table as nieuw
    for each statement execute function publicatie_personen_toegevoegd();
