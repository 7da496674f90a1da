-- The rights of the service's roles on the kern layout (docs/operations.md, "Roles and
-- rights"; docs/kern.md). Three roles, as in contract.sql:
--
--   the owner        the role that runs `publicatie migrate`: it owns kern.admhnd and
--                    kern.his_persafgeleidadministrati (or is a member of their owner; the
--                    service puts indexes and triggers on them) and schema brp_levering with
--                    everything in it; the trigger functions and publicatie_sessions() run as
--                    it. It runs this file (or a superuser does).
--   service_role     the runtime role of publicatie (publisher, operator commands, status
--                    page) and mutatielevering: exactly what they use. Not a superuser, no
--                    pg_read_all_stats, no right to create objects; on kern only reads and
--                    update (statuslev, tslev) of kern.admhnd; the operators' audit trail
--                    (brp_levering.admhnd_beheer) insert and select only.
--   bijhouding_role  bijhouding: the service's triggers on kern.admhnd and
--                    kern.his_persafgeleidadministrati run as the owner, so it needs nothing
--                    of the service's; its own inserts into those two tables are listed last.
--                    Its other rights on the kern schema are bijhouding's own affair.
--
--   psql -v service_role=brp_levering_service -v bijhouding_role=bijhouding -f schema/grants/kern.sql
--
-- Idempotent: run it again after a migrate. The publisher and the consumers check these rights
-- at start (schema.MissingRights, which reads this file) and stay not ready, naming what is
-- missing.
\set ON_ERROR_STOP on

-- The owner reads the other sessions' transactions for the horizon.
select format('grant pg_read_all_stats to %I', r.rolname)
from pg_proc p join pg_roles r on r.oid = p.proowner
where p.oid = 'brp_levering.publicatie_sessions()'::regprocedure and not r.rolsuper and not pg_has_role(r.oid, 'pg_read_all_stats', 'member') \gexec

-- Nobody but the owner creates objects in the service's schema.
revoke create on schema brp_levering from public;

-- The runtime role.
grant usage on schema kern, brp_levering to :"service_role";
grant select on kern.admhnd, kern.his_persafgeleidadministrati, kern.srtadmhnd to :"service_role";
grant update (statuslev, tslev) on kern.admhnd to :"service_role";
grant select on brp_levering.schema_migrations, brp_levering.schema_definitions, brp_levering.publicatie_horizon to :"service_role";
grant select, insert, update on brp_levering.publicatie_lease to :"service_role";
grant select, insert on brp_levering.admhnd_beheer to :"service_role";
grant usage on sequence brp_levering.admhnd_beheer_id_seq to :"service_role";
grant select, update on brp_levering.publicatie_state to :"service_role";
grant select, insert, update, delete on brp_levering.admhnd_levering, brp_levering.publicatie_nakomer,
    brp_levering.publicatie_herlees, brp_levering.publicatie_ingehaald, brp_levering.publicatie_laat_personen,
    brp_levering.publicatie_lead_samples, brp_levering.publicatie_fout_changes, brp_levering.levering_onderweg to :"service_role";
grant execute on function brp_levering.publicatie_sessions() to :"service_role";

-- Bijhouding: its own inserts into the tables that carry the service's triggers.
grant usage on schema kern to :"bijhouding_role";
grant insert on kern.admhnd, kern.his_persafgeleidadministrati to :"bijhouding_role";
