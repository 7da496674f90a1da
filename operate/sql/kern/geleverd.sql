-- geleverd.sql on the kern layout: every delivered (4) handeling.
select count(*) from kern.admhnd where statuslev = 4
