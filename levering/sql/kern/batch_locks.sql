-- batch_locks.sql on the kern layout: the batch's table locks in an order a REINDEX cannot
-- cross (see batch_locks.sql of the contract layout): the tables apply.sql writes first, in row
-- exclusive mode, then a planned read of kern.his_persafgeleidadministrati, which check.sql
-- reads. Memoize off for the transaction. kern.admhnd is locked by planning an update of it, as
-- in the contract layout: the service's role has only update (statuslev, tslev) there.
set local enable_memoize = off;
explain update kern.admhnd set statuslev = statuslev where false;
lock table admhnd_levering, publicatie_nakomer, levering_onderweg in row exclusive mode;
select from kern.his_persafgeleidadministrati where false
