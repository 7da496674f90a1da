-- What a registration (an insert into admhnd) runs of the service (docs/design.md, "Late
-- arrivals", "The horizon", "Open writers"; migrations 0011, 0015, 0019). The functions are
-- security definer: any writer of admhnd fires them (bijhouding, an operator by hand), and they
-- write the service's tables, on which those writers need no right. Their bodies name the
-- service's objects unqualified: with the fixed search_path set below that is the one schema
-- that holds admhnd, which only its owner may create objects in (schema/grants).

-- One statement trigger per registering statement: plpgsql calls are what a registration pays
-- for, so one, reading one row. It
-- * wakes a sleeping publisher (publicatie_state.sleeping: nothing in levering, nothing new);
-- * records a registration beyond the lead margin, or by a late writer, in publicatie_nakomer
--   with its lead and where it came from (bron: publicatie_lead_source()), so that the
--   publisher takes it into its view at its place and learns the lead; a transaction that
--   records more than 100 leaves only the oldest of each further statement in
--   publicatie_herlees, and the view is built again. Only handelingen still to be
--   delivered (statuslev NULL) are recorded or sampled: one inserted with a status (a fout set
--   by hand, a repair) is not the publisher's to take in;
-- * samples the lead of a registration that records nothing, with where it came from, at the
--   rate the leader asks for, while it asks (lead_sample_until); a lead above half the margin
--   (and 50 ms) always: an application server whose clock is behind and that registers seldom
--   is seen under load too, so the leader remembers its clock (publicatie/lead.go, sources);
-- * takes the bulk writer's lock, pg_advisory_xact_lock_shared(7345004, 0), for a statement
--   that registers more than 16 handelingen (publicatie.MaxWriterLocks): its transaction then
--   holds the horizon until it ends (publicatie_horizon).
--
-- A late writer is a transaction whose first registration comes more than half a second after
-- it began: until its first write it had no transaction id, and the horizon stops waiting for
-- such a transaction after a second (publicatie.LateWriterGrace), so what it registers may lie
-- behind the publisher's stand. Half of that, so that a transaction between the two is recorded
-- although the horizon still holds it. A transaction that registered early held the horizon back
-- from then on: the first registration marks it (brp_levering.vroeg).
create or replace function publicatie_geregistreerd() returns trigger
    language plpgsql security definer as $$
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
    select count(*) filter (where statuslev is null and (laat or tsreg < now() - v.margin) and publicatie_tsreg_accepted(tsreg)), count(*),
        min(tsreg) filter (where statuslev is null and publicatie_tsreg_accepted(tsreg))
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
        where statuslev is null and (laat or tsreg < now() - v.margin) and publicatie_tsreg_accepted(tsreg)
        order by id
        on conflict (admhnd_id) do update set voorsprong = excluded.voorsprong, bron = excluded.bron;
    else
        insert into publicatie_herlees (tsreg, admhnd_id)
        select tsreg, id from nieuw
        where statuslev is null and (laat or tsreg < now() - v.margin) and publicatie_tsreg_accepted(tsreg)
        order by tsreg, id limit 1;
    end if;
    return null;
end $$;
drop trigger if exists admhnd_geregistreerd on admhnd;
create trigger admhnd_geregistreerd after insert on admhnd referencing new table as nieuw
    for each statement execute function publicatie_geregistreerd();

-- At commit (deferred): a transaction that commits more than half a second after it began may
-- have been left out of the horizon (it holds it for max_wait, at least a second) while the
-- publisher's stand passed what it registered. Its registrations still to be delivered are
-- recorded as late ones are: the first 100 of the transaction one by one, then one record in
-- publicatie_herlees, at the first accepted tsreg, that makes the leader build its view again
-- from the oldest. One plpgsql call per registration at its commit, which returns at once for
-- an ordinary one.
create or replace function publicatie_vastgelegd() returns trigger
    language plpgsql security definer as $$
begin
    -- An ordinary registration, or a transaction that has already made the view be built
    -- again: nothing more to record (a bulk load pays these two tests a row).
    if clock_timestamp() - now() <= interval '0.5 s' or current_setting('brp_levering.herlees', true) = '1' then
        return null;
    end if;
    if not publicatie_tsreg_accepted(new.tsreg) or new.statuslev is not null then
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
drop trigger if exists admhnd_vastgelegd on admhnd;
create constraint trigger admhnd_vastgelegd after insert on admhnd
    deferrable initially deferred
    for each row execute function publicatie_vastgelegd();

-- A fixed search_path, pg_temp last; no EXECUTE for PUBLIC (a trigger fires without it).
do $$
declare
    path text := format('pg_catalog, %I, pg_temp',
        (select n.nspname from pg_class c join pg_namespace n on n.oid = c.relnamespace where c.oid = 'admhnd'::regclass));
begin
    execute format('alter function publicatie_geregistreerd() set search_path = %s', path);
    execute format('alter function publicatie_vastgelegd() set search_path = %s', path);
    execute 'revoke execute on function publicatie_geregistreerd(), publicatie_vastgelegd() from public';
end $$;
