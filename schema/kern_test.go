package schema_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/brp/levering/handeling"
	"github.com/brp/levering/internal/brptest"
	"github.com/brp/levering/internal/rig"
	"github.com/brp/levering/schema"
)

// The kern layout's tests run whatever BRP_TEST_LAYOUT says: each builds its own kern
// database from rig.BijhoudingKern.

// kernDB is a database with bijhouding's kern tables and nothing of the service, after change
// (SQL run on it before the test looks; empty for none).
func kernDB(t *testing.T, change string) *sqlx.DB {
	t.Helper()
	db, _ := brptest.BareDB(t, rig.BijhoudingKern)
	if change != "" {
		db.MustExec(change)
	}
	return db
}

// catalog is every object of db outside PostgreSQL's own schemas, and every column of the kern
// tables with its type, as one sorted list: two equal catalogs mean nothing was created,
// changed or dropped.
func catalog(t *testing.T, db *sqlx.DB) []string {
	t.Helper()
	var got []string
	err := db.Select(&got, `with own as (
			select oid, nspname from pg_namespace
			where nspname not like 'pg\_%' and nspname <> 'information_schema'
		)
		select 'schema ' || nspname from own
		union all select 'relation ' || c.oid::regclass::text || ' ' || c.relkind::text from pg_class c join own n on n.oid = c.relnamespace
		union all select 'trigger ' || tgname || ' on ' || tgrelid::regclass::text from pg_trigger where not tgisinternal
		union all select 'function ' || p.oid::regprocedure::text from pg_proc p join own n on n.oid = p.pronamespace
		union all select 'column ' || a.attrelid::regclass::text || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
			from pg_attribute a join pg_class c on c.oid = a.attrelid join own n on n.oid = c.relnamespace
			where a.attnum > 0 and not a.attisdropped and c.relkind = 'r'
		order by 1`)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// Migrate in the kern layout refuses a database whose kern tables are missing or differ from
// what the service needs, with one line naming the difference, and changes nothing.
func TestKernMigrateRefusesOtherKernTablesAndChangesNothing(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, change, want string
	}{
		{"no kern schema", `drop schema kern cascade`,
			"table kern.admhnd is missing (or this role cannot see it)"},
		{"no his table", `drop table kern.his_persafgeleidadministrati`,
			"table kern.his_persafgeleidadministrati is missing (or this role cannot see it)"},
		{"no statuslev", `alter table kern.admhnd drop column statuslev`,
			"kern.admhnd has no column statuslev"},
		{"no pers on his", `alter table kern.his_persafgeleidadministrati drop column pers`,
			"kern.his_persafgeleidadministrati has no column pers"},
		{"tsreg without a time zone", `alter table kern.admhnd alter column tsreg type timestamp`,
			"kern.admhnd.tsreg is timestamp without time zone, expected timestamp with time zone"},
		{"statuslev as integer", `alter table kern.admhnd alter column statuslev type integer`,
			"kern.admhnd.statuslev is integer, expected smallint"},
		{"id as integer", `alter table kern.his_persafgeleidadministrati drop constraint his_persafgeleidadministrati_admhnd_fkey;
			alter table kern.admhnd alter column id type integer`,
			"kern.admhnd.id is integer, expected bigint"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			db := kernDB(t, c.change)
			before := catalog(t, db)
			_, err := schema.MigrateWith(context.Background(), db.DB, schema.Config{Layout: handeling.Kern})
			if !errors.Is(err, schema.ErrKernMismatch) {
				t.Fatalf("Migrate: %v, want ErrKernMismatch", err)
			}
			if msg := err.Error(); !strings.HasSuffix(msg, ": "+c.want) || strings.Contains(msg, "\n") {
				t.Errorf("error %q, want one line ending %q", msg, c.want)
			}
			if after := catalog(t, db); !equalLists(before, after) {
				t.Errorf("Migrate changed the database:\nbefore %v\nafter  %v", before, after)
			}
			if err := schema.Check(context.Background(), db.DB, handeling.Kern); err == nil {
				t.Error("Check passes on a database Migrate refused")
			}
		})
	}
}

func equalLists(a, b []string) bool {
	return strings.Join(a, "\n") == strings.Join(b, "\n")
}

// bijhoudingKern registers handelingen in the kern tables as bijhouding does (kern.admhnd, a
// kern.actie, one his row of a person per handeling, in one transaction) until stop is closed,
// each statement within 20 s, and reports how many it committed and the first error.
type bijhoudingKern struct {
	db        *sqlx.DB
	committed atomic.Int64
	slowest   atomic.Int64 // nanoseconds
	mu        sync.Mutex
	err       error
}

func (b *bijhoudingKern) run(stop <-chan struct{}, from int64) {
	for id := from; ; id++ {
		select {
		case <-stop:
			return
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		start := time.Now()
		_, err := b.db.ExecContext(ctx, `with h as (
				insert into kern.admhnd (id, srt, partij, tsreg, statuslev) values ($1, 1, 1, now(), 1) returning id, tsreg
			), p as (
				insert into kern.pers (id) values ($1 % 97 + 1) on conflict do nothing
			), a as (
				insert into kern.actie (admhnd, tsreg) select id, tsreg from h returning id, admhnd, tsreg
			)
			insert into kern.his_persafgeleidadministrati (pers, tsreg, actieinh, admhnd, tslaatstewijz, sorteervolgorde)
			select $1 % 97 + 1, tsreg, id, admhnd, tsreg, 1 from a`, id)
		cancel()
		if d := time.Since(start); d.Nanoseconds() > b.slowest.Load() {
			b.slowest.Store(d.Nanoseconds())
		}
		if err != nil {
			b.mu.Lock()
			if b.err == nil {
				b.err = fmt.Errorf("handeling %d: %w", id, err)
			}
			b.mu.Unlock()
			return
		}
		b.committed.Add(1)
		time.Sleep(5 * time.Millisecond)
	}
}

// The kern migration beside bijhouding: a registration left open holds its triggers back, and
// Migrate retries what waits on that lock instead of queueing bijhouding's other registrations
// behind it; a reader's old snapshot holds its indexes built concurrently back, which take no
// lock bijhouding waits for. Every registration commits; afterwards the
// service's triggers are in place, no kern column was added, and a second Migrate applies
// nothing.
func TestKernMigrateBesideBijhouding(t *testing.T) {
	t.Parallel()
	db := kernDB(t, `insert into kern.pers (id) select g from generate_series(1, 97) g;
		insert into kern.admhnd (id, srt, partij, tsreg, statuslev) select g, 1, 1, now() - interval '1 day', 1 from generate_series(1, 1000) g;
		insert into kern.actie (id, admhnd, tsreg) select g, g, now() - interval '1 day' from generate_series(1, 1000) g;
		select setval('kern.seq_actie', 1000);
		insert into kern.his_persafgeleidadministrati (pers, tsreg, actieinh, admhnd, tslaatstewijz, sorteervolgorde)
			select g % 97 + 1, now() - interval '1 day', g, g, now() - interval '1 day', 1 from generate_series(1, 1000) g`)
	ctx := context.Background()
	reader, err := db.BeginTxx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Rollback() //nolint:errcheck // read only
	var n int
	if err := reader.Get(&n, `select count(*) from kern.admhnd`); err != nil {
		t.Fatal(err)
	}
	open, err := db.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer open.Rollback() //nolint:errcheck // committed below
	open.MustExec(`insert into kern.admhnd (id, srt, partij, tsreg, statuslev) values (5000, 1, 1, now(), 1)`)
	b := &bijhoudingKern{db: db}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { b.run(stop, 10_000) })
	defer func() {
		close(stop)
		wg.Wait()
	}()

	log := &logged{}
	done := make(chan error, 1)
	go func() {
		_, err := schema.MigrateWith(ctx, db.DB, schema.Config{Layout: handeling.Kern, LockTimeout: 200 * time.Millisecond, Log: slog.New(log)})
		done <- err
	}()
	brptest.Eventually(t, time.Minute, func() error {
		if log.count("waits for a lock") < 2 {
			return fmt.Errorf("migration has not retried twice yet: %v", log.msgs)
		}
		return nil
	})
	before := b.committed.Load()
	brptest.Eventually(t, time.Minute, func() error {
		if b.committed.Load() < before+20 {
			return fmt.Errorf("bijhouding committed %d beside the waiting migration", b.committed.Load()-before)
		}
		return nil
	})
	if err := open.Commit(); err != nil {
		t.Fatal(err)
	}
	// The indexes built concurrently wait for the reader's snapshot without a lock that
	// bijhouding's inserts conflict with.
	before = b.committed.Load()
	brptest.Eventually(t, time.Minute, func() error {
		if b.committed.Load() < before+20 {
			return fmt.Errorf("bijhouding committed %d beside the index builds", b.committed.Load()-before)
		}
		return nil
	})
	select {
	case err := <-done:
		t.Fatalf("Migrate ended (%v) while a snapshot older than its index builds was open: the test no longer shows them waiting", err)
	default:
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
	// Registrations after the migration still commit, now through the service's triggers.
	at := b.committed.Load()
	brptest.Eventually(t, time.Minute, func() error {
		if b.committed.Load() < at+20 {
			return fmt.Errorf("bijhouding committed %d after the migration", b.committed.Load()-at)
		}
		return nil
	})
	close(stop)
	wg.Wait()
	stop = make(chan struct{}) // for the deferred close
	b.mu.Lock()
	err = b.err
	b.mu.Unlock()
	if err != nil {
		t.Fatalf("bijhouding beside the migration: %v", err)
	}
	t.Logf("bijhouding committed %d registrations, the slowest in %v", b.committed.Load(), time.Duration(b.slowest.Load()))
	var handelingen int64
	if err := db.Get(&handelingen, `select count(*) from kern.admhnd a where exists (
			select from kern.his_persafgeleidadministrati h where h.admhnd = a.id)`); err != nil || handelingen != 1000+b.committed.Load() {
		t.Fatalf("%d handelingen with persons (%v), want %d", handelingen, err, 1000+b.committed.Load())
	}
	if err := db.Get(&handelingen, `select count(*) from kern.admhnd`); err != nil || handelingen != 1001+b.committed.Load() {
		t.Fatalf("%d handelingen (%v), want %d", handelingen, err, 1001+b.committed.Load())
	}
	if err := schema.Check(ctx, db.DB, handeling.Kern); err != nil {
		t.Fatal(err)
	}
	var triggers []string
	if err := db.Select(&triggers, `select tgname::text from pg_trigger where not tgisinternal
		and tgrelid in ('kern.admhnd'::regclass, 'kern.his_persafgeleidadministrati'::regclass) order by 1`); err != nil {
		t.Fatal(err)
	}
	if want := []string{"brp_levering_fout_changed", "brp_levering_geregistreerd", "brp_levering_personen_toegevoegd",
		"brp_levering_teruggezet", "brp_levering_vastgelegd"}; !equalLists(triggers, want) {
		t.Errorf("triggers on the kern tables %v, want %v", triggers, want)
	}
	brptest.KernUntouched(t, db, 0)
	applied, err := schema.MigrateWith(ctx, db.DB, schema.Config{Layout: handeling.Kern})
	if err != nil || len(applied) != 0 {
		t.Fatalf("second Migrate applied %v, %v; want nothing", applied, err)
	}
	st, err := schema.Status(ctx, db.DB, handeling.Kern)
	if err != nil || st.Pending() != 0 || len(st.InvalidIndexes) != 0 || st.Latest != schema.LatestOf(handeling.Kern) {
		t.Fatalf("status %+v, %v", st, err)
	}
}
