-- From this release on, the service's functions, triggers and views have their current text in
-- schema/definitions/contract, applied by migrate after the numbered migrations whenever a
-- file's text changes (schema.Definition). This migration marks the release whose
-- definitions came with it, so that a database's version tells which release's texts it holds,
-- and an older binary knows the database is ahead of it and leaves them; and it creates the
-- table in which migrate records the SHA-256 of each file it applied. Every later change of a
-- definitions file comes with a numbered migration of its own, a comment when no table
-- changes (schema/definitions/versions.txt).
--
-- What this release's definitions change: the registration trigger records and samples only
-- handelingen still to be delivered (statuslev NULL), as the kern layout's always did; one
-- inserted with a status (a fout set by hand) is no longer recorded for the publisher's view,
-- which skipped it anyway.

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
