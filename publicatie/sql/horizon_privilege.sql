-- Whether this role sees other roles' transactions in pg_stat_activity.
select rolsuper or pg_has_role(current_user, 'pg_read_all_stats', 'member')
from pg_roles where rolname = current_user
