-- What a change of a handeling's status runs of the service
-- (definitions/contract/status.sql says why and how). A release (vrijgegeven) is a change of
-- brp_levering.admhnd_levering, recorded by a trigger of its own. The functions are security
-- definer with a fixed search_path, pg_temp last, and no EXECUTE for PUBLIC.

-- Set back to be delivered: an operator's retry, the publisher's set back.
create or replace function brp_levering.publicatie_nakomer_teruggezet() returns trigger
    language plpgsql security definer set search_path = pg_catalog, brp_levering, pg_temp as $$
begin
    insert into publicatie_nakomer (admhnd_id) values (new.id)
    on conflict (admhnd_id) do update set voorsprong = null;
    if (select sleeping from publicatie_state) is distinct from false then
        perform pg_notify('brp_levering', '');
    end if;
    return null;
end $$;
drop trigger if exists brp_levering_teruggezet on kern.admhnd;
create trigger brp_levering_teruggezet after update of statuslev on kern.admhnd
    for each row when (old.statuslev <> 1 and new.statuslev = 1)
    execute function brp_levering.publicatie_nakomer_teruggezet();

-- A handeling became fout or left it.
create or replace function brp_levering.publicatie_fout_changed() returns trigger
    language plpgsql security definer set search_path = pg_catalog, brp_levering, pg_temp as $$
begin
    insert into publicatie_fout_changes (admhnd_id) values (new.id)
    on conflict (admhnd_id) do update set admhnd_id = excluded.admhnd_id;
    return null;
end $$;
drop trigger if exists brp_levering_fout_changed on kern.admhnd;
create trigger brp_levering_fout_changed after update of statuslev on kern.admhnd
    for each row when ((old.statuslev = 5) <> (new.statuslev = 5))
    execute function brp_levering.publicatie_fout_changed();

-- An operator released a fout, or took the release back. As in the contract layout, only a
-- fout handeling's release is a change of its fout state (one index probe).
create or replace function brp_levering.publicatie_vrijgave_changed() returns trigger
    language plpgsql security definer set search_path = pg_catalog, brp_levering, pg_temp as $$
begin
    insert into publicatie_fout_changes (admhnd_id)
    select new.admhnd_id where exists (select from kern.admhnd a where a.id = new.admhnd_id and a.statuslev = 5)
    on conflict (admhnd_id) do update set admhnd_id = excluded.admhnd_id;
    return null;
end $$;
drop trigger if exists admhnd_levering_vrijgegeven on brp_levering.admhnd_levering;
create trigger admhnd_levering_vrijgegeven after insert on brp_levering.admhnd_levering
    for each row when (new.vrijgegeven is not null)
    execute function brp_levering.publicatie_vrijgave_changed();
drop trigger if exists admhnd_levering_vrijgave_changed on brp_levering.admhnd_levering;
create trigger admhnd_levering_vrijgave_changed after update of vrijgegeven on brp_levering.admhnd_levering
    for each row when (old.vrijgegeven is distinct from new.vrijgegeven)
    execute function brp_levering.publicatie_vrijgave_changed();

revoke execute on function brp_levering.publicatie_nakomer_teruggezet(), brp_levering.publicatie_fout_changed(),
    brp_levering.publicatie_vrijgave_changed() from public;
