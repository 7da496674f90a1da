package handeling

// Table locks. The first statement of a publisher round (publicatie/sql/round_locks.sql) and of a
// consumer batch (levering/sql/batch_locks.sql) takes the table locks of the transaction in an
// order that a REINDEX cannot cross (issue 34): the tables the transaction writes, then a planned
// read of admhnd_persoon, which both read.
//
// A REINDEX (not CONCURRENTLY; REINDEX SCHEMA or DATABASE alike, a table per transaction)
// takes a ShareLock on the table, then an AccessExclusiveLock on each of its indexes in turn,
// by oid, and holds them all to its commit. (CREATE INDEX takes the ShareLock only: it blocks
// the writers, and deadlocks with none.) Two orders deadlock with it:
//
//   - A transaction that reads a table (an AccessShareLock on it and on each index it reads,
//     held to the end) and writes it later (a RowExclusiveLock): a REINDEX that took its
//     ShareLock in between waits for an index the transaction read, and the write waits for
//     the ShareLock. Publisher rounds and consumer batches both read admhnd before writing it.
//   - A transaction that reads a table's indexes in another order than by oid (a prepared
//     plan reads the ones it uses, in the plan's order): REINDEX TABLE holds the indexes it has
//     rebuilt while it waits for the next one, which the transaction holds, and the
//     transaction's next statement reads one of the rebuilt ones. After a REINDEX INDEX
//     CONCURRENTLY of admhnd_persoon's key (the new index has the highest oid), every round
//     that read admhnd_persoon beside a REINDEX TABLE of it deadlocked this way.
//
// So the statement first locks the written tables in row exclusive mode, the lock they take
// anyway: it conflicts with the ShareLock a REINDEX takes before any index lock, and with no
// lock of bijhouding, the consumers or autovacuum. A REINDEX of one of them and the transaction
// then wait for each other as a whole, never halfway. Then it plans a query on admhnd_persoon
// (sent unprepared, so that it is planned every time): the planner locks every index of a table
// it plans for, by oid, the order REINDEX TABLE takes them in, and the transaction holds them
// from then on. A lock in row exclusive mode on admhnd_persoon would do as well, but needs a
// right on bijhouding's table to write it, which the service's role need not have.
//
// REINDEX CONCURRENTLY and CREATE INDEX CONCURRENTLY take none of the conflicting locks: they
// wait for these transactions to end, never the other way round.
