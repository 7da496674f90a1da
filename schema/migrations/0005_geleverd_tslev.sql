-- Deliveries per minute (status view) read recent geleverd rows by tslev without scanning the
-- delivered history.
-- brp:outside-transaction
create index concurrently if not exists admhnd_geleverd_tslev_idx on admhnd (tslev) where statuslev = 'geleverd';
