select count(*) from admhnd where statuslev = 'in_levering'
