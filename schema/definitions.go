package schema

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io/fs"
	"log/slog"
	"sort"
	"strings"

	"github.com/brp/levering/handeling"
)

// Definitions are the current text of every function, trigger and view the service installs,
// one set per layout (definitions/contract, definitions/kern), each object in exactly one
// file: the place a reader finds what runs now. The numbered migrations create and change
// tables and indexes, and keep the older texts of these objects as history; a definitions
// file is applied again, as a whole, whenever its text differs from what the database last
// applied of it (as Flyway's repeatable migrations are), after the numbered migrations.
//
// The rules for a definitions file:
//
//   - It is idempotent: "create or replace" for functions and views; a trigger is dropped
//     if it exists and created again. Everything changed is applied in one transaction with
//     the numbered migrations' short lock_timeout (retried), so no session sees a function
//     without its security settings or a table without its trigger.
//   - A view may only gain columns at its end ("create or replace view").
//   - It never drops a function or a view, and never removes what an older release needs
//     during a rolling upgrade: that is a numbered migration's work, which also redefines
//     whatever the removal would break (numbered migrations run first).
//   - A change of a definitions file comes with a numbered migration of its own (a comment
//     when no table changes), recorded in definitions/versions.txt, which a test holds against
//     the files. So a database's version tells which release's texts it holds: a database
//     ahead of this binary (migrated by a newer release) keeps its definitions, an older
//     binary's migrate does not put its older texts back, and its start check accepts them.
//     At the binary's own version a changed text is pending, as a migration is (Check).
type Definition struct {
	// Name is the file's name, as recorded in schema_definitions.
	Name string
	SQL  string
	// Sum is the SHA-256 of SQL, hex.
	Sum string
}

// DefinitionsOf returns layout l's definitions files in the order they are applied.
func DefinitionsOf(l handeling.Layout) ([]Definition, error) {
	d := "definitions/" + string(l.Or())
	entries, err := fs.ReadDir(migrations, d)
	if err != nil {
		return nil, fmt.Errorf("schema: read definitions: %w", err)
	}
	var out []Definition
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		body, err := migrations.ReadFile(d + "/" + e.Name())
		if err != nil {
			return nil, fmt.Errorf("schema: read %q: %w", e.Name(), err)
		}
		sum := sha256.Sum256(body)
		out = append(out, Definition{Name: e.Name(), SQL: string(body), Sum: hex.EncodeToString(sum[:])})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// appliedSums reads what schema_definitions records (query: its name and sha256 columns):
// file name to sum.
func appliedSums(ctx context.Context, q queryer, query string) (map[string]string, error) {
	return readMap[string, string](ctx, q, "schema_definitions", query)
}

// stale returns the definitions whose text the database has not applied.
func stale(all []Definition, applied map[string]string) []Definition {
	var out []Definition
	for _, d := range all {
		if applied[d.Name] != d.Sum {
			out = append(out, d)
		}
	}
	return out
}

// define applies layout's stale definitions in one transaction and records their sums in
// schema_definitions (migration 0020, kern 0007). It leaves a database ahead of this binary
// (current > latest) as it is.
func define(ctx context.Context, conn *sql.Conn, cfg Config, current int) ([]string, error) {
	all, err := DefinitionsOf(cfg.Layout)
	if err != nil {
		return nil, err
	}
	if latest := LatestOf(cfg.Layout); current > latest {
		cfg.Log.Warn("database migrated by a newer release: its functions, triggers and views are left as they are",
			slog.Int("database_version", current), slog.Int("binary_version", latest))
		return nil, nil
	}
	applied, err := appliedSums(ctx, conn, `select name, sha256 from schema_definitions`)
	if err != nil {
		return nil, err
	}
	todo := stale(all, applied)
	if len(todo) == 0 {
		return nil, nil
	}
	var names []string
	for _, d := range todo {
		names = append(names, "definitions/"+d.Name)
	}
	err = retryLocked(ctx, cfg, strings.Join(names, ", "), func() error {
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback() //nolint:errcheck // no-op after commit
		if _, err := tx.ExecContext(ctx, fmt.Sprintf(`set local lock_timeout = %d`, cfg.LockTimeout.Milliseconds())); err != nil {
			return err
		}
		for _, d := range todo {
			if _, err := tx.ExecContext(ctx, d.SQL); err != nil {
				return fmt.Errorf("%s: %w", d.Name, err)
			}
			if _, err := tx.ExecContext(ctx, `insert into schema_definitions (name, sha256) values ($1, $2)
				on conflict (name) do update set sha256 = excluded.sha256, applied_at = now()`, d.Name, d.Sum); err != nil {
				return fmt.Errorf("record %s: %w", d.Name, err)
			}
		}
		return tx.Commit()
	})
	if err != nil {
		return nil, fmt.Errorf("schema: apply definitions: %w", err)
	}
	return names, nil
}
