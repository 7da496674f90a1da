package schema_test

import (
	"context"
	"errors"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/brp/levering/handeling"
	"github.com/brp/levering/internal/brptest"
	"github.com/brp/levering/schema"
)

var definedObject = regexp.MustCompile(`(?im)^create\s+(?:or\s+replace\s+)?(?:constraint\s+)?(function|trigger|view)\s+(?:brp_levering\.)?(\w+)`)

// TestEveryFunctionTriggerAndViewHasOneDefinition: every function, trigger and view of the
// service in a migrated database is created by exactly one definitions file of its layout, and
// every object a definitions file creates is there. A numbered migration that adds one without
// a definitions file, or a definitions file that repeats another's, fails here.
func TestEveryFunctionTriggerAndViewHasOneDefinition(t *testing.T) {
	t.Parallel()
	for _, f := range []brptest.Form{brptest.StatusText, brptest.KernForm} {
		t.Run(f.Name, func(t *testing.T) {
			t.Parallel()
			db, _ := brptest.DBWith(t, f)
			defs, err := schema.DefinitionsOf(f.Layout)
			if err != nil {
				t.Fatal(err)
			}
			files := map[string][]string{} // object to the files that create it
			for _, d := range defs {
				for _, m := range definedObject.FindAllStringSubmatch(d.SQL, -1) {
					obj := strings.ToLower(m[1] + " " + m[2])
					if !slices.Contains(files[obj], d.Name) {
						files[obj] = append(files[obj], d.Name)
					}
				}
			}
			nsp := "public"
			if f.Layout == handeling.Kern {
				nsp = handeling.ServiceSchema
			}
			var objects []string
			if err := db.Select(&objects, `select 'function ' || p.proname from pg_proc p join pg_namespace n on n.oid = p.pronamespace where n.nspname = $1
				union all select 'view ' || c.relname from pg_class c join pg_namespace n on n.oid = c.relnamespace where n.nspname = $1 and c.relkind = 'v'
				union all select 'trigger ' || t.tgname from pg_trigger t join pg_proc p on p.oid = t.tgfoid join pg_namespace n on n.oid = p.pronamespace
				where n.nspname = $1 and not t.tgisinternal
				order by 1`, nsp); err != nil {
				t.Fatal(err)
			}
			for _, o := range objects {
				if len(files[o]) != 1 {
					t.Errorf("%s: created by definitions files %v, want exactly one", o, files[o])
				}
			}
			for o := range files {
				if !slices.Contains(objects, o) {
					t.Errorf("%s: in definitions file %v, not in the migrated database", o, files[o])
				}
			}
		})
	}
}

// A definitions file is applied again when its text differs from what the database recorded,
// and only then: until it is, the database counts as outdated (publicatie refuses to start)
// and migrate status names it; migrate puts its text back over a hand-made change.
func TestDefinitionsAppliedWhenTheirTextChanges(t *testing.T) {
	t.Parallel()
	db, _ := brptest.DB(t)
	ctx := context.Background()
	cfg := schema.Config{Layout: brptest.Layout()}
	if applied, err := schema.MigrateWith(ctx, db.DB, cfg); err != nil || len(applied) != 0 {
		t.Fatalf("a second migrate applied %v (%v), want nothing", applied, err)
	}
	// An operator's change by hand, and a record that no longer matches the binary's text
	// (as after an upgrade to a release whose rules.sql differs).
	db.MustExec(`create or replace function publicatie_tsreg_from() returns timestamptz
		language sql immutable parallel safe as $$ select '1970-01-01 00:00:00+00'::timestamptz $$`)
	db.MustExec(`update schema_definitions set sha256 = 'older' where name = 'rules.sql'`)
	st, err := schema.Status(ctx, db.DB, cfg.Layout)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(st.StaleDefinitions, []string{"rules.sql"}) || st.Pending() != 1 {
		t.Fatalf("status: stale definitions %v, pending %d; want [rules.sql], 1", st.StaleDefinitions, st.Pending())
	}
	if err := schema.Check(ctx, db.DB, cfg.Layout); !errors.Is(err, schema.ErrOutdated) {
		t.Fatalf("check with a stale definition: %v, want ErrOutdated", err)
	}
	applied, err := schema.MigrateWith(ctx, db.DB, cfg)
	if err != nil || !slices.Equal(applied, []string{"definitions/rules.sql"}) {
		t.Fatalf("migrate applied %v (%v), want [definitions/rules.sql]", applied, err)
	}
	if from := tsregFrom(t, db); from != "0001-01-02" {
		t.Fatalf("publicatie_tsreg_from() after migrate: %s, want the definition's 0001-01-02", from)
	}
	if err := schema.Check(ctx, db.DB, cfg.Layout); err != nil {
		t.Fatalf("check after migrate: %v", err)
	}
}

// A database that a newer release migrated keeps that release's definitions: an older
// binary's migrate (a rollback of the deployment, a replica not yet rolled) does not put its
// own older texts back, and its start check does not count them as pending.
func TestDatabaseAheadKeepsItsDefinitions(t *testing.T) {
	t.Parallel()
	db, _ := brptest.DB(t)
	ctx := context.Background()
	cfg := schema.Config{Layout: brptest.Layout()}
	db.MustExec(`insert into schema_migrations (version, name) values ($1, 'from_a_newer_release.sql')`, schema.LatestOf(cfg.Layout)+1)
	db.MustExec(`create or replace function publicatie_tsreg_from() returns timestamptz
		language sql immutable parallel safe as $$ select '1970-01-01 00:00:00+00'::timestamptz $$`)
	db.MustExec(`update schema_definitions set sha256 = 'newer'`)
	if applied, err := schema.MigrateWith(ctx, db.DB, cfg); err != nil || len(applied) != 0 {
		t.Fatalf("migrate of a database ahead applied %v (%v), want nothing", applied, err)
	}
	if from := tsregFrom(t, db); from != "1970-01-01" {
		t.Fatalf("publicatie_tsreg_from() after an older binary's migrate: %s, want the newer release's 1970-01-01", from)
	}
	if err := schema.Check(ctx, db.DB, cfg.Layout); err != nil {
		t.Fatalf("check of a database ahead: %v", err)
	}
}

func tsregFrom(t *testing.T, db *sqlx.DB) string {
	t.Helper()
	var from string
	if err := db.Get(&from, `select to_char(publicatie_tsreg_from() at time zone 'UTC', 'YYYY-MM-DD')`); err != nil {
		t.Fatal(err)
	}
	return from
}

// TestChangedDefinitionComesWithANumberedMigration holds definitions/versions.txt against the
// files: every definitions file's current text is recorded there, with a numbered migration of
// its layout that this binary carries, later than that of every older text of the file. So a
// change of a definitions file cannot ship without a numbered migration, and a database's
// version tells which release's texts it holds (an older binary then leaves them alone).
func TestChangedDefinitionComesWithANumberedMigration(t *testing.T) {
	t.Parallel()
	body, err := os.ReadFile("definitions/versions.txt")
	if err != nil {
		t.Fatal(err)
	}
	type text struct {
		version int
		sum     string
	}
	texts := map[string][]text{}
	for i, line := range strings.Split(string(body), "\n") {
		if line = strings.TrimSpace(line); line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.Atoi(f[min(1, len(f)-1)])
		if len(f) != 3 || err != nil {
			t.Fatalf("versions.txt line %d: %q, want \"layout/file version sha256\"", i+1, line)
		}
		texts[f[0]] = append(texts[f[0]], text{v, f[2]})
	}
	for _, l := range []handeling.Layout{handeling.Contract, handeling.Kern} {
		defs, err := schema.DefinitionsOf(l)
		if err != nil {
			t.Fatal(err)
		}
		latest := schema.LatestOf(l)
		// The migration to name for a changed text: the latest one, when no text came with it
		// yet (its author added it first), else a new one.
		recorded := 0
		for key, xs := range texts {
			if strings.HasPrefix(key, string(l)+"/") {
				for _, x := range xs {
					recorded = max(recorded, x.version)
				}
			}
		}
		next := latest + 1
		if recorded < latest {
			next = latest
		}
		for _, d := range defs {
			key := string(l) + "/" + d.Name
			current := -1
			for _, x := range texts[key] {
				if x.sum == d.Sum {
					current = x.version
				}
			}
			switch {
			case current < 0:
				t.Errorf("%s changed: add a numbered migration of the %s layout (a comment suffices) and the line \"%s %d %s\" to definitions/versions.txt",
					key, l, key, next, d.Sum)
			case current > latest:
				t.Errorf("%s: versions.txt gives its text migration %d, beyond this binary's %d", key, current, latest)
			}
			for _, x := range texts[key] {
				if x.sum != d.Sum && x.version >= current && current >= 0 {
					t.Errorf("%s: an older text came with migration %d, the current one with %d: a change needs a numbered migration of its own", key, x.version, current)
				}
			}
		}
	}
}
