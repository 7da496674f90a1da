-- A statement that registers more than 16 handelingen (a COPY, an insert ... select) takes the
-- bulk writer's lock of migration 0018, pg_advisory_xact_lock_shared(7345004, 0), so its
-- transaction holds the horizon until it ends (issue 48). Before, such a transaction held the
-- horizon while a statement ran and for max_wait from its start, and by its person links
-- after them: a load that copies its handelingen (longer than max_wait) and then, in a second
-- statement, their persons left a moment between the two in which the horizon passed handelingen
-- whose persons it could not yet know, and what the load's persons got newer meanwhile could be
-- delivered first. 16 is publicatie.MaxWriterLocks, the person links' own bound.
--
-- Migration 0015's function with one change: the count of the statement's rows comes from the
-- scan that was already there, so an ordinary registration runs no statement more.

create or replace function publicatie_geregistreerd() returns trigger
    language plpgsql security definer as $$
declare
    v publicatie_toestand;
    laat boolean := false;
    n bigint;
    registered bigint;
begin
    select * into v from publicatie_toestand;
    if not found then
        v.marge := '0';
        v.grens := '0';
    end if;
    if v.slaapt is distinct from false then
        perform pg_notify('brp_levering', '');
    end if;
    if coalesce(current_setting('brp_levering.vroeg', true), '') = '' then
        laat := clock_timestamp() - now() > interval '0.5 s';
        if not laat then
            perform set_config('brp_levering.vroeg', '1', true);
        end if;
    end if;
    if now() < v.sinds then
        v.marge := least(v.marge, v.laag);
    end if;
    select count(*) filter (where (laat or tsreg < now() - v.marge) and publicatie_tsreg_accepted(tsreg)), count(*)
    into n, registered from nieuw;
    if registered > 16 then
        perform pg_catalog.pg_advisory_xact_lock_shared(7345004, 0);
    end if;
    if n = 0 then
        if now() < v.lead_sample_until and random() < v.lead_sample_rate then
            insert into publicatie_lead_samples (lead)
            select now() - min(tsreg) from nieuw where publicatie_tsreg_accepted(tsreg) having count(*) > 0;
        end if;
        return null;
    elsif publicatie_nakomer_ruimte(n) then
        insert into publicatie_nakomer (admhnd_id, voorsprong)
        select id, case when not laat and now() - tsreg <= v.grens then now() - tsreg end from nieuw
        where (laat or tsreg < now() - v.marge) and publicatie_tsreg_accepted(tsreg)
        order by id
        on conflict (admhnd_id) do update set voorsprong = excluded.voorsprong;
    else
        insert into publicatie_herlees (tsreg, admhnd_id)
        select tsreg, id from nieuw
        where (laat or tsreg < now() - v.marge) and publicatie_tsreg_accepted(tsreg)
        order by tsreg, id limit 1;
    end if;
    return null;
end $$;

-- As migration 0016 made it: a fixed search_path; no EXECUTE for PUBLIC.
do $$
begin
    execute format('alter function publicatie_geregistreerd() security definer set search_path = pg_catalog, %I, pg_temp',
        (select n.nspname from pg_class c join pg_namespace n on n.oid = c.relnamespace where c.oid = 'admhnd'::regclass));
    execute 'revoke execute on function publicatie_geregistreerd() from public';
end $$;
