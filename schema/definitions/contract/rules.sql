-- The rules the service's statements share, each written once (issue 41, migration 0013): the
-- publisher, the consumers, the operator pages and the triggers call these functions instead of
-- repeating the expressions. They are SQL functions the planner inlines (language sql, a single
-- select, not security definer, no settings), so a statement that calls one is planned as if
-- the expression were written out in it, and a partial index whose predicate it implies still
-- applies. Their arguments take the types of admhnd's columns (%TYPE), so they work on a
-- statuslev that bijhouding made text or an enum alike. Package handeling holds the same rules
-- in Go (Status, TsregFrom, TsregUntil), and handeling's tests compare the two on generated
-- cases. They run with their caller's rights and read nothing: PUBLIC may execute them.

-- A tsreg the service can order and encode: a verzending's tsreg is RFC 3339 (years 0000 to
-- 9999), and the first and last day of the calendar are left out, where time zones would carry
-- a tsreg across. Outside it ('-infinity', 'infinity', year 10,000) a handeling is set fout at
-- the publisher's intake (handeling.FoutTsreg).
create or replace function publicatie_tsreg_from() returns timestamptz
    language sql immutable parallel safe
    as $$ select '0001-01-02 00:00:00+00'::timestamptz $$;
create or replace function publicatie_tsreg_until() returns timestamptz
    language sql immutable parallel safe
    as $$ select '9999-12-31 00:00:00+00'::timestamptz $$;
create or replace function publicatie_tsreg_accepted(tsreg timestamptz) returns boolean
    language sql immutable parallel safe
    as $$ select tsreg >= publicatie_tsreg_from() and tsreg < publicatie_tsreg_until() $$;

-- tsreg for display: inside the accepted range itself, outside it clamped to the range's ends,
-- so that a handeling refused for its tsreg ('-infinity', a date before year 1) can be listed
-- and its age computed (lib/pq and JSON cannot carry those values).
create or replace function publicatie_tsreg_shown(tsreg timestamptz) returns timestamptz
    language sql immutable parallel safe
    as $$ select greatest(least(tsreg, publicatie_tsreg_until() - interval '1 second'), publicatie_tsreg_from()) $$;

-- Still to be delivered (the backlog): statuslev NULL and the soort not excluded.
create or replace function publicatie_to_deliver(statuslev admhnd.statuslev%type, soort admhnd.soort%type, excluded text[])
    returns boolean
    language sql immutable parallel safe
    as $$ select statuslev is null and soort <> all(excluded) $$;

-- In fout and not released by an operator: under the strict policy it holds back its persons.
create or replace function publicatie_unreleased_fout(statuslev admhnd.statuslev%type, vrijgegeven admhnd.vrijgegeven%type)
    returns boolean
    language sql immutable parallel safe
    as $$ select statuslev = 'fout' and vrijgegeven is null $$;

-- Holds back its persons' later handelingen: in levering or, under the strict policy (strict),
-- in fout and not released. NULL for a handeling still to be delivered, which holds them back
-- by being older (callers test "is true" where that matters).
create or replace function publicatie_blocks(statuslev admhnd.statuslev%type, vrijgegeven admhnd.vrijgegeven%type, strict boolean)
    returns boolean
    language sql immutable parallel safe
    as $$ select statuslev = 'in_levering' or (strict and statuslev = 'fout' and vrijgegeven is null) $$;

-- The source of a lead the registration trigger records: the session's client address ('local'
-- over a Unix socket) and application_name, which tell application servers apart
-- (publicatie/lead.go, floors).
create or replace function publicatie_lead_source() returns text
    language sql stable parallel safe
    as $$ select coalesce(host(inet_client_addr()), 'local') || ' ' || current_setting('application_name') $$;

-- Whether a row version (its xmin) was written by this transaction (migration 0009). A row
-- written in a subtransaction counts as another transaction's: a harmless extra check.
create or replace function publicatie_own_row(x xid) returns boolean
    language sql stable as $$
    select x = pg_current_xact_id_if_assigned()::xid
$$;

-- Records n more late rows in publicatie_nakomer for this transaction, or says (false) that
-- it has recorded 100 already (migration 0011): a transaction that registers more (a load, a
-- conversion, a backfill, statement by statement) leaves only the oldest of each further
-- statement in publicatie_herlees, and the publisher builds its view again from the oldest,
-- in bounded reads, instead of taking a million handelingen in at once.
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
