package rig

import (
	"context"
	"fmt"
	"net/url"
	"regexp"

	"github.com/jmoiron/sqlx"
	_ "github.com/lib/pq" // the PostgreSQL driver

	"github.com/brp/levering/schema"
)

var dbName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// CreateDB makes the database name afresh on the server of serverURL (dropping one of that
// name first), applies the schema and returns a handle and the database's URL.
func CreateDB(ctx context.Context, serverURL, name string) (*sqlx.DB, string, error) {
	if !dbName.MatchString(name) {
		return nil, "", fmt.Errorf("rig: database name %q: expected a lower-case SQL identifier", name)
	}
	if err := onServer(ctx, serverURL, `drop database if exists `+name+` with (force)`, `create database `+name); err != nil {
		return nil, "", err
	}
	u, err := url.Parse(serverURL)
	if err != nil {
		return nil, "", fmt.Errorf("rig: database URL: %w", err)
	}
	u.Path = "/" + name
	dbURL := u.String()
	db, err := sqlx.Open("postgres", dbURL)
	if err != nil {
		return nil, "", fmt.Errorf("rig: %w", err)
	}
	if _, err := schema.Migrate(ctx, db.DB); err != nil {
		db.Close()
		return nil, "", fmt.Errorf("rig: migrate %s: %w", name, err)
	}
	return db, dbURL, nil
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
	admin, err := sqlx.Open("postgres", serverURL)
	if err != nil {
		return fmt.Errorf("rig: %w", err)
	}
	defer admin.Close()
	if err := admin.PingContext(ctx); err != nil {
		return fmt.Errorf("rig: PostgreSQL at %s is not reachable (start it with scripts/services.sh up): %w", Redact(serverURL), err)
	}
	for _, s := range stmts {
		if _, err := admin.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("rig: %s: %w", s, err)
		}
	}
	return nil
}

// Redact is a database URL without its password, for messages.
func Redact(u string) string {
	if p, err := url.Parse(u); err == nil {
		return p.Redacted()
	}
	return "(database)"
}
