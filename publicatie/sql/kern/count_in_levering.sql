select count(*) from kern.admhnd where statuslev = 3
