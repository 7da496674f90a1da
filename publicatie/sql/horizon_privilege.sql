-- Whether the horizon sees other roles' transactions: publicatie_sessions() (migration 0016)
-- reads pg_stat_activity as its owner, who needs pg_read_all_stats or superuser for that
-- (schema/grants gives it). The service's own role needs neither.
select coalesce(bool_or(r.rolsuper or pg_has_role(r.oid, 'pg_read_all_stats', 'member')), false)
from pg_proc p join pg_roles r on r.oid = p.proowner
where p.oid = to_regprocedure('publicatie_sessions()')
