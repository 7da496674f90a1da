package schema

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// kernColumn is a column of a kern table the service reads or writes, with the type it needs
// (information_schema's data_type).
type kernColumn struct {
	table, column string
	types         []string
}

// kernNeeds are the kern columns the service relies on (docs/kern.md). Other columns are
// bijhouding's and never read.
var kernNeeds = []kernColumn{
	{"admhnd", "id", []string{"bigint"}},
	{"admhnd", "srt", []string{"smallint"}},
	{"admhnd", "tsreg", []string{"timestamp with time zone"}},
	{"admhnd", "tslev", []string{"timestamp with time zone"}},
	{"admhnd", "statuslev", []string{"smallint"}},
	{"his_persafgeleidadministrati", "admhnd", []string{"bigint"}},
	{"his_persafgeleidadministrati", "pers", []string{"bigint"}},
	{"srtadmhnd", "id", []string{"smallint"}},
	{"srtadmhnd", "naam", []string{"character varying", "text"}},
}

// ErrKernMismatch says the database's kern tables are missing or differ from what the kern
// layout needs; migrate changed nothing.
var ErrKernMismatch = errors.New("kern layout: the database's kern tables differ from what the service needs")

// checkKern compares the database's kern tables with kernNeeds before anything is created.
// Its error names the first difference, in one line.
func checkKern(ctx context.Context, conn *sql.Conn) error {
	rows, err := conn.QueryContext(ctx, `select table_name, column_name, data_type
		from information_schema.columns
		where table_schema = 'kern' and table_name in ('admhnd', 'his_persafgeleidadministrati', 'srtadmhnd')`)
	if err != nil {
		return fmt.Errorf("schema: read the kern tables: %w", err)
	}
	defer rows.Close()
	have := map[string]string{}
	tables := map[string]bool{}
	for rows.Next() {
		var table, column, typ string
		if err := rows.Scan(&table, &column, &typ); err != nil {
			return fmt.Errorf("schema: read the kern tables: %w", err)
		}
		have[table+"."+column] = typ
		tables[table] = true
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("schema: read the kern tables: %w", err)
	}
	return compareKern(have, tables)
}

// compareKern returns the first difference between the columns a database has (table.column
// to type) and kernNeeds.
func compareKern(have map[string]string, tables map[string]bool) error {
	for _, n := range kernNeeds {
		if !tables[n.table] {
			return fmt.Errorf("%w: table kern.%s is missing (or this role cannot see it)", ErrKernMismatch, n.table)
		}
		typ, ok := have[n.table+"."+n.column]
		if !ok {
			return fmt.Errorf("%w: kern.%s has no column %s", ErrKernMismatch, n.table, n.column)
		}
		found := false
		for _, t := range n.types {
			found = found || typ == t
		}
		if !found {
			return fmt.Errorf("%w: kern.%s.%s is %s, expected %s", ErrKernMismatch, n.table, n.column, typ, strings.Join(n.types, " or "))
		}
	}
	return nil
}
