package brptest

import (
	"context"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/brp/levering/handeling"
	"github.com/brp/levering/internal/load"
)

// Bed registers hs in db as bijhouding does on this run's layout (load.InsertIn): on kern in
// the kern tables themselves. It is for the thousands of handelingen a test lays down before
// what it tests: the kern layout's test views write a row at a time (a trigger call per
// handeling and per person), which made such a bed take most of its test's time there.
func Bed(t testing.TB, db *sqlx.DB, hs []load.Handeling) {
	t.Helper()
	if err := load.InsertIn(context.Background(), db, Layout(), hs); err != nil {
		t.Fatalf("brptest: bed of %d handelingen: %v", len(hs), err)
	}
}

// DeliverAll sets every handeling in db geleverd, delivered now: a bed of delivered history.
func DeliverAll(t testing.TB, db *sqlx.DB) {
	t.Helper()
	stmt := `update admhnd set statuslev = 'geleverd', tslev = now()`
	if Layout() == handeling.Kern {
		stmt = `update kern.admhnd set statuslev = 4, tslev = now()`
	}
	if _, err := db.Exec(stmt); err != nil {
		t.Fatalf("brptest: deliver the bed: %v", err)
	}
}

// Analyze refreshes the planner's statistics of the tables the handelingen are in on this
// run's layout: on kern the kern tables under the test views (ANALYZE of a view does nothing).
func Analyze(t testing.TB, db *sqlx.DB) {
	t.Helper()
	stmt := `analyze admhnd, admhnd_persoon`
	if Layout() == handeling.Kern {
		stmt = `analyze kern.admhnd, kern.actie, kern.his_persafgeleidadministrati`
	}
	if _, err := db.Exec(stmt); err != nil {
		t.Fatalf("brptest: analyze: %v", err)
	}
}
