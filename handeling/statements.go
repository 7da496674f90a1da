package handeling

import (
	"embed"

	"github.com/brp/levering/internal/sqltext"
)

// The statements of the shared reads, each a complete text in sql/ (the lease's are constants
// in lease.go). The rules they apply are the schema's SQL functions (migration 0013), which
// rules.go holds in Go.
//
//go:embed sql/*.sql
var sqlFiles embed.FS

var statements = sqltext.New(sqlFiles)

var (
	countsSQL = statements.Get("counts.sql")
	heldSQL   = statements.Get("held.sql")
)
