package levering

import (
	"embed"

	"github.com/brp/levering/handeling"
	"github.com/brp/levering/internal/sqltext"
)

// The consumer's statements, each a complete text in sql/ that a reader can paste into psql;
// what the file's comment says of it is not repeated here. The rules they share with the
// publisher (what blocks, the accepted tsreg) are SQL functions of the schema (migration 0013;
// the kern layout's in schema/kern). sql/kern/ holds the kern layout's own statements (package
// sqltext).
//
//go:embed sql/*.sql sql/kern/*.sql
var sqlDir embed.FS

var files = sqltext.New(sqlDir)

// statements are the consumer's statements in one layout.
type statements struct {
	batchLocksSQL   string
	lockSQL         string
	checkSQL        string
	holdNewerSQL    string
	markOnderwegSQL string
	applySQL        string
}

func loadStatements(l handeling.Layout) *statements {
	get := func(name string) string { return files.GetIn(l.Dir(), name) }
	return &statements{
		batchLocksSQL:   get("batch_locks.sql"),
		lockSQL:         get("lock.sql"),
		checkSQL:        get("check.sql"),
		holdNewerSQL:    get("hold_newer.sql"),
		markOnderwegSQL: get("mark_onderweg.sql"),
		applySQL:        get("apply.sql"),
	}
}

var byLayout = handeling.LoadPerLayout(loadStatements)

// statementsFor returns the statements of layout l (zero: the contract's).
func statementsFor(l handeling.Layout) *statements { return byLayout.For(l) }

// batchSQL are the statements of a batch that run prepared (package prepared): their generic
// plans (primary-key and person probes) are the right plans for every batch. batchLocksSQL
// must be planned each time.
func (s *statements) batchSQL() []string { return []string{s.lockSQL, s.checkSQL, s.applySQL} }
