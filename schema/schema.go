// Package schema owns the database schema: the contract's admhnd tables plus the service's own
// columns, indexes and tables, as ordered SQL migrations embedded in the binary. The kern
// layout (handeling.Kern) has migrations of its own (kern/): they check the BRP kern tables
// the service needs, create the service's schema brp_levering, and put the service's tables,
// functions and views there and its named indexes and triggers on the kern tables.
//
// Migrations run online, beside bijhouding registering on the same tables: no step may block
// an insert into admhnd or admhnd_persoon for more than about a second, whatever the tables'
// size. So a migration is two parts. The first runs in one transaction with a short
// lock_timeout: it may take a lock bijhouding's inserts wait for (a trigger, a column), but
// only briefly, and a lock it cannot get within Config.LockTimeout (behind a pg_dump, say) is
// given up and tried again later, rather than queueing every insert behind it. After the line
// "-- brp:outside-transaction" come statements that run one by one outside any transaction:
// "create index concurrently", which builds an index without blocking writes. A migration
// counts as applied only when both parts are done; after a crash it runs again from the
// start, so both parts must be idempotent ("if not exists", "create or replace"), and an
// index a crashed "concurrently" build left invalid is dropped and built again.
//
// The service's functions, triggers and views are not changed by numbered migrations any more
// (since 0020, kern 0007): their current text is in definitions/<layout>/, one file per
// subject, applied after the numbered migrations whenever it changes (Definition).
package schema

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/lib/pq"

	"github.com/brp/levering/handeling"
)

//go:embed migrations/*.sql kern/*.sql grants/*.sql definitions/*/*.sql
var migrations embed.FS

// dir is the directory of layout l's migrations.
func dir(l handeling.Layout) string {
	if l.Or() == handeling.Kern {
		return "kern"
	}
	return "migrations"
}

// migrateLockKey serialises concurrent Migrate calls (several replicas deploying at once).
const migrateLockKey = 7_345_001

// outsideMarker starts the part of a migration run statement by statement outside a
// transaction.
const outsideMarker = "-- brp:outside-transaction"

// onlyIfMarker begins a line, above a statement of the part outside a transaction, holding a
// query of one boolean: the statement runs only when it is true.
const onlyIfMarker = "-- brp:only-if "

// Migration is one embedded schema step.
type Migration struct {
	Version int
	Name    string
	// SQL runs in one transaction with a short lock_timeout.
	SQL string
	// Outside are statements run one by one outside a transaction (create index concurrently).
	Outside []Statement
}

// Statement is one statement of a migration's part outside a transaction.
type Statement struct {
	SQL string
	// OnlyIf, when set, is a query of one boolean (from a line "-- brp:only-if <query>" above
	// the statement): the statement runs only when it is true. For an index the contract's
	// own key usually provides (a bijhouding table created without it).
	OnlyIf string
}

// Migrations returns the embedded migrations of the contract layout in the order they are
// applied.
func Migrations() ([]Migration, error) { return MigrationsOf(handeling.Contract) }

// MigrationsOf returns the embedded migrations of layout l in the order they are applied.
func MigrationsOf(l handeling.Layout) ([]Migration, error) {
	d := dir(l)
	entries, err := fs.ReadDir(migrations, d)
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
		body, err := migrations.ReadFile(d + "/" + name)
		if err != nil {
			return nil, fmt.Errorf("schema: read %q: %w", name, err)
		}
		m := Migration{Version: v, Name: name}
		inTx, outside, _ := strings.Cut(string(body), outsideMarker)
		m.SQL = inTx
		for _, s := range strings.Split(outside, ";") {
			st := Statement{SQL: strings.TrimSpace(stripComments(s))}
			for _, line := range strings.Split(s, "\n") {
				if q, ok := strings.CutPrefix(strings.TrimSpace(line), onlyIfMarker); ok {
					st.OnlyIf = strings.TrimSpace(q)
				}
			}
			if st.SQL != "" {
				m.Outside = append(m.Outside, st)
			}
		}
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

func stripComments(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "--") {
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// Latest is the version of the newest embedded migration of the contract layout: the schema
// this binary needs there.
func Latest() int { return LatestOf(handeling.Contract) }

// LatestOf is the version of the newest embedded migration of layout l.
func LatestOf(l handeling.Layout) int {
	all, err := MigrationsOf(l)
	if err != nil || len(all) == 0 {
		return 0
	}
	return all[len(all)-1].Version
}

// Config says how Migrate treats bijhouding beside it. Zero values mean the defaults.
type Config struct {
	// LockTimeout is the longest a migration waits for a lock on a table (and so the longest
	// bijhouding's inserts queue behind that wait); then it rolls back and tries again.
	// Default 500 ms; at most 10 s.
	LockTimeout time.Duration
	// Retry is the pause before the first retry after a lock timeout, doubling up to 10 s.
	// Default 200 ms.
	Retry time.Duration
	// Log, when set, hears of every retry and every invalid index rebuilt.
	Log *slog.Logger
	// Layout says which tables hold the handelingen; zero is handeling.Contract.
	Layout handeling.Layout
}

func (c *Config) setDefaults() {
	if c.LockTimeout == 0 {
		c.LockTimeout = 500 * time.Millisecond
	}
	if c.Retry == 0 {
		c.Retry = 200 * time.Millisecond
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
}

func (c Config) validate() error {
	if c.LockTimeout < 0 || c.LockTimeout > 10*time.Second {
		return fmt.Errorf("schema: Config.LockTimeout %s: expected 0 (500 ms) up to 10s", c.LockTimeout)
	}
	if c.Retry < 0 || c.Retry > 10*time.Second {
		return fmt.Errorf("schema: Config.Retry %s: expected 0 (200 ms) up to 10s", c.Retry)
	}
	if !c.Layout.Valid() {
		return fmt.Errorf("schema: Config.Layout %q: expected contract or kern", c.Layout)
	}
	return nil
}

// Migrate is MigrateWith with the default Config.
func Migrate(ctx context.Context, db *sql.DB) ([]string, error) {
	return MigrateWith(ctx, db, Config{})
}

// MigrateWith applies every migration not yet recorded in schema_migrations, in order, then
// the definitions whose text the database has not applied (Definition), under a session
// advisory lock, so it is idempotent and safe to run from several processes at once. It
// returns the names of the migrations and definitions files it applied. It retries a step
// that times out on a lock until ctx ends.
func MigrateWith(ctx context.Context, db *sql.DB, cfg Config) ([]string, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	all, err := MigrationsOf(cfg.Layout)
	if err != nil {
		return nil, err
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("schema: connect: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `select pg_advisory_lock($1)`, migrateLockKey); err != nil {
		return nil, fmt.Errorf("schema: lock: %w", err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), `select pg_advisory_unlock($1)`, migrateLockKey) //nolint:errcheck // the session's end releases it too
	if cfg.Layout.Or() == handeling.Kern {
		if err := checkKern(ctx, conn); err != nil {
			return nil, err
		}
		// The service's schema, and this session's search_path for what the migrations
		// create (its functions keep it: "set search_path from current"). Reset before the
		// pooled connection goes back.
		if _, err := conn.ExecContext(ctx, `create schema if not exists brp_levering`); err != nil {
			return nil, fmt.Errorf("schema: create schema brp_levering: %w", err)
		}
		if _, err := conn.ExecContext(ctx, `set search_path = brp_levering`); err != nil {
			return nil, fmt.Errorf("schema: search_path: %w", err)
		}
		defer conn.ExecContext(context.WithoutCancel(ctx), `reset search_path`) //nolint:errcheck // a failed reset ends with the session
	}
	if _, err := conn.ExecContext(ctx, `create table if not exists schema_migrations (
		version int primary key, name text not null, applied_at timestamptz not null default now())`); err != nil {
		return nil, fmt.Errorf("schema: create schema_migrations: %w", err)
	}
	applied, err := appliedVersions(ctx, conn, `select version, applied_at from schema_migrations`)
	if err != nil {
		return nil, err
	}
	var done []string
	current := 0
	for v := range applied {
		current = max(current, v)
	}
	for _, m := range all {
		if _, ok := applied[m.Version]; ok {
			continue
		}
		if err := apply(ctx, conn, cfg, m); err != nil {
			return done, err
		}
		done = append(done, m.Name)
		current = max(current, m.Version)
	}
	defined, err := define(ctx, conn, cfg, current)
	return append(done, defined...), err
}

type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func appliedVersions(ctx context.Context, q queryer, query string) (map[int]time.Time, error) {
	return readMap[int, time.Time](ctx, q, "schema_migrations", query)
}

// readMap reads the two columns of query's rows (from table, for the error) as key and value.
func readMap[K comparable, V any](ctx context.Context, q queryer, table, query string) (map[K]V, error) {
	rows, err := q.QueryContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("schema: read %s: %w", table, err)
	}
	defer rows.Close()
	out := map[K]V{}
	for rows.Next() {
		var k K
		var v V
		if err := rows.Scan(&k, &v); err != nil {
			return nil, fmt.Errorf("schema: read %s: %w", table, err)
		}
		out[k] = v
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("schema: read %s: %w", table, err)
	}
	return out, nil
}

// apply runs one migration: its transaction (retried on lock timeouts), its statements
// outside a transaction, then records it.
func apply(ctx context.Context, conn *sql.Conn, cfg Config, m Migration) error {
	record := `insert into schema_migrations (version, name) values ($1, $2) on conflict do nothing`
	err := retryLocked(ctx, cfg, m.Name, func() error {
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback() //nolint:errcheck // no-op after commit
		if _, err := tx.ExecContext(ctx, fmt.Sprintf(`set local lock_timeout = %d`, cfg.LockTimeout.Milliseconds())); err != nil {
			return err
		}
		if strings.TrimSpace(stripComments(m.SQL)) != "" {
			if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
				return err
			}
		}
		if len(m.Outside) == 0 {
			if _, err := tx.ExecContext(ctx, record, m.Version, m.Name); err != nil {
				return err
			}
		}
		return tx.Commit()
	})
	if err != nil {
		return fmt.Errorf("schema: apply %s: %w", m.Name, err)
	}
	if len(m.Outside) == 0 {
		return nil
	}
	for _, stmt := range m.Outside {
		if err := outside(ctx, conn, cfg, m.Name, stmt); err != nil {
			return fmt.Errorf("schema: apply %s: %w", m.Name, err)
		}
	}
	if _, err := conn.ExecContext(ctx, record, m.Version, m.Name); err != nil {
		return fmt.Errorf("schema: record %s: %w", m.Name, err)
	}
	return nil
}

var concurrentIndex = regexp.MustCompile(`(?is)^create\s+(?:unique\s+)?index\s+concurrently\s+if\s+not\s+exists\s+(\w+)\s+on\s+([\w.]+)`)

// outside runs one statement outside a transaction. Before an index build it drops an invalid
// index of that name: what a "concurrently" build leaves behind when it is interrupted, and
// which "if not exists" would otherwise keep forever.
func outside(ctx context.Context, conn *sql.Conn, cfg Config, name string, st Statement) error {
	if st.OnlyIf != "" {
		var run bool
		if err := conn.QueryRowContext(ctx, st.OnlyIf).Scan(&run); err != nil {
			return fmt.Errorf("only-if: %w", err)
		}
		if !run {
			return nil
		}
	}
	stmt := st.SQL
	if _, err := conn.ExecContext(ctx, `set lock_timeout = 0`); err != nil {
		return err
	}
	if m := concurrentIndex.FindStringSubmatch(stmt); m != nil {
		// The drop statement names the index: PostgreSQL writes it (format's %I quotes the
		// identifier), as a parameter cannot stand for one.
		var drop sql.NullString
		err := conn.QueryRowContext(ctx, `select format('drop index concurrently if exists %I.%I', n.nspname, c.relname)
			from pg_index i join pg_class c on c.oid = i.indexrelid join pg_namespace n on n.oid = c.relnamespace
			where c.relname = $1 and i.indrelid = $2::regclass and not i.indisvalid`, m[1], m[2]).Scan(&drop)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if drop.Valid {
			cfg.Log.Warn("invalid index left by an interrupted build: building it again", slog.String("migration", name), slog.String("index", m[1]))
			if _, err := conn.ExecContext(ctx, drop.String); err != nil {
				return err
			}
		}
	}
	_, err := conn.ExecContext(ctx, stmt)
	return err
}

// retryLocked runs f until it does not fail on a lock timeout, pausing in between so that the
// inserts that queued behind the attempt get through.
func retryLocked(ctx context.Context, cfg Config, name string, f func() error) error {
	pause := cfg.Retry
	for attempt := 1; ; attempt++ {
		err := f()
		var pe *pq.Error
		if err == nil || !errors.As(err, &pe) || pe.Code != "55P03" { // lock_not_available
			return err
		}
		cfg.Log.Info("migration waits for a lock held by another session; trying again",
			slog.String("migration", name), slog.Int("attempt", attempt), slog.Float64("retry_in_seconds", pause.Seconds()))
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %w)", ctx.Err(), err)
		case <-time.After(pause):
		}
		pause = min(2*pause, 10*time.Second)
	}
}
