package handeling

import (
	"embed"

	"github.com/brp/levering/internal/sqltext"
)

// The statements of the shared reads, each a complete text in sql/ (the lease's are constants
// in lease.go: they touch only publicatie_lease, the same in every layout). The rules they
// apply are the schema's SQL functions (migration 0013; the kern layout's in schema/kern),
// which rules.go holds in Go. sql/kern/ holds the kern layout's own statements (package
// sqltext).
//
//go:embed sql/*.sql sql/kern/*.sql
var sqlDir embed.FS

var files = sqltext.New(sqlDir)

// statements are the shared reads in one layout.
type statements struct {
	countsSQL string
	heldSQL   string
}

func loadStatements(l Layout) *statements {
	get := func(name string) string { return files.GetIn(l.Dir(), name) }
	return &statements{
		countsSQL: get("counts.sql"),
		heldSQL:   get("held.sql"),
	}
}

var byLayout = LoadPerLayout(loadStatements)

// statementsFor returns the statements of layout l (zero: the contract's).
func statementsFor(l Layout) *statements { return byLayout.For(l) }
