package rig

import (
	"context"
	"fmt"
	"net/url"
	"regexp"

	"github.com/jmoiron/sqlx"
	_ "github.com/lib/pq" // the PostgreSQL driver

	"github.com/brp/levering/handeling"
	"github.com/brp/levering/internal/dbsession"
	"github.com/brp/levering/schema"
)

var dbName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// CreateDB makes the database name afresh on the server of serverURL (dropping one of that
// name first), applies the schema and returns a handle and the database's URL.
func CreateDB(ctx context.Context, serverURL, name string) (*sqlx.DB, string, error) {
	return CreateDBWith(ctx, serverURL, name, "")
}

// CreateDBWith is CreateDB where bijhouding created the contract's tables first, with ddl
// (see the Bijhouding* forms), as on a production database before the service's first
// migrate.
func CreateDBWith(ctx context.Context, serverURL, name, ddl string) (*sqlx.DB, string, error) {
	return CreateDBIn(ctx, serverURL, name, ddl, handeling.Contract)
}

// CreateDBIn is CreateDBWith for layout l. For the kern layout ddl must create the kern tables
// (BijhoudingKern); the database gets the compatibility views (KernCompat) after the
// migration, so that tests written for the contract's tables run on it.
func CreateDBIn(ctx context.Context, serverURL, name, ddl string, l handeling.Layout) (*sqlx.DB, string, error) {
	db, dbURL, err := CreateBareDB(ctx, serverURL, name, ddl)
	if err != nil {
		return nil, "", err
	}
	if _, err := schema.MigrateWith(ctx, db.DB, schema.Config{Layout: l}); err != nil {
		db.Close()
		return nil, "", fmt.Errorf("rig: migrate %s: %w", name, err)
	}
	if l.Or() == handeling.Kern {
		if _, err := db.ExecContext(ctx, KernCompat); err != nil {
			db.Close()
			return nil, "", fmt.Errorf("rig: compatibility views in %s: %w", name, err)
		}
	}
	db.Close()
	return openIn(dbURL, l)
}

// CloneDB makes the database name afresh as a copy of template, a database CreateDBIn made for
// layout l that no session is connected to (CREATE DATABASE ... TEMPLATE refuses one that has),
// and returns a handle and the database's URL as CreateDBIn does. PostgreSQL waits a few
// seconds for the sessions of a handle just closed on template to end.
func CloneDB(ctx context.Context, serverURL, name, template string, l handeling.Layout) (*sqlx.DB, string, error) {
	if !dbName.MatchString(template) {
		return nil, "", fmt.Errorf("rig: template name %q: expected a lower-case SQL identifier", template)
	}
	dbURL, err := freshDB(ctx, serverURL, name, ` template `+template)
	if err != nil {
		return nil, "", err
	}
	return openIn(dbURL, l)
}

// openIn opens dbURL for a test of layout l. On the kern layout the test's sessions find the
// service's tables (brp_levering) and the views in the contract's form (public); the service's
// own sessions put brp_levering alone in their search_path (dbsession), after this one.
//
// The sessions run without JIT, as the service's own do (dbsession.DSN): the tests run
// publishers and consumers in-process on this pool, and there a statement whose estimate
// passed jit_above_cost was compiled on every call (the consumer's check of a handeling of 500
// persons: 0.83 s of compiling in a call of 0.9 s), which the service never does.
func openIn(dbURL string, l handeling.Layout) (*sqlx.DB, string, error) {
	u, err := url.Parse(dbURL)
	if err != nil {
		return nil, "", fmt.Errorf("rig: database URL: %w", err)
	}
	q := u.Query()
	q.Set("jit", "off")
	if l.Or() == handeling.Kern {
		q.Set("search_path", handeling.ServiceSchema+",public")
	}
	u.RawQuery = q.Encode()
	dbURL = u.String()
	db, err := sqlx.Open("postgres", dbURL)
	if err != nil {
		return nil, "", fmt.Errorf("rig: %w", err)
	}
	return db, dbURL, nil
}

// DatabasesLike lists the databases on the server of serverURL whose names match the LIKE
// pattern.
func DatabasesLike(ctx context.Context, serverURL, pattern string) ([]string, error) {
	admin, err := openServer(ctx, serverURL)
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	var names []string
	if err := admin.SelectContext(ctx, &names, `select datname from pg_database where datname like $1 order by datname`, pattern); err != nil {
		return nil, fmt.Errorf("rig: databases like %q: %w", pattern, err)
	}
	return names, nil
}

// CreateBareDB is CreateDBWith without the service's schema: the database holds what ddl
// creates and nothing else, for a `publicatie migrate` of another build (a benchmark comparing
// releases) or a measurement of bijhouding without the service.
func CreateBareDB(ctx context.Context, serverURL, name, ddl string) (*sqlx.DB, string, error) {
	dbURL, err := freshDB(ctx, serverURL, name, "")
	if err != nil {
		return nil, "", err
	}
	db, err := sqlx.Open("postgres", dbURL)
	if err != nil {
		return nil, "", fmt.Errorf("rig: %w", err)
	}
	if ddl != "" {
		if _, err := db.ExecContext(ctx, ddl); err != nil {
			db.Close()
			return nil, "", fmt.Errorf("rig: bijhouding's tables in %s: %w", name, err)
		}
	}
	return db, dbURL, nil
}

// freshDB makes the database name afresh on the server of serverURL (dropping one of that
// name first), created with the clause with (empty, or " template x"), and returns its URL.
func freshDB(ctx context.Context, serverURL, name, with string) (string, error) {
	if !dbName.MatchString(name) {
		return "", fmt.Errorf("rig: database name %q: expected a lower-case SQL identifier", name)
	}
	if err := onServer(ctx, serverURL, `drop database if exists `+name+` with (force)`, `create database `+name+with); err != nil {
		return "", err
	}
	u, err := url.Parse(serverURL)
	if err != nil {
		return "", fmt.Errorf("rig: database URL: %w", err)
	}
	u.Path = "/" + name
	return u.String(), nil
}

// DropDB drops the database name on the server of serverURL, ending its sessions.
func DropDB(ctx context.Context, serverURL, name string) error {
	if !dbName.MatchString(name) {
		return fmt.Errorf("rig: database name %q: expected a lower-case SQL identifier", name)
	}
	return onServer(ctx, serverURL, `drop database if exists `+name+` with (force)`)
}

// onServer runs statements on the server of serverURL, one by one.
func onServer(ctx context.Context, serverURL string, stmts ...string) error {
	admin, err := openServer(ctx, serverURL)
	if err != nil {
		return err
	}
	defer admin.Close()
	for _, s := range stmts {
		if _, err := admin.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("rig: %s: %w", s, err)
		}
	}
	return nil
}

// openServer opens serverURL and checks that the server answers.
func openServer(ctx context.Context, serverURL string) (*sqlx.DB, error) {
	admin, err := sqlx.Open("postgres", serverURL)
	if err != nil {
		return nil, fmt.Errorf("rig: %w", err)
	}
	if err := admin.PingContext(ctx); err != nil {
		admin.Close()
		return nil, fmt.Errorf("rig: PostgreSQL at %s is not reachable (start it with scripts/services.sh up): %w", Redact(serverURL), err)
	}
	return admin, nil
}

// Redact is a database URL without its password, for messages.
func Redact(u string) string { return dbsession.Redact(u) }

// The contract's tables as bijhouding may have created them (docs/contract.md section 1 allows
// each), for CreateDBWith. The service must work on every one of them.
const (
	// BijhoudingText is the contract's tables as migration 0001 creates them: statuslev text
	// with a check.
	BijhoudingText = `create table admhnd (id bigint primary key, soort text not null, tsreg timestamptz not null,
			tslev timestamptz null, statuslev text null check (statuslev in ('in_levering', 'geleverd', 'fout')));
		create table admhnd_persoon (admhnd_id bigint not null references admhnd (id), persoon_id bigint not null,
			primary key (admhnd_id, persoon_id));`
	// BijhoudingEnum has statuslev as a PostgreSQL enum type.
	BijhoudingEnum = `create type admhnd_statuslev as enum ('in_levering', 'geleverd', 'fout');
		create table admhnd (id bigint primary key, soort text not null, tsreg timestamptz not null,
			tslev timestamptz null, statuslev admhnd_statuslev null);
		create table admhnd_persoon (admhnd_id bigint not null references admhnd (id), persoon_id bigint not null,
			primary key (admhnd_id, persoon_id));`
	// BijhoudingUnchecked has statuslev as text without a check constraint.
	BijhoudingUnchecked = `create table admhnd (id bigint primary key, soort text not null, tsreg timestamptz not null,
			tslev timestamptz null, statuslev text null);
		create table admhnd_persoon (admhnd_id bigint not null references admhnd (id), persoon_id bigint not null,
			primary key (admhnd_id, persoon_id));`
	// BijhoudingWithoutKey has admhnd_persoon without a primary key (or any index): a person
	// may be recorded twice for one handeling.
	BijhoudingWithoutKey = `create table admhnd (id bigint primary key, soort text not null, tsreg timestamptz not null,
			tslev timestamptz null, statuslev text null);
		create table admhnd_persoon (admhnd_id bigint not null, persoon_id bigint not null);`
)
