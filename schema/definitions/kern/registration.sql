-- What a registration (an insert into kern.admhnd) runs of the service
-- (definitions/contract/registration.sql says why and how). Besides, the registration trigger
-- records handelingen inserted in fout (bijhouding does not; a repair by hand may). Rows of
-- status 2 (an initial load) are never recorded. The functions are security definer with a
-- fixed search_path, pg_temp last, and no EXECUTE for PUBLIC.

create or replace function brp_levering.publicatie_geregistreerd() returns trigger
    language plpgsql security definer set search_path = pg_catalog, brp_levering, pg_temp as $$
declare
    v publicatie_state;
    laat boolean := false;
    n bigint;
    registered bigint;
    oudste timestamptz;
begin
    select * into v from publicatie_state;
    if not found then
        v.margin := '0';
        v.max_lead := '0';
    end if;
    if v.sleeping is distinct from false then
        perform pg_notify('brp_levering', '');
    end if;
    if coalesce(current_setting('brp_levering.vroeg', true), '') = '' then
        laat := clock_timestamp() - now() > interval '0.5 s';
        if not laat then
            perform set_config('brp_levering.vroeg', '1', true);
        end if;
    end if;
    if now() < v.margins_until then
        v.margin := least(v.margin, v.low_margin);
    end if;
    insert into publicatie_fout_changes (admhnd_id)
    select id from nieuw where statuslev = 5 order by id
    on conflict (admhnd_id) do update set admhnd_id = excluded.admhnd_id;
    select count(*) filter (where statuslev = 1 and (laat or tsreg < now() - v.margin) and publicatie_tsreg_accepted(tsreg)), count(*),
        min(tsreg) filter (where statuslev = 1 and publicatie_tsreg_accepted(tsreg))
    into n, registered, oudste from nieuw;
    if registered > 16 then
        perform pg_catalog.pg_advisory_xact_lock_shared(7345004, 0);
    end if;
    if n = 0 then
        if oudste is not null and now() < v.lead_sample_until
            and (random() < v.lead_sample_rate or now() - oudste > greatest(v.margin / 2, interval '50 ms')) then
            insert into publicatie_lead_samples (lead, source)
            values (now() - oudste, publicatie_lead_source());
        end if;
        return null;
    elsif publicatie_nakomer_ruimte(n) then
        insert into publicatie_nakomer (admhnd_id, voorsprong, bron)
        select id, case when not laat and now() - tsreg <= v.max_lead then now() - tsreg end, publicatie_lead_source()
        from nieuw
        where statuslev = 1 and (laat or tsreg < now() - v.margin) and publicatie_tsreg_accepted(tsreg)
        order by id
        on conflict (admhnd_id) do update set voorsprong = excluded.voorsprong, bron = excluded.bron;
    else
        insert into publicatie_herlees (tsreg, admhnd_id)
        select tsreg, id from nieuw
        where statuslev = 1 and (laat or tsreg < now() - v.margin) and publicatie_tsreg_accepted(tsreg)
        order by tsreg, id limit 1;
    end if;
    return null;
end $$;
drop trigger if exists brp_levering_geregistreerd on kern.admhnd;
create trigger brp_levering_geregistreerd after insert on kern.admhnd referencing new table as nieuw
    for each statement execute function brp_levering.publicatie_geregistreerd();

create or replace function brp_levering.publicatie_vastgelegd() returns trigger
    language plpgsql security definer set search_path = pg_catalog, brp_levering, pg_temp as $$
begin
    if clock_timestamp() - now() <= interval '0.5 s' or current_setting('brp_levering.herlees', true) = '1' then
        return null;
    end if;
    if not publicatie_tsreg_accepted(new.tsreg) or new.statuslev <> 1 then
        return null;
    end if;
    if publicatie_nakomer_ruimte(1) then
        insert into publicatie_nakomer (admhnd_id) values (new.id)
        on conflict (admhnd_id) do update set voorsprong = null;
    else
        perform set_config('brp_levering.herlees', '1', true);
        insert into publicatie_herlees (tsreg, admhnd_id) values (publicatie_tsreg_from(), 0);
    end if;
    return null;
end $$;
drop trigger if exists brp_levering_vastgelegd on kern.admhnd;
create constraint trigger brp_levering_vastgelegd after insert on kern.admhnd
    deferrable initially deferred
    for each row execute function brp_levering.publicatie_vastgelegd();

revoke execute on function brp_levering.publicatie_geregistreerd(), brp_levering.publicatie_vastgelegd() from public;
