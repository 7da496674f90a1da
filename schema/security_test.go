package schema_test

import (
	"context"
	"database/sql"
	"fmt"
	neturl "net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/brp/levering/handeling"
	"github.com/brp/levering/internal/brptest"
	"github.com/brp/levering/internal/dbsession"
	"github.com/brp/levering/publicatie"
	"github.com/brp/levering/schema"
)

// Issue 47: nothing the service installs lets a caller gain rights, and it runs with the rights
// it ships (schema/grants). Each test runs on both layouts, whatever BRP_TEST_LAYOUT says.

var securityForms = []brptest.Form{brptest.StatusText, brptest.KernForm}

// serviceSchema is the schema of the service's objects in layout l's test database.
func serviceSchema(l handeling.Layout) string {
	if l.Or() == handeling.Kern {
		return "brp_levering"
	}
	return "public"
}

// withRoles runs f for each layout, on a database of its own with the roles and rights of the
// layout's grants file.
func withRoles(t *testing.T, f func(t *testing.T, l handeling.Layout, db *sqlx.DB, roles brptest.Roles)) {
	for _, form := range securityForms {
		t.Run(form.Name, func(t *testing.T) {
			t.Parallel()
			db, url := brptest.DBWith(t, form)
			f(t, form.Layout.Or(), db, brptest.GrantRoles(t, db, url, form.Layout.Or()))
		})
	}
}

// Every function the service creates that runs with its owner's rights has a search_path
// that names pg_catalog first, the service's schema, and pg_temp last, and nobody but its
// owner and the roles the grants file names may execute it; every trigger on the
// handelingen tables calls one of those.
func TestDefinerFunctionsAreSafe(t *testing.T) {
	t.Parallel()
	for _, f := range securityForms {
		t.Run(f.Name, func(t *testing.T) {
			t.Parallel()
			db, _ := brptest.DBWith(t, f)
			var rows []struct {
				Name   string         `db:"name"`
				Config pq.StringArray `db:"config"`
				Public bool           `db:"public"`
			}
			if err := db.Select(&rows, `
				select p.oid::regprocedure::text as name, coalesce(p.proconfig, '{}') as config,
				       has_function_privilege('public', p.oid, 'execute') as public
				from pg_proc p
				where p.pronamespace = $1::regnamespace and p.prosecdef order by 1`, serviceSchema(f.Layout)); err != nil {
				t.Fatal(err)
			}
			if len(rows) < 6 {
				t.Fatalf("only %d security definer functions found: %v", len(rows), rows)
			}
			want := "search_path=pg_catalog, " + serviceSchema(f.Layout) + ", pg_temp"
			for _, r := range rows {
				if !slices.Contains(r.Config, want) {
					t.Errorf("%s: settings %v, want %q", r.Name, r.Config, want)
				}
				if r.Public {
					t.Errorf("%s: PUBLIC may execute it", r.Name)
				}
			}
			// Every trigger of the service runs a function of the service's schema; the
			// definer ones are all checked above.
			var foreign []string
			if err := db.Select(&foreign, `
				select t.tgname || ' -> ' || p.oid::regprocedure::text
				from pg_trigger t join pg_proc p on p.oid = t.tgfoid
				where not t.tgisinternal and (t.tgname like 'brp\_levering\_%' or t.tgname like 'admhnd\_%')
				  and p.pronamespace <> $1::regnamespace`, serviceSchema(f.Layout)); err != nil {
				t.Fatal(err)
			}
			if len(foreign) > 0 && f.Layout.Or() == handeling.Contract {
				t.Errorf("triggers calling functions outside the service's schema: %v", foreign)
			}
		})
	}
}

// shadow gives the session of conn, as its role, a temporary object in the place of every
// table and view of the service's schema (and of bijhouding's tables in the contract layout):
// an empty view of the same columns that logs every read, with an INSTEAD OF trigger that logs
// every write, as current_user, in pg_temp.shadow_log. A function that resolved any of the
// service's names in the caller's temporary schema would run them with its own rights. The
// views need no right on the real tables: columns holds each one's select list (shadowColumns).
func shadow(t *testing.T, conn *sqlx.DB, columns map[string]string) {
	t.Helper()
	conn.MustExec(`create temp table shadow_log (who text not null, what text not null);
		create function pg_temp.shadow_read(what text) returns boolean language plpgsql as $$
		begin insert into pg_temp.shadow_log values (current_user, 'read ' || what); return true; end $$;
		create function pg_temp.shadow_write() returns trigger language plpgsql as $$
		begin insert into pg_temp.shadow_log values (current_user, tg_op || ' ' || tg_table_name); return null; end $$`)
	for tb, cols := range columns {
		conn.MustExec(fmt.Sprintf(`create temp view %[1]s as select %[2]s from (select pg_temp.shadow_read('%[1]s')) s (ok) where not s.ok;
			create trigger shadow instead of insert or update or delete on pg_temp.%[1]s
			for each row execute function pg_temp.shadow_write()`, tb, cols))
	}
	var n int
	if err := conn.Get(&n, `select count(*) from pg_temp.shadow_log`); err != nil || n != 0 {
		t.Fatalf("shadow log: %d, %v", n, err)
	}
}

// shadowColumns is, for every table and view of schema s, a select list of typed NULLs named
// like its columns.
func shadowColumns(t *testing.T, db *sqlx.DB, s string) map[string]string {
	t.Helper()
	var rows []struct {
		Name string `db:"name"`
		Cols string `db:"cols"`
	}
	if err := db.Select(&rows, `
		select c.relname::text as name,
		       string_agg(format('null::%s as %I', format_type(a.atttypid, a.atttypmod), a.attname), ', ' order by a.attnum) as cols
		from pg_class c join pg_attribute a on a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped
		where c.relnamespace = $1::regnamespace and c.relkind in ('r', 'v', 'p')
		group by c.relname`, s); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, r := range rows {
		out[r.Name] = r.Cols
	}
	if len(out) < 10 {
		t.Fatalf("schema %s: only %d tables to shadow", s, len(out))
	}
	return out
}

// shadowLog returns what the shadows logged: "who: what".
func shadowLog(t *testing.T, conn *sqlx.DB) []string {
	t.Helper()
	var out []string
	if err := conn.Select(&out, `select who || ': ' || what from pg_temp.shadow_log order by 1`); err != nil {
		t.Fatal(err)
	}
	return out
}

// sessionAs opens one session (temporary objects are a session's) as the role of url.
func sessionAs(t *testing.T, url string) *sqlx.DB {
	t.Helper()
	conn, err := sqlx.Connect("postgres", url)
	if err != nil {
		t.Fatal(err)
	}
	conn.SetMaxOpenConns(1)
	conn.SetMaxIdleConns(1)
	conn.SetConnMaxLifetime(0)
	t.Cleanup(func() { conn.Close() })
	return conn
}

// The statements of the shadowing test, per layout: what bijhouding does that fires the
// service's functions, and what the runtime role does. They name every table with its schema:
// a role's own unqualified statements meet its own shadows, which gives it nothing.
type securityActs struct {
	register     string // $1 id, $2 person, $3 tsreg; handeling and person in one statement
	addPerson    string // $1 id, $2 person, another transaction
	registerFout string // $1 id: a handeling registered in fout (a repair by hand)
	setFout      string // $1 id
	retry        string // $1 id
	release      string // $1 id
}

var acts = map[handeling.Layout]securityActs{
	handeling.Contract: {
		register: `with h as (insert into public.admhnd (id, soort, tsreg) values ($1, 'GEBOORTE', $3))
			insert into public.admhnd_persoon (admhnd_id, persoon_id) values ($1, $2)`,
		addPerson:    `insert into public.admhnd_persoon (admhnd_id, persoon_id) values ($1, $2)`,
		registerFout: `insert into public.admhnd (id, soort, tsreg, statuslev) values ($1, 'GEBOORTE', now(), 'fout')`,
		setFout:      `update public.admhnd set statuslev = 'fout', foutreden = 'test' where id = $1`,
		retry:        `update public.admhnd set statuslev = null, foutreden = null where id = $1`,
		release:      `update public.admhnd set vrijgegeven = now() where id = $1`,
	},
	handeling.Kern: {
		register: `with h as (insert into kern.admhnd (id, srt, partij, tsreg, statuslev) values ($1, 1, 1, $3, 1)),
			p as (insert into kern.pers (id) values ($2) on conflict do nothing),
			a as (insert into kern.actie (id, admhnd, tsreg) values ($1, $1, $3))
			insert into kern.his_persafgeleidadministrati (id, pers, tsreg, actieinh, admhnd, tslaatstewijz, sorteervolgorde)
			values ($1, $2, $3, $1, $1, $3, 1)`,
		addPerson: `with p as (insert into kern.pers (id) values ($2) on conflict do nothing)
			insert into kern.his_persafgeleidadministrati (id, pers, tsreg, actieinh, admhnd, tslaatstewijz, sorteervolgorde)
			values ($1 * 1000 + $2, $2, now(), $1, $1, now(), 1)`,
		registerFout: `insert into kern.admhnd (id, srt, partij, tsreg, statuslev) values ($1, 1, 1, now(), 5)`,
		setFout:      `update kern.admhnd set statuslev = 5 where id = $1`,
		retry:        `update kern.admhnd set statuslev = 1 where id = $1`,
		release: `insert into brp_levering.admhnd_levering (admhnd_id, vrijgegeven) values ($1, now())
			on conflict (admhnd_id) do update set vrijgegeven = excluded.vrijgegeven`,
	},
}

// As bijhouding's role and as the runtime role, each with the shipped grants: shadow every
// table and view of the service's with a temporary one, do what fires each of the service's
// functions, and find that no shadow ever ran, let alone with rights other than the caller's.
func TestShadowingRunsNothingWithTheOwnersRights(t *testing.T) {
	t.Parallel()
	withRoles(t, func(t *testing.T, l handeling.Layout, db *sqlx.DB, roles brptest.Roles) {
		a := acts[l]
		tables := shadowColumns(t, db, serviceSchema(l))
		if l == handeling.Kern {
			// Bijhouding's own rights on its kern tables (not the service's affair): the
			// shipped file gives it insert on the two tables carrying the service's triggers.
			db.MustExec(`grant insert on kern.pers, kern.actie to ` + roles.Bijhouding)
		}
		// The leader asks for lead samples: an ordinary registration then writes one.
		db.MustExec(`update publicatie_state set lead_sample_rate = 1, lead_sample_until = now() + interval '1 hour'`)

		bij := sessionAs(t, roles.BijhoudingURL)
		shadow(t, bij, tables)
		old := time.Now().Add(-time.Hour)
		for _, st := range []struct {
			sql  string
			args []any
		}{
			{a.register, []any{1, 10, old}},        // registered late: publicatie_geregistreerd
			{a.register, []any{2, 20, time.Now()}}, // ordinary: a lead sample
			{a.addPerson, []any{1, 11}},            // persons added later: publicatie_personen_toegevoegd
			{a.registerFout, []any{3}},             // in fout at once
		} {
			if _, err := bij.Exec(st.sql, st.args...); err != nil {
				t.Fatalf("bijhouding: %s: %v", st.sql, err)
			}
		}
		// Committed more than half a second after it began: publicatie_vastgelegd.
		tx := bij.MustBegin()
		tx.MustExec(a.register, 4, 40, time.Now())
		tx.MustExec(`select pg_sleep(0.6)`)
		if err := tx.Commit(); err != nil {
			t.Fatalf("bijhouding's slow transaction: %v", err)
		}

		svc := sessionAs(t, roles.ServiceURL)
		shadow(t, svc, tables)
		for _, st := range []string{a.setFout, a.release, a.retry} { // publicatie_fout_changed, publicatie_nakomer_teruggezet, publicatie_vrijgave_changed
			if _, err := svc.Exec(st, 2); err != nil {
				t.Fatalf("service: %s: %v", st, err)
			}
		}
		var sessions int
		if err := svc.Get(&sessions, `select count(*) from `+serviceSchema(l)+`.publicatie_horizon`); err != nil { // publicatie_sessions
			t.Fatalf("service: the horizon: %v", err)
		}

		for who, conn := range map[string]*sqlx.DB{"bijhouding": bij, "service": svc} {
			if log := shadowLog(t, conn); len(log) > 0 {
				t.Errorf("%s's shadows ran: %v", who, log)
			}
		}
		// The functions did their work, in the real tables.
		var nakomer, changes, samples int
		if err := db.QueryRow(`select (select count(*) from publicatie_nakomer), (select count(*) from publicatie_fout_changes),
			(select count(*) from publicatie_lead_samples)`).Scan(&nakomer, &changes, &samples); err != nil {
			t.Fatal(err)
		}
		if nakomer < 3 || changes < 2 || samples < 1 {
			t.Errorf("the functions recorded %d nakomers (want 1, 2 and 4), %d fout changes (want 2 and 3), %d lead samples", nakomer, changes, samples)
		}
		// And the role's own statements do meet its shadows: the shadows work.
		if _, err := svc.Exec(`select count(*) from publicatie_nakomer`); err != nil {
			t.Fatal(err)
		}
		if log := shadowLog(t, svc); !slices.Equal(log, []string{roles.Service + ": read publicatie_nakomer"}) {
			t.Errorf("the service's own read of its shadow logged %v", log)
		}
	})
}

// The runtime role with the shipped grants: no superuser, no pg_read_all_stats; it cannot
// change or delete the operators' audit trail or the lease, create objects, or see another
// database's sessions or any session's query text.
func TestRuntimeRoleHasOnlyWhatItNeeds(t *testing.T) {
	t.Parallel()
	withRoles(t, func(t *testing.T, l handeling.Layout, db *sqlx.DB, roles brptest.Roles) {
		if missing, err := schema.MissingRights(context.Background(), sessionAs(t, roles.ServiceURL).DB, l); err != nil || len(missing) > 0 {
			t.Fatalf("with the shipped grants the runtime role lacks %v (%v)", missing, err)
		}
		if l == handeling.Kern {
			db.MustExec(`insert into kern.admhnd (id, srt, partij, tsreg, statuslev) values (1, 1, 1, now(), 5)`)
		} else {
			db.MustExec(`insert into admhnd (id, soort, tsreg, statuslev) values (1, 'GEBOORTE', now(), 'fout')`)
		}
		db.MustExec(`insert into admhnd_beheer (admhnd_id, actie, door) values (1, 'retry', 'beheerder');
			insert into publicatie_lease (cluster, holder) values ('c', 'x') on conflict do nothing`)
		svc := sessionAs(t, roles.ServiceURL)
		var super, stats bool
		if err := svc.QueryRow(`select rolsuper, pg_has_role(current_user, 'pg_read_all_stats', 'member') from pg_roles where rolname = current_user`).Scan(&super, &stats); err != nil {
			t.Fatal(err)
		}
		if super || stats {
			t.Errorf("runtime role: superuser %v, pg_read_all_stats %v", super, stats)
		}
		s := serviceSchema(l)
		for _, st := range []string{
			`delete from ` + s + `.admhnd_beheer`,
			`update ` + s + `.admhnd_beheer set door = 'someone else'`,
			`truncate ` + s + `.admhnd_beheer`,
			`delete from ` + s + `.publicatie_lease`,
			`create table ` + s + `.brp_levering_extra (id int)`,
			`create function ` + s + `.brp_levering_extra() returns int language sql as 'select 1'`,
			`create schema brp_levering_extra`,
		} {
			_, err := svc.Exec(st)
			if !dbsession.IsPermissionDenied(err) {
				t.Errorf("runtime role: %s: %v, want permission denied", st, err)
			}
		}
		// Inserting and reading the audit trail is what the operator commands do.
		if _, err := svc.Exec(`insert into ` + s + `.admhnd_beheer (admhnd_id, actie, door) values (1, 'release', 'beheerder')`); err != nil {
			t.Errorf("runtime role cannot record an operator's act: %v", err)
		}

		// A session of another database, in a transaction: the runtime role sees neither
		// its query nor its transaction, in pg_stat_activity or through the horizon.
		other, err := sql.Open("postgres", brptest.DatabaseURL())
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		otx, err := other.Begin()
		if err != nil {
			t.Fatal(err)
		}
		defer otx.Rollback() //nolint:errcheck
		var pid int
		if err := otx.QueryRow(`select pg_backend_pid() /* secret query text */`).Scan(&pid); err != nil {
			t.Fatal(err)
		}
		var query sql.NullString
		var start sql.NullTime
		if err := svc.QueryRow(`select query, xact_start from pg_stat_activity where pid = $1`, pid).Scan(&query, &start); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(query.String, "secret") || start.Valid {
			t.Errorf("runtime role reads another database's session: query %q, xact_start %v", query.String, start)
		}
		var listed bool
		if err := svc.Get(&listed, `select exists (select from publicatie_horizon where pid = $1)`, pid); err != nil || listed {
			t.Errorf("the horizon lists another database's session: %v (%v)", listed, err)
		}
	})
}

// withApp is url with the session's application_name set to app.
func withApp(t *testing.T, url, app string) string {
	t.Helper()
	u, err := neturl.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("application_name", app)
	u.RawQuery = q.Encode()
	return u.String()
}

// A bijhouding transaction that names itself as one of the service's sessions is still waited
// for: the service's own sessions are those whose role may execute publicatie_sessions(). The
// runtime role's own sessions are left out.
func TestHorizonTellsTheServiceBySomethingAClientCannotClaim(t *testing.T) {
	t.Parallel()
	withRoles(t, func(t *testing.T, l handeling.Layout, db *sqlx.DB, roles brptest.Roles) {
		if l == handeling.Kern {
			db.MustExec(`grant insert on kern.pers, kern.actie to ` + roles.Bijhouding)
		}
		open := func(u, app string) (*sqlx.DB, *sqlx.Tx, int) {
			conn := sessionAs(t, withApp(t, u, app))
			tx := conn.MustBegin()
			var pid int
			if err := tx.Get(&pid, `select pg_backend_pid()`); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { tx.Rollback() }) //nolint:errcheck
			return conn, tx, pid
		}
		_, bij, bijPID := open(roles.BijhoudingURL, "publicatie[1]@pretender")
		bij.MustExec(acts[l].register, 1, 10, time.Now())
		_, own, ownPID := open(roles.ServiceURL, "mutatielevering[2]@host")
		own.MustExec(`select 1`)

		svc := sessionAs(t, roles.ServiceURL)
		// Past publicatie.LateWriterGrace: a younger transaction holds the horizon whatever it
		// does, and the view does not look up whether it registers (registers is null). MAXWAIT
		// a minute, so that a busy machine's delay cannot end the hold before the look.
		db.MustExec(`update ` + serviceSchema(l) + `.publicatie_state set max_wait = interval '1 minute'`)
		time.Sleep(publicatie.LateWriterGrace + 100*time.Millisecond)
		var rows []struct {
			PID       int          `db:"pid"`
			Registers sql.NullBool `db:"registers"`
			Holds     bool         `db:"holds"`
		}
		if err := svc.Select(&rows, `select pid, registers, holds from publicatie_horizon`); err != nil {
			t.Fatal(err)
		}
		var sawBij bool
		for _, r := range rows {
			switch r.PID {
			case bijPID:
				sawBij = r.Registers.Valid && r.Registers.Bool && r.Holds
			case ownPID:
				t.Errorf("the horizon waits for the service's own session: %+v", r)
			}
		}
		if !sawBij {
			t.Errorf("the horizon does not hold for a registering bijhouding session named publicatie[...]: %+v (pid %d)", rows, bijPID)
		}
	})
}
