-- A batch's first statement, sent unprepared so that it is planned every time: it takes the
-- batch's table locks in an order a REINDEX cannot cross (docs/robustness.md, the REINDEX row
-- of what is tested). A REINDEX takes a ShareLock on the table, then an AccessExclusiveLock
-- on each of its indexes by oid, and holds them to its commit. A batch reads admhnd (lock.sql's
-- row locks take only a RowShareLock) and writes it later, so a REINDEX of admhnd that took
-- its ShareLock in between would deadlock with it. So the tables apply.sql writes (admhnd,
-- publicatie_nakomer, levering_onderweg) are locked first, in row exclusive mode, the lock
-- they take anyway: a REINDEX of one of them and the batch wait for each other as a whole.
-- Then a planned read of admhnd_persoon, which check.sql reads, locks that table's indexes by
-- oid, the order REINDEX TABLE takes them in, and the transaction holds them from then on.
--
-- It also turns Memoize off for the transaction: check.sql probes admhnd once for each
-- handeling of each person of the batch, by keys that never repeat within a person, so the
-- cache would only cost. A SET LOCAL here costs no round trip of its own; the prepared
-- statements are planned (custom plans, then the generic one) in such transactions only.
--
-- admhnd is locked by planning an update of it (EXPLAIN runs nothing: no row, no trigger): the
-- planner takes the row exclusive lock on it and its indexes, which needs only the column
-- rights the service's role has (schema/grants), where LOCK TABLE needs a table-wide one.
set local enable_memoize = off;
explain update admhnd set statuslev = statuslev where false;
lock table publicatie_nakomer, levering_onderweg in row exclusive mode;
select from admhnd_persoon where false
