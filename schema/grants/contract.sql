-- The rights of the service's roles on the contract layout (docs/operations.md, "Roles and
-- rights"). Three roles:
--
--   the owner        the role that runs `publicatie migrate`: it owns admhnd and admhnd_persoon
--                    (or is a member of their owner) and everything the service creates, and
--                    the trigger functions and publicatie_sessions() run as it. It runs this
--                    file (or a superuser does, with the owner's search_path).
--   service_role     the runtime role of publicatie (publisher, operator commands, status
--                    page) and mutatielevering: exactly what they use, nothing else. Not a
--                    superuser, no pg_read_all_stats, no right to create objects, and the
--                    operators' audit trail (admhnd_beheer) is insert and select only.
--   bijhouding_role  bijhouding: its own inserts. The service's triggers run as the owner, so
--                    it needs no right on the service's objects.
--
--   psql -v service_role=brp_levering_service -v bijhouding_role=bijhouding -f schema/grants/contract.sql
--
-- Idempotent: run it again after a migrate (a later migration may add a table to the lists).
-- The publisher and the consumers check these rights at start (schema.MissingRights, which
-- reads this file) and stay not ready, naming what is missing. The schema is the current
-- schema, the one that holds admhnd: run it with the search_path migrate ran with.
\set ON_ERROR_STOP on

-- The owner reads the other sessions' transactions for the horizon (publicatie_sessions() runs
-- as it), without query texts reaching anyone else. A superuser owner needs nothing.
select format('grant pg_read_all_stats to %I', r.rolname)
from pg_proc p join pg_roles r on r.oid = p.proowner
where p.oid = 'publicatie_sessions()'::regprocedure and not r.rolsuper and not pg_has_role(r.oid, 'pg_read_all_stats', 'member') \gexec

-- Nobody but the owner creates objects in the schema: the functions that run as the owner
-- resolve the service's names there (PostgreSQL 15's default for the public schema).
select format('revoke create on schema %I from public', current_schema()) \gexec
do $$
begin
    if has_schema_privilege('public', current_schema(), 'create') then
        raise exception 'PUBLIC may still create objects in schema %: run this file as the schema''s owner or a superuser', current_schema();
    end if;
end $$;

-- The runtime role.
select format('grant usage on schema %I to %I', current_schema(), :'service_role') \gexec
grant select on admhnd, admhnd_persoon to :"service_role";
grant update (statuslev, tslev, tspub, foutreden, vrijgegeven) on admhnd to :"service_role";
grant select on schema_migrations, schema_definitions, publicatie_horizon to :"service_role";
grant select, insert, update on publicatie_lease to :"service_role";
grant select, insert on admhnd_beheer to :"service_role";
grant usage on sequence admhnd_beheer_id_seq to :"service_role";
grant select, update on publicatie_state to :"service_role";
grant select, insert, update, delete on publicatie_nakomer, publicatie_herlees, publicatie_ingehaald,
    publicatie_laat_personen, publicatie_lead_samples, publicatie_fout_changes, levering_onderweg to :"service_role";
grant execute on function publicatie_sessions() to :"service_role";

-- Bijhouding: its own inserts, nothing of the service's.
select format('grant usage on schema %I to %I', current_schema(), :'bijhouding_role') \gexec
grant insert on admhnd, admhnd_persoon to :"bijhouding_role";
