-- From this release on, the service's functions, triggers and views have their current text in
-- schema/definitions/kern, applied by migrate after the numbered migrations whenever a file's
-- text changes (schema.Definition). This migration changes no kern table: it marks the release
-- whose definitions came with it (the contract layout's migration 0020 says why), and creates
-- the table in which migrate records the SHA-256 of each file it applied.
--
-- What this release's definitions change: a release (admhnd_levering.vrijgegeven) is recorded
-- as a change of fout state only for a handeling in fout, as the contract layout's trigger
-- always did.

create table if not exists schema_definitions (
    name       text        primary key,
    sha256     text        not null,
    applied_at timestamptz not null default now()
);

-- The start check reads it (schema.Check): whoever may read schema_migrations may read it, so
-- the runtime role of the release before needs no new grant to run this one.
do $$
declare
    r text;
begin
    for r in
        select distinct a.grantee::regrole::text
        from pg_class c, aclexplode(c.relacl) a
        where c.oid = 'schema_migrations'::regclass and a.privilege_type = 'SELECT' and a.grantee <> 0
    loop
        execute format('grant select on schema_definitions to %s', r);
    end loop;
end $$;
