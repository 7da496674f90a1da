select pg_notify($1, '')
