// Package schema owns the database schema: the contract's admhnd tables plus the service's own
// columns, indexes and tables, as ordered SQL migrations embedded in the binary.
package schema

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
)

//go:embed migrations/*.sql
var migrations embed.FS

// migrateLockKey serialises concurrent Migrate calls (several replicas deploying at once).
const migrateLockKey = 7_345_001

// Migration is one embedded schema step.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// Migrations returns the embedded migrations in the order they are applied.
func Migrations() ([]Migration, error) {
	entries, err := fs.ReadDir(migrations, "migrations")
	if err != nil {
		return nil, fmt.Errorf("schema: read migrations: %w", err)
	}
	var out []Migration
	for _, e := range entries {
		name := e.Name()
		num, _, ok := strings.Cut(name, "_")
		if !ok || !strings.HasSuffix(name, ".sql") {
			return nil, fmt.Errorf("schema: migration %q: name must be NNNN_name.sql", name)
		}
		v, err := strconv.Atoi(num)
		if err != nil {
			return nil, fmt.Errorf("schema: migration %q: %w", name, err)
		}
		body, err := migrations.ReadFile("migrations/" + name)
		if err != nil {
			return nil, fmt.Errorf("schema: read %q: %w", name, err)
		}
		out = append(out, Migration{Version: v, Name: name, SQL: string(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// Migrate applies every migration not yet recorded in schema_migrations, in one transaction
// under an advisory lock, so it is idempotent and safe to run from several processes at once.
// It returns the names of the migrations it applied.
func Migrate(ctx context.Context, db *sql.DB) ([]string, error) {
	all, err := Migrations()
	if err != nil {
		return nil, err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("schema: begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	if _, err := tx.ExecContext(ctx, `select pg_advisory_xact_lock($1)`, migrateLockKey); err != nil {
		return nil, fmt.Errorf("schema: lock: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `create table if not exists schema_migrations (
		version int primary key, name text not null, applied_at timestamptz not null default now())`); err != nil {
		return nil, fmt.Errorf("schema: create schema_migrations: %w", err)
	}
	applied := map[int]bool{}
	rows, err := tx.QueryContext(ctx, `select version from schema_migrations`)
	if err != nil {
		return nil, fmt.Errorf("schema: read schema_migrations: %w", err)
	}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return nil, fmt.Errorf("schema: read schema_migrations: %w", err)
		}
		applied[v] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("schema: read schema_migrations: %w", err)
	}
	var done []string
	for _, m := range all {
		if applied[m.Version] {
			continue
		}
		if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
			return nil, fmt.Errorf("schema: apply %s: %w", m.Name, err)
		}
		if _, err := tx.ExecContext(ctx, `insert into schema_migrations (version, name) values ($1, $2)`, m.Version, m.Name); err != nil {
			return nil, fmt.Errorf("schema: record %s: %w", m.Name, err)
		}
		done = append(done, m.Name)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("schema: commit: %w", err)
	}
	return done, nil
}
