package schema_test

import (
	"context"
	"fmt"
	neturl "net/url"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

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

// Bijhouding registers, and an operator may set handelingen back by hand, with roles of their
// own that have rights on admhnd and admhnd_persoon only: the service's triggers on admhnd
// (late and set-back handelingen) must not need more.
func TestBijhoudingNeedsNoRightsOnTheServicesTables(t *testing.T) {
	t.Parallel()
	db, url := brptest.DB(t)
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
	if _, err := bij.Exec(`insert into admhnd (id, soort, tsreg) values
		(2, 'GEBOORTE', now() - interval '1 hour'), (1, 'GEBOORTE', now() - interval '1 hour'), (200, 'GEBOORTE', now() + interval '1 hour')`); err != nil {
		t.Fatalf("bijhouding's insert: %v", err)
	}
	var late []int64
	if err := db.Select(&late, `select admhnd_id from publicatie_herlees`); err != nil || len(late) != 1 || late[0] != 1 {
		t.Fatalf("recorded as registered late: %v (%v), want the oldest, [1]", late, err)
	}
	db.MustExec(`update admhnd set statuslev = 'fout' where id = 200`)
	if _, err := bij.Exec(`update admhnd set statuslev = null where id = 200`); err != nil {
		t.Fatalf("set back by hand: %v", err)
	}
	late = nil
	if err := db.Select(&late, `select admhnd_id from publicatie_nakomer`); err != nil || len(late) != 1 || late[0] != 200 {
		t.Fatalf("recorded as set back: %v (%v), want [200]", late, err)
	}
}
