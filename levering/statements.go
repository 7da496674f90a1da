package levering

import (
	"embed"

	"github.com/brp/levering/internal/sqltext"
)

// The consumer's statements, each a complete text in sql/ that a reader can paste into psql;
// what the file's comment says of it is not repeated here. The rules they share with the
// publisher (what blocks, the accepted tsreg) are SQL functions of the schema (migration 0013).
//
//go:embed sql/*.sql
var sqlFiles embed.FS

var statements = sqltext.New(sqlFiles)

var (
	batchLocksSQL   = statements.Get("batch_locks.sql")
	lockSQL         = statements.Get("lock.sql")
	checkSQL        = statements.Get("check.sql")
	holdNewerSQL    = statements.Get("hold_newer.sql")
	markOnderwegSQL = statements.Get("mark_onderweg.sql")
	applySQL        = statements.Get("apply.sql")
)

// batchSQL are the statements of a batch that run prepared (package prepared): their generic
// plans (primary-key and person probes) are the right plans for every batch. batchLocksSQL
// must be planned each time.
var batchSQL = []string{lockSQL, checkSQL, applySQL}
