package schema_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	neturl "net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/brp/levering/handeling"
	"github.com/brp/levering/internal/brptest"
	"github.com/brp/levering/schema"
)

func TestMigrateIsIdempotent(t *testing.T) {
	t.Parallel()
	db, _ := brptest.DBWith(t, brptest.ContractForm()) // already migrated once
	applied, err := schema.Migrate(context.Background(), db.DB)
	if err != nil || len(applied) != 0 {
		t.Fatalf("second Migrate applied %v, %v; want nothing", applied, err)
	}
	all, _ := schema.Migrations()
	var n int
	if err := db.Get(&n, `select count(*) from schema_migrations`); err != nil || n != len(all) {
		t.Fatalf("schema_migrations has %d rows (%v), want %d", n, err, len(all))
	}
}

func TestMigrateOverTablesOfBijhouding(t *testing.T) {
	t.Parallel()
	db, _ := brptest.DBWith(t, brptest.ContractForm())
	ctx := context.Background()
	// Start from the contract's bare tables with data in them, as bijhouding would have them.
	if _, err := db.Exec(`drop schema public cascade; create schema public;
		create table admhnd (id bigint primary key, soort text not null, tsreg timestamptz not null,
			tslev timestamptz null, statuslev text null);
		create table admhnd_persoon (admhnd_id bigint not null references admhnd(id), persoon_id bigint not null,
			primary key (admhnd_id, persoon_id));
		insert into admhnd values (1, 'GEBOORTE', now(), null, null);
		insert into admhnd_persoon values (1, 10);`); err != nil {
		t.Fatal(err)
	}
	if _, err := schema.Migrate(ctx, db.DB); err != nil {
		t.Fatalf("Migrate over existing tables: %v", err)
	}
	var n int
	if err := db.Get(&n, `select count(*) from admhnd where tspub is null and foutreden is null`); err != nil || n != 1 {
		t.Fatalf("existing row lost or columns missing: %d, %v", n, err)
	}
}

// Bijhouding registers, and an operator may set handelingen back by hand, with roles of their
// own that have rights on admhnd and admhnd_persoon only: the service's triggers on admhnd
// (late and set-back handelingen) must not need more.
func TestBijhoudingNeedsNoRightsOnTheServicesTables(t *testing.T) {
	t.Parallel()
	db, url := brptest.DBWith(t, brptest.ContractForm())
	role := fmt.Sprintf("bijhouding_test_%d", time.Now().UnixNano())
	db.MustExec(`create role ` + role + ` login`)
	t.Cleanup(func() {
		db.Exec(`drop owned by ` + role) //nolint:errcheck // best effort
		db.Exec(`drop role ` + role)     //nolint:errcheck // best effort
	})
	db.MustExec(`grant usage on schema public to ` + role)
	db.MustExec(`grant select, insert, update on admhnd, admhnd_persoon to ` + role)
	u, err := neturl.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	u.User = neturl.User(role)
	bij, err := sqlx.Open("postgres", u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer bij.Close()
	began := time.Now()
	if _, err := bij.Exec(`insert into admhnd (id, soort, tsreg) values
		(2, 'GEBOORTE', now() - interval '1 hour'), (1, 'GEBOORTE', now() - interval '1 hour'), (200, 'GEBOORTE', now() + interval '1 hour')`); err != nil {
		t.Fatalf("bijhouding's insert: %v", err)
	}
	took := time.Since(began)
	var late []int64
	if err := db.Select(&late, `select admhnd_id from publicatie_nakomer order by 1`); err != nil {
		t.Fatal(err)
	}
	// A statement whose trigger ran more than half a second after its transaction began is a
	// late writer's, and all it registers is recorded (registration.sql): on a busy machine
	// 200 too. Within half a second only the two in the past.
	if !slices.Equal(late, []int64{1, 2}) && (took <= 500*time.Millisecond || !slices.Equal(late, []int64{1, 2, 200})) {
		t.Fatalf("recorded as registered late: %v, want [1 2] (the insert took %v)", late, took)
	}
	// Persons added in another transaction: recorded too, the handeling's row held meanwhile.
	if _, err := bij.Exec(`insert into admhnd_persoon (admhnd_id, persoon_id) values (1, 10)`); err != nil {
		t.Fatalf("bijhouding's late persons: %v", err)
	}
	db.MustExec(`update admhnd set statuslev = 'fout' where id = 200`)
	if _, err := bij.Exec(`update admhnd set statuslev = null where id = 200`); err != nil {
		t.Fatalf("set back by hand: %v", err)
	}
	late = nil
	if err := db.Select(&late, `select admhnd_id from publicatie_nakomer order by 1`); err != nil || !slices.Equal(late, []int64{1, 2, 200}) {
		t.Fatalf("recorded late, late persons and set back: %v (%v), want [1 2 200] (1 recorded late, then for its persons)", late, err)
	}
}

// bareTables leaves db with the contract's tables only, as bijhouding has them before the
// service's first migrate, with n handelingen of one person each.
func bareTables(t testing.TB, db *sqlx.DB, n int) {
	t.Helper()
	db.MustExec(`drop schema public cascade; create schema public;
		create table admhnd (id bigint primary key, soort text not null, tsreg timestamptz not null,
			tslev timestamptz null, statuslev text null);
		create table admhnd_persoon (admhnd_id bigint not null references admhnd(id), persoon_id bigint not null,
			primary key (admhnd_id, persoon_id))`)
	db.MustExec(`insert into admhnd select g, 'GEBOORTE', now() - interval '1 day', null, null from generate_series(1, $1) g`, n)
	db.MustExec(`insert into admhnd_persoon select g, g from generate_series(1, $1) g`, n)
}

// logged collects what Migrate logs.
type logged struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logged) Enabled(context.Context, slog.Level) bool { return true }
func (l *logged) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = append(l.msgs, r.Message)
	return nil
}
func (l *logged) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logged) WithGroup(string) slog.Handler      { return l }
func (l *logged) count(msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, m := range l.msgs {
		if strings.Contains(m, msg) {
			n++
		}
	}
	return n
}

// A long reader (pg_dump, a report) holds a lock a migration step needs. The step must give up
// and retry, not queue bijhouding's inserts behind it for the reader's whole duration.
func TestMigrateBesideALongReaderDoesNotBlockBijhouding(t *testing.T) {
	t.Parallel()
	db, _ := brptest.DBWith(t, brptest.ContractForm())
	bareTables(t, db, 1000)
	ctx := context.Background()
	reader, err := db.BeginTxx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Rollback() //nolint:errcheck // read only
	var n int
	if err := reader.Get(&n, `select count(*) from admhnd`); err != nil {
		t.Fatal(err)
	}
	log := &logged{}
	done := make(chan error, 1)
	go func() {
		_, err := schema.MigrateWith(ctx, db.DB, schema.Config{LockTimeout: 200 * time.Millisecond, Log: slog.New(log)})
		done <- err
	}()
	brptest.Eventually(t, time.Minute, func() error {
		if log.count("waits for a lock") < 2 {
			return fmt.Errorf("migration has not retried twice yet: %v", log.msgs)
		}
		return nil
	})
	// The reader still holds its lock and the migration keeps trying: bijhouding registers.
	for i := range 20 {
		ictx, cancel := context.WithTimeout(ctx, 20*time.Second)
		_, err := db.ExecContext(ictx, `insert into admhnd (id, soort, tsreg) values ($1, 'GEBOORTE', now())`, 10_000+i)
		cancel()
		if err != nil {
			t.Fatalf("bijhouding's insert %d beside the waiting migration: %v", i, err)
		}
	}
	if err := reader.Rollback(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Migrate after the reader ended: %v", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("Migrate did not finish after the reader ended")
	}
	if err := schema.Check(ctx, db.DB, handeling.Contract); err != nil {
		t.Fatal(err)
	}
}

// An index build interrupted (a crash, a cancel) leaves an invalid index that "if not exists"
// would keep forever: the next Migrate builds it again.
func TestMigrateRebuildsAnIndexAnInterruptedBuildLeftInvalid(t *testing.T) {
	t.Parallel()
	db, _ := brptest.DBWith(t, brptest.ContractForm())
	db.MustExec(`insert into admhnd (id, soort, tsreg) values (1, 'GEBOORTE', now()), (2, 'GEBOORTE', now())`)
	db.MustExec(`drop index admhnd_geleverd_tslev_idx`)
	db.MustExec(`delete from schema_migrations where name = '0005_geleverd_tslev.sql'`)
	// A unique build over duplicates fails halfway and leaves its index invalid.
	if _, err := db.Exec(`create unique index concurrently admhnd_geleverd_tslev_idx on admhnd (soort)`); err == nil {
		t.Fatal("the unique build over duplicates succeeded")
	}
	st, err := schema.Status(context.Background(), db.DB, handeling.Contract)
	if err != nil || len(st.InvalidIndexes) != 1 || st.Pending() != 1 {
		t.Fatalf("status before: %+v, %v; want one invalid index, one pending migration", st, err)
	}
	if err := schema.Check(context.Background(), db.DB, handeling.Contract); !errors.Is(err, schema.ErrOutdated) {
		t.Fatalf("Check with a migration pending: %v, want ErrOutdated", err)
	}
	log := &logged{}
	if _, err := schema.MigrateWith(context.Background(), db.DB, schema.Config{Log: slog.New(log)}); err != nil {
		t.Fatal(err)
	}
	var def string
	if err := db.Get(&def, `select pg_get_indexdef(c.oid) from pg_class c join pg_index i on i.indexrelid = c.oid
		where c.relname = 'admhnd_geleverd_tslev_idx' and i.indisvalid`); err != nil || !strings.Contains(def, "(tslev)") {
		t.Fatalf("index after Migrate: %q, %v; want the valid index on tslev", def, err)
	}
	if log.count("invalid index") != 1 {
		t.Fatalf("logged %v, want the rebuild", log.msgs)
	}
}

// A migration interrupted after its transaction but before it was recorded runs again from
// the start: every step is idempotent.
func TestMigrateRunsAgainAfterAnInterruption(t *testing.T) {
	t.Parallel()
	db, _ := brptest.DBWith(t, brptest.ContractForm())
	db.MustExec(`delete from schema_migrations`)
	if _, err := schema.Migrate(context.Background(), db.DB); err != nil {
		t.Fatalf("Migrate over a schema applied but not recorded: %v", err)
	}
}

// During a rolling upgrade the previous release runs on the new schema: a database ahead of
// the binary passes the check.
func TestCheckAcceptsADatabaseAheadOfTheBinary(t *testing.T) {
	t.Parallel()
	db, _ := brptest.DBWith(t, brptest.ContractForm())
	db.MustExec(`insert into schema_migrations (version, name) values (9999, '9999_next_release.sql')`)
	if err := schema.Check(context.Background(), db.DB, handeling.Contract); err != nil {
		t.Fatalf("Check with the database ahead: %v", err)
	}
	st, err := schema.Status(context.Background(), db.DB, handeling.Contract)
	if err != nil || st.Current != 9999 || st.Latest != schema.Latest() || st.Pending() != 0 {
		t.Fatalf("status %+v, %v", st, err)
	}
}

// admhnd_persoon without a key gets an index by admhnd_id; with the contract's key it gets
// none beside it.
func TestPersoonIndexOnlyWhereTheKeyIsMissing(t *testing.T) {
	t.Parallel()
	for form, want := range map[brptest.Form]bool{brptest.StatusText: false, brptest.PersoonWithoutKey: true} {
		db, _ := brptest.DBWith(t, form)
		var n int
		if err := db.Get(&n, `select count(*) from pg_indexes where tablename = 'admhnd_persoon' and indexname = 'admhnd_persoon_admhnd_idx'`); err != nil {
			t.Fatal(err)
		}
		if (n == 1) != want {
			t.Errorf("%s: admhnd_persoon_admhnd_idx %d, want %v", form.Name, n, want)
		}
	}
}
