-- What linking persons (an insert into kern.his_persafgeleidadministrati) runs of the service
-- (definitions/contract/persons.sql says why and how): his rows inserted for another
-- transaction's handeling are late. Ordinary bijhouding writes a handeling and its his rows in
-- one transaction: one call per inserting statement, the open writers' locks and one index
-- probe per row, nothing else.

create or replace function brp_levering.publicatie_personen_toegevoegd() returns trigger
    language plpgsql security definer set search_path = pg_catalog, brp_levering, pg_temp as $$
declare
    aantal bigint;
    taken integer := coalesce(nullif(pg_catalog.current_setting('brp_levering.persons_open', true), ''), '0')::integer;
    linked integer;
begin
    -- Open writers: a lock per link, for at most 17 - taken links, then the bulk writer's
    -- lock and no more. A person linked twice is locked twice, which costs nothing.
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
drop trigger if exists brp_levering_personen_toegevoegd on kern.his_persafgeleidadministrati;
create trigger brp_levering_personen_toegevoegd after insert on kern.his_persafgeleidadministrati
    referencing new table as nieuw
    for each statement execute function brp_levering.publicatie_personen_toegevoegd();

revoke execute on function brp_levering.publicatie_personen_toegevoegd() from public;
