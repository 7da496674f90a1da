-- What a change of a handeling's status runs of the service (docs/design.md, "Fout";
-- migrations 0007, 0011, 0014). Security definer with a fixed search_path, as
-- registration.sql says why. Row triggers with WHEN clauses: bijhouding's registrations
-- (statuslev NULL), the publisher's marks and the consumers' deliveries never call the
-- functions.

-- Set back to be delivered (an operator's retry, by the command or by hand): recorded for the
-- leader, whose view takes it in at its place, and a sleeping publisher is woken. A record of
-- a handeling already recorded updates that row, rather than doing nothing: the leader
-- deletes with "skip locked", so a row an open transaction updated stays for a later round,
-- and a later event is never lost.
create or replace function publicatie_nakomer_teruggezet() returns trigger
    language plpgsql security definer as $$
begin
    insert into publicatie_nakomer (admhnd_id) values (new.id)
    on conflict (admhnd_id) do update set voorsprong = null;
    if (select sleeping from publicatie_state) is distinct from false then
        perform pg_notify('brp_levering', '');
    end if;
    return null;
end $$;
drop trigger if exists admhnd_teruggezet on admhnd;
create trigger admhnd_teruggezet after update of statuslev on admhnd
    for each row when (old.statuslev is not null and new.statuslev is null)
    execute function publicatie_nakomer_teruggezet();

-- A handeling became fout, left fout, or an operator released it (issue 39): recorded, so that
-- the leading publisher holds back the persons of unreleased fout handelingen without reading
-- all of them in every round. A consumer's fout, an operator's retry or release, and a fout set
-- by hand call it.
create or replace function publicatie_fout_changed() returns trigger
    language plpgsql security definer as $$
begin
    insert into publicatie_fout_changes (admhnd_id) values (new.id)
    on conflict (admhnd_id) do update set admhnd_id = excluded.admhnd_id;
    return null;
end $$;
drop trigger if exists admhnd_fout_changed on admhnd;
create trigger admhnd_fout_changed after update of statuslev, vrijgegeven on admhnd
    for each row when (
        coalesce(old.statuslev::text = 'fout', false) <> coalesce(new.statuslev::text = 'fout', false)
        or (new.statuslev::text = 'fout' and old.vrijgegeven is distinct from new.vrijgegeven))
    execute function publicatie_fout_changed();
drop trigger if exists admhnd_fout_inserted on admhnd;
create trigger admhnd_fout_inserted after insert on admhnd
    for each row when (new.statuslev::text = 'fout')
    execute function publicatie_fout_changed();

-- A fixed search_path, pg_temp last; no EXECUTE for PUBLIC (a trigger fires without it).
do $$
declare
    path text := format('pg_catalog, %I, pg_temp',
        (select n.nspname from pg_class c join pg_namespace n on n.oid = c.relnamespace where c.oid = 'admhnd'::regclass));
begin
    execute format('alter function publicatie_nakomer_teruggezet() set search_path = %s', path);
    execute format('alter function publicatie_fout_changed() set search_path = %s', path);
    execute 'revoke execute on function publicatie_nakomer_teruggezet(), publicatie_fout_changed() from public';
end $$;
