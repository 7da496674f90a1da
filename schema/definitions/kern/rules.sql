-- Applied with search_path brp_levering, as schema.Migrate sets it for the kern layout: what
-- this file names unqualified is created there.
--
-- The rules the service's statements share (definitions/contract/rules.sql says why and how),
-- for kern's columns: statuslev 1 te leveren, 2 niet leveren (never touched), 3 in levering,
-- 4 geleverd, 5 fout; the soort as kern.srtadmhnd's id. They run with their caller's rights and
-- read nothing but kern.srtadmhnd: PUBLIC may execute them.

-- The statuses by the names the service's code uses (handeling.Status): 1 is NULL, as the
-- contract layout's te leveren.
create or replace function publicatie_status_name(statuslev smallint) returns text
    language sql immutable parallel safe
    as $$ select case statuslev when 2 then 'niet_leveren' when 3 then 'in_levering' when 4 then 'geleverd' when 5 then 'fout' end $$;
create or replace function publicatie_status_code(status text) returns smallint
    language sql immutable parallel safe
    as $$ select case coalesce(status, '') when '' then 1 when 'niet_leveren' then 2 when 'in_levering' then 3 when 'geleverd' then 4 when 'fout' then 5 end::smallint $$;

create or replace function publicatie_tsreg_from() returns timestamptz
    language sql immutable parallel safe
    as $$ select '0001-01-02 00:00:00+00'::timestamptz $$;
create or replace function publicatie_tsreg_until() returns timestamptz
    language sql immutable parallel safe
    as $$ select '9999-12-31 00:00:00+00'::timestamptz $$;
create or replace function publicatie_tsreg_accepted(tsreg timestamptz) returns boolean
    language sql immutable parallel safe
    as $$ select tsreg >= publicatie_tsreg_from() and tsreg < publicatie_tsreg_until() $$;
create or replace function publicatie_tsreg_shown(tsreg timestamptz) returns timestamptz
    language sql immutable parallel safe
    as $$ select greatest(least(tsreg, publicatie_tsreg_until() - interval '1 second'), publicatie_tsreg_from()) $$;

-- The ids of the soorten named (the EXCLUDED setting names soorten by kern.srtadmhnd.naam).
-- A statement calls it as a scalar subquery, "(select publicatie_srt_ids($n))", which
-- PostgreSQL runs once per statement.
create or replace function publicatie_srt_ids(names text[]) returns smallint[]
    language sql stable parallel safe
    as $$ select coalesce(array_agg(id), '{}') from kern.srtadmhnd where naam = any(names) $$;

-- Still to be delivered: status 1 (te leveren) and the soort not excluded. Status 2 (niet
-- leveren: bijhouding's own exclusion, soort 37) is never to be delivered.
create or replace function publicatie_to_deliver(statuslev smallint, srt smallint, excluded smallint[])
    returns boolean
    language sql immutable parallel safe
    as $$ select statuslev = 1 and srt <> all(excluded) $$;
create or replace function publicatie_unreleased_fout(statuslev smallint, vrijgegeven timestamptz)
    returns boolean
    language sql immutable parallel safe
    as $$ select statuslev = 5 and vrijgegeven is null $$;
create or replace function publicatie_blocks(statuslev smallint, vrijgegeven timestamptz, strict boolean)
    returns boolean
    language sql immutable parallel safe
    as $$ select statuslev = 3 or (strict and statuslev = 5 and vrijgegeven is null) $$;

-- The source of a lead the registration trigger records.
create or replace function publicatie_lead_source() returns text
    language sql stable parallel safe
    as $$ select coalesce(host(inet_client_addr()), 'local') || ' ' || current_setting('application_name') $$;

-- Whether a row version (its xmin) was written by this transaction.
create or replace function publicatie_own_row(x xid) returns boolean
    language sql stable as $$
    select x = pg_current_xact_id_if_assigned()::xid
$$;

-- Room for n more late rows in publicatie_nakomer in this transaction.
create or replace function publicatie_nakomer_ruimte(n bigint) returns boolean
    language plpgsql as $$
declare
    al bigint := coalesce(nullif(current_setting('brp_levering.nakomers', true), ''), '0')::bigint;
begin
    if al + n > 100 then
        return false;
    end if;
    perform set_config('brp_levering.nakomers', (al + n)::text, true);
    return true;
end $$;
