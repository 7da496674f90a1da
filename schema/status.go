package schema

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/brp/levering/handeling"
)

// State is the schema of a database as Status reads it.
type State struct {
	// Current is the newest applied version (0: none).
	Current int
	// Latest is the newest version this binary carries.
	Latest int
	// Migrations are this binary's migrations with when each was applied (zero: pending).
	Migrations []MigrationState
	// InvalidIndexes are indexes an interrupted "concurrently" build left behind.
	InvalidIndexes []string
	// StaleDefinitions are this binary's definitions files whose text the database has not
	// applied (none when the database is ahead of the binary: a newer release's stay).
	StaleDefinitions []string
}

// MigrationState is one migration and when it was applied.
type MigrationState struct {
	Version   int
	Name      string
	AppliedAt time.Time
}

// Pending counts the migrations and definitions files this binary carries that the database
// lacks.
func (s State) Pending() int {
	n := len(s.StaleDefinitions)
	for _, m := range s.Migrations {
		if m.AppliedAt.IsZero() {
			n++
		}
	}
	return n
}

// The statements Status runs, per layout: the kern layout's bookkeeping is in schema
// brp_levering, its indexes on kern tables are named brp_levering_*.
var statusSQL = map[handeling.Layout]struct{ exists, applied, definedExists, defined, invalid string }{
	handeling.Contract: {
		exists:        `select to_regclass('schema_migrations') is not null`,
		applied:       `select version, applied_at from schema_migrations`,
		definedExists: `select to_regclass('schema_definitions') is not null`,
		defined:       `select name, sha256 from schema_definitions`,
		invalid: `select c.relname from pg_index i join pg_class c on c.oid = i.indexrelid
			where c.relnamespace = current_schema()::regnamespace and not i.indisvalid order by 1`,
	},
	handeling.Kern: {
		exists:        `select to_regclass('brp_levering.schema_migrations') is not null`,
		applied:       `select version, applied_at from brp_levering.schema_migrations`,
		definedExists: `select to_regclass('brp_levering.schema_definitions') is not null`,
		defined:       `select name, sha256 from brp_levering.schema_definitions`,
		invalid: `select c.relname from pg_index i join pg_class c on c.oid = i.indexrelid
			join pg_namespace n on n.oid = c.relnamespace
			where (n.nspname = 'brp_levering' or (n.nspname = 'kern' and c.relname like 'brp\_levering\_%'))
			  and not i.indisvalid order by 1`,
	},
}

// Status reads which migrations of layout l the database has.
func Status(ctx context.Context, db *sql.DB, l handeling.Layout) (State, error) {
	l = l.Or()
	all, err := MigrationsOf(l)
	if err != nil {
		return State{}, err
	}
	q := statusSQL[l]
	st := State{Latest: LatestOf(l)}
	applied := map[int]time.Time{}
	var exists bool
	if err := db.QueryRowContext(ctx, q.exists).Scan(&exists); err != nil {
		return st, fmt.Errorf("schema: status: %w", err)
	}
	if exists {
		if applied, err = appliedVersions(ctx, db, q.applied); err != nil {
			return st, err
		}
	}
	for v := range applied {
		st.Current = max(st.Current, v)
	}
	for _, m := range all {
		st.Migrations = append(st.Migrations, MigrationState{Version: m.Version, Name: m.Name, AppliedAt: applied[m.Version]})
	}
	if st.Current <= st.Latest {
		defs, err := DefinitionsOf(l)
		if err != nil {
			return st, err
		}
		sums := map[string]string{}
		if err := db.QueryRowContext(ctx, q.definedExists).Scan(&exists); err != nil {
			return st, fmt.Errorf("schema: status: %w", err)
		}
		if exists {
			if sums, err = appliedSums(ctx, db, q.defined); err != nil {
				return st, err
			}
		}
		for _, d := range stale(defs, sums) {
			st.StaleDefinitions = append(st.StaleDefinitions, d.Name)
		}
	}
	rows, err := db.QueryContext(ctx, q.invalid)
	if err != nil {
		return st, fmt.Errorf("schema: status: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return st, fmt.Errorf("schema: status: %w", err)
		}
		st.InvalidIndexes = append(st.InvalidIndexes, n)
	}
	return st, rows.Err()
}

// ErrOutdated says the database lacks migrations this binary needs: run `publicatie migrate`.
var ErrOutdated = errors.New("database schema is older than this binary: run publicatie migrate")

// Check returns an error wrapping ErrOutdated when the database lacks a migration this binary
// carries, or the current text of one of its definitions files. A database ahead of the binary is fine: during a rolling upgrade the previous
// release runs on the new schema (migrations only add, docs/operations.md, "Upgrade").
func Check(ctx context.Context, db *sql.DB, l handeling.Layout) error {
	st, err := Status(ctx, db, l)
	if err != nil {
		return err
	}
	if n := st.Pending(); n > 0 {
		return fmt.Errorf("%w (database at %04d, this binary needs %04d: %d migrations and definitions files pending)", ErrOutdated, st.Current, st.Latest, n)
	}
	return nil
}
