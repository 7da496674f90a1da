package schema_test

import (
	"context"
	"testing"

	"github.com/brp/levering/internal/brptest"
	"github.com/brp/levering/schema"
)

func TestMigrateIsIdempotent(t *testing.T) {
	t.Parallel()
	db, _ := brptest.DB(t) // already migrated once
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
	db, _ := brptest.DB(t)
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
