package scenarios

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/brp/levering/handeling"
	"github.com/brp/levering/internal/brptest"
	"github.com/brp/levering/internal/rig"
)

// BenchmarkRegistration measures what the service's triggers cost bijhouding (issue 32): the
// time of registrations on a database without the service's schema (version=bare: the
// contract's tables only) against the same on the schema of each version of
// BRP_FRESH_VERSIONS (migrated by that version's publicatie), no process of the service
// running. On a PostgreSQL of its own, a fresh database per measurement.
//
//   - single/tsreg=F/margin=M/version=V: 5,000 registrations (BRP_REG_SINGLE), each a
//     transaction of its own (the handeling, then its person), one after the other on one
//     connection, tsreg in the forms of BenchmarkFreshness (now, client, client_behind) and
//     past (an hour before the transaction). margin is the lead margin the publisher would
//     have learned (migration 0011's publicatie_toestand): 0, as before any lead is seen
//     (every registration with a lead is recorded), or learned (1 s: every lead of these forms
//     is within it); other versions have no margin and run once.
//   - bulk/n=N/form=F/version=V: one transaction registering N handelingen with a tsreg in the
//     past (a conversion, a backfill, an initial fill), statement by statement (an insert of
//     the handeling and one of its person, for each) or in two multi-row statements.
//
// Figures: us_per_handeling (wall time), backend_cpu_us_per_handeling (the CPU time of the
// PostgreSQL backend that ran them: the triggers' cost without the round trips and commit waits
// that make most of the wall time here), trigger_us_per_handeling (the time spent in the
// versions' trigger functions, from track_functions), and for bulk also seconds.
func BenchmarkRegistration(b *testing.B) {
	svc := brptest.PrivateServices(b)
	versions := append([]binVersion{{name: "bare"}}, binVersions(b, "BRP_FRESH_VERSIONS")...)
	single := envInt("BRP_REG_SINGLE", 5_000)
	for _, form := range []string{"now", "client", "client_behind", "past"} {
		for _, v := range versions {
			margins := []string{"0"}
			if v.name != "bare" && hasLeadMargin(b, svc, v) {
				margins = []string{"0", "learned"}
			}
			for _, margin := range margins {
				b.Run(fmt.Sprintf("single/tsreg=%s/margin=%s/version=%s", form, margin, v.name), measured(func(b *testing.B) figures {
					db, _ := versionDB(b, svc, v)
					if margin == "learned" {
						// publicatie_state since migration 0022, publicatie_toestand before.
						db.MustExec(`do $$ begin
							if to_regclass('publicatie_state') is not null then update publicatie_state set margin = '1 s';
							else update publicatie_toestand set marge = '1 s'; end if;
						end $$`)
					}
					cost := backendCost(b, db)
					start := time.Now()
					registerOneByOne(b, db, form, single)
					d := time.Since(start)
					return costFigures(d, single, cost)
				}))
			}
		}
	}
	for _, n := range []int{10_000, 20_000, 40_000} {
		for _, form := range []string{"statements", "multirow"} {
			for _, v := range versions {
				b.Run(fmt.Sprintf("bulk/n=%d/form=%s/version=%s", n, form, v.name), measured(func(b *testing.B) figures {
					db, _ := versionDB(b, svc, v)
					cost := backendCost(b, db)
					start := time.Now()
					registerBulk(b, db, form, n)
					f := costFigures(time.Since(start), n, cost)
					f["seconds"] = f["us_per_handeling"] * float64(n) / 1e6
					return f
				}))
			}
		}
	}
}

// backendCost keeps db to one connection, with PostgreSQL's timing of PL/pgSQL functions on,
// and returns what its backend has used since: CPU seconds (the registrations' own cost in
// PostgreSQL, triggers and their transition tables included, without the round trips and
// commit waits that dominate their wall time on one connection) and the seconds spent in the
// triggers' functions (track_functions: precise where the CPU time of a busy VM is not).
func backendCost(b *testing.B, db *sqlx.DB) func() (cpu, triggers float64) {
	b.Helper()
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	var pid int
	if err := db.Get(&pid, `select pg_backend_pid()`); err != nil {
		b.Fatal(err)
	}
	db.MustExec(`set track_functions = 'pl'`)
	before, err := rig.ProcessCPU(pid)
	if err != nil {
		b.Fatal(err)
	}
	return func() (float64, float64) {
		after, err := rig.ProcessCPU(pid)
		if err != nil {
			b.Fatal(err)
		}
		var still int
		if err := db.Get(&still, `select pg_backend_pid()`); err != nil || still != pid {
			b.Fatalf("the registrations' connection changed (backend %d, now %d): %v", pid, still, err)
		}
		// A backend reports its function statistics when idle, at most once a second, unless
		// asked to at the next chance (PostgreSQL 15).
		db.MustExec(`select pg_stat_force_next_flush()`)
		db.MustExec(`select 1`)
		var ms float64
		if err := db.Get(&ms, `select coalesce(sum(total_time), 0) from pg_stat_user_functions`); err != nil {
			b.Fatal(err)
		}
		return after - before, ms / 1e3
	}
}

func costFigures(d time.Duration, n int, cost func() (float64, float64)) figures {
	cpu, triggers := cost()
	return figures{
		"us_per_handeling":             float64(d.Microseconds()) / float64(n),
		"backend_cpu_us_per_handeling": cpu * 1e6 / float64(n),
		"trigger_us_per_handeling":     triggers * 1e6 / float64(n),
	}
}

// versionDB is a fresh database with the contract's tables and, unless v is bare, v's schema
// (migrated by v's publicatie), and its URL.
func versionDB(b *testing.B, svc *brptest.Services, v binVersion) (*sqlx.DB, string) {
	b.Helper()
	db, url := bareDB(b, svc)
	if v.name == "bare" {
		db.MustExec(rig.BijhoudingText)
		return db, url
	}
	if v.layout == handeling.Kern {
		db.MustExec(rig.BijhoudingKern)
	}
	migrate := exec.Command(v.pub, "migrate")
	migrate.Env = rig.Environ(append([]string{"BRP_DATABASE_URL=" + url}, v.env()...)...)
	if out, err := migrate.CombinedOutput(); err != nil {
		b.Fatalf("%s migrate: %v\n%s", v.name, err, out)
	}
	if v.layout == handeling.Kern {
		// The test views, for the benchmarks' checks that read admhnd (brptest.Statuses):
		// registrations go to the kern tables themselves.
		db.MustExec(rig.KernCompat)
	}
	return db, url
}

var leadMargins = map[string]bool{}

// hasLeadMargin says whether v's schema has the lead margin (migration 0011).
func hasLeadMargin(b *testing.B, svc *brptest.Services, v binVersion) bool {
	b.Helper()
	if has, ok := leadMargins[v.name]; ok {
		return has
	}
	db, _ := versionDB(b, svc, v)
	var has bool
	if err := db.Get(&has, `select coalesce(to_regclass('publicatie_state'), to_regclass('publicatie_toestand')) is not null`); err != nil {
		b.Fatal(err)
	}
	leadMargins[v.name] = has
	return has
}

// registerOneByOne registers n handelingen, each in a transaction of its own, as
// BenchmarkFreshness's bijhouding does, and one hour back for form past.
func registerOneByOne(b *testing.B, db *sqlx.DB, form string, n int) {
	b.Helper()
	ctx := context.Background()
	expr, ok := tsregForms[form]
	if form == "past" {
		expr, ok = `now() - interval '1 hour'`, true
	}
	if !ok {
		b.Fatalf("tsreg form %q", form)
	}
	clock := strings.Contains(expr, "klok") // the client's clock, read before the transaction
	insert := `insert into admhnd (id, soort, tsreg) values ($1, 'VERHUIZING', ` + strings.ReplaceAll(expr, "klok", "$2::timestamptz") + `)`
	for i := range n {
		args := []any{i + 1}
		if clock {
			args = append(args, time.Now())
		}
		tx, err := db.BeginTxx(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := tx.Exec(insert, args...); err != nil {
			b.Fatal(err)
		}
		if _, err := tx.Exec(`insert into admhnd_persoon (admhnd_id, persoon_id) values ($1, $2)`, i+1, 1+i%20_000); err != nil {
			b.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
	}
}

// registerBulk registers n handelingen with a tsreg a day in the past in one transaction.
func registerBulk(b *testing.B, db *sqlx.DB, form string, n int) {
	b.Helper()
	tx, err := db.Beginx()
	if err != nil {
		b.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck
	switch form {
	case "statements":
		for i := range n {
			if _, err := tx.Exec(`insert into admhnd (id, soort, tsreg) values ($1::bigint, 'VERHUIZING', now() - interval '1 day' + make_interval(secs => $1::float8 / 1000))`, i+1); err != nil {
				b.Fatal(err)
			}
			if _, err := tx.Exec(`insert into admhnd_persoon (admhnd_id, persoon_id) values ($1, $2)`, i+1, 1+i%20_000); err != nil {
				b.Fatal(err)
			}
		}
	case "multirow":
		ids := make([]int64, n)
		for i := range ids {
			ids[i] = int64(i + 1)
		}
		if _, err := tx.Exec(`insert into admhnd (id, soort, tsreg)
			select id, 'VERHUIZING', now() - interval '1 day' + make_interval(secs => id::float8 / 1000) from unnest($1::bigint[]) id`, pq.Array(ids)); err != nil {
			b.Fatal(err)
		}
		if _, err := tx.Exec(`insert into admhnd_persoon (admhnd_id, persoon_id) select id, 1 + (id - 1) % 20000 from unnest($1::bigint[]) id`,
			pq.Array(ids)); err != nil {
			b.Fatal(err)
		}
	default:
		b.Fatalf("bulk form %q", form)
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
}
