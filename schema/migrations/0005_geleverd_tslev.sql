-- Deliveries per minute (status view) read recent geleverd rows by tslev without scanning the
-- delivered history.
create index if not exists admhnd_geleverd_tslev_idx on admhnd (tslev) where statuslev = 'geleverd';
