-- Every delivered handeling: a sequential scan of the delivered history, run within a budget.
select count(*) from admhnd where statuslev = 'geleverd'
