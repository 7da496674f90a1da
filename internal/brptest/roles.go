package brptest

import (
	"context"
	neturl "net/url"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/brp/levering/handeling"
)

// Roles are login roles of one test's own, with the rights the layout's shipped grants file
// (schema/grants) gives them, applied with psql as a DBA applies it.
type Roles struct {
	// Service and Bijhouding are the roles' names; ServiceURL and BijhoudingURL the
	// database's URL as each of them.
	Service, Bijhouding       string
	ServiceURL, BijhoudingURL string
}

// GrantRoles creates a runtime role and a bijhouding role for db (at dbURL, migrated to layout
// l by its owner, the tests' superuser), runs the grants file of l for them with psql, and
// drops both when t ends. The roles are the cluster's: their names are unique per test.
func GrantRoles(t testing.TB, db *sqlx.DB, dbURL string, l handeling.Layout) Roles {
	t.Helper()
	name := Name(t)
	r := Roles{Service: "svc_" + name, Bijhouding: "bij_" + name}
	for _, role := range []string{r.Service, r.Bijhouding} {
		db.MustExec(`create role ` + role + ` login`)
		t.Cleanup(func() {
			db.Exec(`drop owned by ` + role) //nolint:errcheck // best effort: the database goes too
			db.Exec(`drop role ` + role)     //nolint:errcheck // best effort
		})
	}
	file := "contract.sql"
	if l.Or() == handeling.Kern {
		file = "kern.sql"
	}
	out, err := exec.CommandContext(context.Background(), "psql", "-X", "-q", "-v", "ON_ERROR_STOP=1",
		"-v", "service_role="+r.Service, "-v", "bijhouding_role="+r.Bijhouding,
		"-f", filepath.Join(repoDir(), "schema", "grants", file), psqlURL(t, dbURL)).CombinedOutput()
	if err != nil {
		t.Fatalf("brptest: psql -f schema/grants/%s: %v\n%s", file, err, out)
	}
	r.ServiceURL, r.BijhoudingURL = URLAs(t, dbURL, r.Service), URLAs(t, dbURL, r.Bijhouding)
	return r
}

// psqlURL is dbURL without the parameters psql does not take (lib/pq's session settings of
// rig's test databases: search_path, which the grants files do not need since they name every
// object of the kern layout with its schema, and jit).
func psqlURL(t testing.TB, dbURL string) string {
	t.Helper()
	u, err := neturl.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Del("search_path")
	q.Del("jit")
	u.RawQuery = q.Encode()
	return u.String()
}

// URLAs is dbURL with role as its user (the tests' server trusts local logins).
func URLAs(t testing.TB, dbURL, role string) string {
	t.Helper()
	u, err := neturl.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = neturl.User(role)
	return u.String()
}
