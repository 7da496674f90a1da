package schema_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/brp/levering/handeling"
	"github.com/brp/levering/internal/brptest"
	"github.com/brp/levering/schema"
)

// The release before migration 0022 (kern 0009) keeps running on the renamed state (N-1,
// docs/operations.md "Upgrade"): its runtime role, granted what its grants file gave on
// publicatie_toestand, reads, updates and locks publicatie_toestand with its Dutch column names
// after the rename, and what it writes is publicatie_state's. A role without a right on the
// table gains none through the view.
func TestPreviousReleaseRunsOnTheRenamedState(t *testing.T) {
	t.Parallel()
	withRoles(t, func(t *testing.T, l handeling.Layout, db *sqlx.DB, roles brptest.Roles) {
		s := serviceSchema(l)
		version := 22
		if l == handeling.Kern {
			version = 9
		}
		// The release before's schema: the table under its old names, with the grants the
		// service's role has on it now (the grants file of then gave the same on
		// publicatie_toestand), and the rename not yet recorded.
		db.MustExec(`drop view ` + s + `.publicatie_toestand`)
		db.MustExec(`alter table ` + s + `.publicatie_state rename to publicatie_toestand`)
		for from, to := range map[string]string{"singleton": "enig", "margin": "marge", "max_lead": "grens",
			"low_margin": "laag", "high_margin": "hoog", "margins_until": "sinds", "high_margin_until": "hoog_tot", "sleeping": "slaapt"} {
			db.MustExec(`alter table ` + s + `.publicatie_toestand rename column ` + from + ` to ` + to)
		}
		db.MustExec(`delete from `+s+`.schema_migrations where version = $1`, version)
		if _, err := schema.MigrateWith(context.Background(), db.DB, schema.Config{Layout: l}); err != nil {
			t.Fatal(err)
		}

		old := sqlx.MustOpen("postgres", roles.ServiceURL)
		defer old.Close()
		tx := old.MustBegin()
		defer tx.Rollback() //nolint:errcheck // committed below
		tx.MustExec(`lock table ` + s + `.publicatie_toestand in row exclusive mode`)
		tx.MustExec(`update ` + s + `.publicatie_toestand set marge = '150 ms', slaapt = false, hoog_tot = 'infinity'`)
		var row struct {
			Marge, Grens, Laag, Hoog, Sinds, HoogTot string
			Slaapt                                   bool
		}
		if err := tx.QueryRowx(`select marge::text, grens::text, laag::text, hoog::text, sinds::text, hoog_tot::text, slaapt
			from `+s+`.publicatie_toestand`).Scan(&row.Marge, &row.Grens, &row.Laag, &row.Hoog, &row.Sinds, &row.HoogTot, &row.Slaapt); err != nil {
			t.Fatalf("the release before reads publicatie_toestand: %v", err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		var margin, until string
		var sleeping bool
		if err := db.QueryRow(`select margin::text, high_margin_until::text, sleeping from `+s+`.publicatie_state`).Scan(&margin, &until, &sleeping); err != nil {
			t.Fatal(err)
		}
		if margin != "00:00:00.15" || until != "infinity" || sleeping || row.Marge != margin || row.Slaapt {
			t.Fatalf("publicatie_state after the release before's update: margin %s, high_margin_until %s, sleeping %t (it read %+v); want 150 ms, infinity, false",
				margin, until, sleeping, row)
		}

		bij := sqlx.MustOpen("postgres", roles.BijhoudingURL)
		defer bij.Close()
		var n int
		err := bij.Get(&n, `select count(*) from `+s+`.publicatie_toestand`)
		var pe *pq.Error
		if !errors.As(err, &pe) || pe.Code != "42501" {
			t.Fatalf("bijhouding's role reading publicatie_toestand: %v, want permission denied", err)
		}
	})
}
