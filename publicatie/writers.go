package publicatie

// Open writers (issue 48; migration 0018, docs/design.md "Open writers"): a bijhouding
// transaction that links handelingen to persons takes a shared advisory lock per person
// until it ends, and the publisher holds those persons' work back while it sees the lock, so
// that what such a transaction commits late is taken in before their newer handelingen
// instead of ending fout. The horizon still waits for it at most Config.MaxWait; this waits
// for as long as it stays open, but only for its own persons.

// MaxWriterLocks is how many links a transaction takes person locks for before it becomes a
// bulk writer (the definitions files write the number in; TestDefinitionsUseGosConstants holds
// it against this): the statement that passes it locks at most one row more and then the bulk
// writer's lock, which holds the whole horizon until the transaction ends; after that it takes
// none. So a transaction holds at most 18 of
// these locks. PostgreSQL's shared lock table holds max_locks_per_transaction x
// max_connections locks for the whole cluster (6,400 by default): a hundred sessions
// registering at once use under a third of it.
const MaxWriterLocks = 16

// writerKeyModulus maps a person to its lock key: persoon_id % 2147483647, an int4 for every
// bigint, computed alike by PostgreSQL and Go (both truncate towards zero).
const writerKeyModulus = 2147483647

// WriterKey is the lock key (pg_locks.objid) of person p's writer lock.
func WriterKey(p int64) uint32 { return uint32(int32(p % writerKeyModulus)) }

// openWriters is what a round read of the open writers with its horizon: the keys of the
// persons they are linking now, how many transactions hold such locks (or the bulk writer's),
// and the age of the oldest of them in seconds (0: none).
type openWriters struct {
	keys         map[uint32]struct{}
	transactions int
	oldest       float64
}

func newOpenWriters(keys []int64, transactions int, oldest float64) openWriters {
	w := openWriters{transactions: transactions, oldest: oldest}
	if len(keys) > 0 {
		w.keys = make(map[uint32]struct{}, len(keys))
		for _, k := range keys {
			w.keys[uint32(k)] = struct{}{}
		}
	}
	return w
}

// writing says whether an open transaction is linking a handeling to person p: p's work waits.
func (w openWriters) writing(p int64) bool {
	if len(w.keys) == 0 {
		return false
	}
	_, ok := w.keys[WriterKey(p)]
	return ok
}
