package rig

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
)

// kernServer is the PostgreSQL server of BRP_DATABASE_URL; it skips t in the -short lane or
// without one (internal/brptest, which would find it, imports this package).
func kernServer(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("needs PostgreSQL (not in the -short lane)")
	}
	u := os.Getenv("BRP_DATABASE_URL")
	if u == "" {
		t.Skip(`needs PostgreSQL: BRP_DATABASE_URL is not set (eval "$(scripts/services.sh env)")`)
	}
	return u
}

// kernLevering is brp_levering.admhnd_levering as the service's kern migration creates it.
const kernLevering = `create schema brp_levering;
	create table brp_levering.admhnd_levering (admhnd_id bigint primary key, tspub timestamptz null,
		foutreden text null, vrijgegeven timestamptz null);`

// kernRow is a row of kern.admhnd.
type kernRow struct {
	Srt       int        `db:"srt"`
	Partij    int        `db:"partij"`
	Statuslev int        `db:"statuslev"`
	Tsreg     time.Time  `db:"tsreg"`
	Tslev     *time.Time `db:"tslev"`
	Xmin      string     `db:"xmin"`
}

func readKern(t *testing.T, db *sqlx.DB, id int64) kernRow {
	t.Helper()
	var k kernRow
	if err := db.Get(&k, `select srt, partij, statuslev, tsreg, tslev, xmin::text as xmin from kern.admhnd where id = $1`, id); err != nil {
		t.Fatalf("kern.admhnd %d: %v", id, err)
	}
	return k
}

// viewRow is a row of the compatibility view public.admhnd, the contract form.
type viewRow struct {
	ID          int64      `db:"id"`
	Soort       string     `db:"soort"`
	Tsreg       time.Time  `db:"tsreg"`
	Tslev       *time.Time `db:"tslev"`
	Statuslev   *string    `db:"statuslev"`
	Tspub       *time.Time `db:"tspub"`
	Foutreden   *string    `db:"foutreden"`
	Vrijgegeven *time.Time `db:"vrijgegeven"`
}

func (r viewRow) String() string {
	ts := func(p *time.Time) string {
		if p == nil {
			return "NULL"
		}
		return p.UTC().Format(time.RFC3339Nano)
	}
	str := func(p *string) string {
		if p == nil {
			return "NULL"
		}
		return fmt.Sprintf("%q", *p)
	}
	return fmt.Sprintf("{id %d soort %q tsreg %s tslev %s statuslev %s tspub %s foutreden %s vrijgegeven %s}",
		r.ID, r.Soort, ts(&r.Tsreg), ts(r.Tslev), str(r.Statuslev), ts(r.Tspub), str(r.Foutreden), ts(r.Vrijgegeven))
}

func readView(t *testing.T, db *sqlx.DB, id int64) viewRow {
	t.Helper()
	var r viewRow
	if err := db.Get(&r, `select * from admhnd where id = $1`, id); err != nil {
		t.Fatalf("admhnd %d: %v", id, err)
	}
	return r
}

// hisRow is a row of kern.his_persafgeleidadministrati with its actie.
type hisRow struct {
	Admhnd          int64      `db:"admhnd"`
	Pers            int64      `db:"pers"`
	Tsreg           time.Time  `db:"tsreg"`
	Tsverval        *time.Time `db:"tsverval"`
	Actieinh        int64      `db:"actieinh"`
	Actieverval     *int64     `db:"actieverval"`
	Tslaatstewijz   time.Time  `db:"tslaatstewijz"`
	Sorteervolgorde int        `db:"sorteervolgorde"`
	ActieAdmhnd     int64      `db:"actie_admhnd"`
	ActieTsreg      time.Time  `db:"actie_tsreg"`
}

func readHis(t *testing.T, db *sqlx.DB) map[[2]int64]hisRow {
	t.Helper()
	var rows []hisRow
	if err := db.Select(&rows, `select h.admhnd, h.pers, h.tsreg, h.tsverval, h.actieinh, h.actieverval,
			h.tslaatstewijz, h.sorteervolgorde, a.admhnd as actie_admhnd, a.tsreg as actie_tsreg
		from kern.his_persafgeleidadministrati h join kern.actie a on a.id = h.actieinh`); err != nil {
		t.Fatal(err)
	}
	out := map[[2]int64]hisRow{}
	for _, r := range rows {
		k := [2]int64{r.Admhnd, r.Pers}
		if _, dup := out[k]; dup {
			t.Errorf("two his rows for handeling %d, person %d", r.Admhnd, r.Pers)
		}
		out[k] = r
	}
	return out
}

func pqCode(err error) string {
	var pe *pq.Error
	if errors.As(err, &pe) {
		return string(pe.Code)
	}
	return ""
}

func ptr[T any](v T) *T { return &v }

// TestKernCompat builds the kern tables (BijhoudingKern) and the compatibility views
// (KernCompat), then writes through the views as the contract layout's tests do and checks
// the kern rows they make and the contract form they read back.
func TestKernCompat(t *testing.T) {
	server := kernServer(t)
	ctx := context.Background()
	const name = "t_rig_kern_compat"
	db, _, err := CreateBareDB(ctx, server, name, BijhoudingKern)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		db.Close()
		if err := DropDB(context.Background(), server, name); err != nil {
			t.Error(err)
		}
	})
	db.MustExec(kernLevering)
	db.MustExec(KernCompat)
	db.MustExec(`select setval('kern.seq_admhnd', 100)`) // bijhouding's ids: beyond the tests' own

	t0 := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }

	if !t.Run("indexes", func(t *testing.T) {
		var got []string
		if err := db.Select(&got, `select indexname from pg_indexes where schemaname = 'kern'
			and tablename in ('admhnd', 'his_persafgeleidadministrati') order by 1`); err != nil {
			t.Fatal(err)
		}
		want := []string{"admhnd_pkey", "his_persafgeleidadministrati_pkey", "ix_admhnd_statuslev_inlevering",
			"ix_admhnd_statuslev_televeren", "ix_admhnd_tslev", "ix_admhnd_tsreg",
			"ix_his_persafgeleidadministrati_admhnd", "uc_his_persafgeleidadministrati_pers_tsreg"}
		if !slices.Equal(got, want) {
			t.Errorf("kern indexes: got %v, want %v", got, want)
		}
		var noDefault bool
		if err := db.Get(&noDefault, `select column_default is null from information_schema.columns
			where table_schema = 'kern' and table_name = 'admhnd' and column_name = 'statuslev'`); err != nil {
			t.Fatal(err)
		}
		if !noDefault {
			t.Error("kern.admhnd.statuslev has a default; the facts say none")
		}
	}) {
		return
	}

	var newSrt int // the soort added for the name VERHUIZING
	if !t.Run("insert handelingen", func(t *testing.T) {
		for _, c := range []struct {
			name       string
			id         sql.NullInt64
			soort      string
			tsreg      time.Time
			status     *string
			foutreden  *string
			wantID     int64
			wantSrt    int // -1: a new soort, 1000 or more
			wantStatus int
		}{
			{"ordinary soort", sql.NullInt64{Int64: 1, Valid: true}, "Verhuizing intergemeentelijk", at(0), nil, nil, 1, 1, 1},
			{"new soort name", sql.NullInt64{Int64: 2, Valid: true}, "VERHUIZING", at(1), nil, nil, 2, -1, 1},
			{"initiële vulling", sql.NullInt64{Int64: 3, Valid: true}, "GBA_INITIELE_VULLING", at(2), nil, nil, 3, 37, 2},
			{"fout with a reason", sql.NullInt64{Int64: 4, Valid: true}, "Geboorte in Nederland", at(3), ptr("fout"), ptr("geen personen"), 4, 2, 5},
			{"id from the sequence", sql.NullInt64{}, "VERHUIZING", at(4), nil, nil, 101, -1, 1},
		} {
			t.Run(c.name, func(t *testing.T) {
				var id int64
				if err := db.Get(&id, `insert into admhnd (id, soort, tsreg, statuslev, foutreden)
					values ($1, $2, $3, $4, $5) returning id`, c.id, c.soort, c.tsreg, c.status, c.foutreden); err != nil {
					t.Fatal(err)
				}
				if id != c.wantID {
					t.Errorf("returning id: got %d, want %d", id, c.wantID)
				}
				k := readKern(t, db, id)
				if c.wantSrt == -1 {
					if k.Srt < 1000 {
						t.Errorf("srt of a new soort: got %d, want 1000 or more", k.Srt)
					}
					if newSrt == 0 {
						newSrt = k.Srt
					} else if k.Srt != newSrt {
						t.Errorf("srt of VERHUIZING again: got %d, want %d (the soort added before)", k.Srt, newSrt)
					}
				} else if k.Srt != c.wantSrt {
					t.Errorf("srt: got %d, want %d", k.Srt, c.wantSrt)
				}
				if k.Statuslev != c.wantStatus || k.Partij != 1 || !k.Tsreg.Equal(c.tsreg) || k.Tslev != nil {
					t.Errorf("kern.admhnd: got %+v, want statuslev %d, partij 1, tsreg %v, no tslev", k, c.wantStatus, c.tsreg)
				}
				var reden []string
				if err := db.Select(&reden, `select coalesce(foutreden, 'NULL') from brp_levering.admhnd_levering where admhnd_id = $1`, id); err != nil {
					t.Fatal(err)
				}
				want := []string{} // no row for a handeling without tspub, foutreden or vrijgegeven
				if c.foutreden != nil {
					want = []string{*c.foutreden}
				}
				if !slices.Equal(reden, want) {
					t.Errorf("admhnd_levering foutreden: got %v, want %v", reden, want)
				}
			})
		}
		var n int
		if err := db.Get(&n, `select count(*) from kern.srtadmhnd where naam = 'VERHUIZING'`); err != nil || n != 1 {
			t.Errorf("soorten named VERHUIZING: got %d (%v), want 1", n, err)
		}
	}) {
		return
	}

	if !t.Run("insert persons", func(t *testing.T) {
		for _, p := range [][2]int64{{1, 10}, {1, 11}, {2, 10}, {4, 12}} {
			if _, err := db.Exec(`insert into admhnd_persoon (admhnd_id, persoon_id) values ($1, $2)`, p[0], p[1]); err != nil {
				t.Fatalf("admhnd_persoon %v: %v", p, err)
			}
		}
		his := readHis(t, db)
		if len(his) != 4 {
			t.Fatalf("his rows: got %d, want 4: %+v", len(his), his)
		}
		tsreg := map[int64]time.Time{1: at(0), 2: at(1), 4: at(3)}
		for k, h := range his {
			want := tsreg[k[0]]
			if !h.Tsreg.Equal(want) || !h.Tslaatstewijz.Equal(want) || h.Sorteervolgorde != 1 ||
				h.ActieAdmhnd != k[0] || !h.ActieTsreg.Equal(want) {
				t.Errorf("his row %v: got %+v, want tsreg and tslaatstewijz %v, sorteervolgorde 1, an actie of the handeling", k, h, want)
			}
		}
		// Person 10's row of handeling 1 was ended by handeling 2's actie; the others are open.
		ended, by := his[[2]int64{1, 10}], his[[2]int64{2, 10}]
		if ended.Tsverval == nil || !ended.Tsverval.Equal(at(1)) || ended.Actieverval == nil || *ended.Actieverval != by.Actieinh {
			t.Errorf("person 10's his row of handeling 1: got tsverval %v, actieverval %v; want %v and %d (handeling 2's actie)",
				ended.Tsverval, ended.Actieverval, at(1), by.Actieinh)
		}
		for _, k := range [][2]int64{{1, 11}, {2, 10}, {4, 12}} {
			if h := his[k]; h.Tsverval != nil || h.Actieverval != nil {
				t.Errorf("his row %v: got ended (%v, %v), want open", k, h.Tsverval, h.Actieverval)
			}
		}
		var pers []int64
		if err := db.Select(&pers, `select id from kern.pers order by id`); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(pers, []int64{10, 11, 12}) {
			t.Errorf("kern.pers: got %v, want [10 11 12]", pers)
		}
	}) {
		return
	}

	t.Run("read the contract form", func(t *testing.T) {
		var rows []viewRow
		if err := db.Select(&rows, `select * from admhnd order by id`); err != nil {
			t.Fatal(err)
		}
		want := []viewRow{
			{ID: 1, Soort: "Verhuizing intergemeentelijk", Tsreg: at(0)},
			{ID: 2, Soort: "VERHUIZING", Tsreg: at(1)},
			{ID: 3, Soort: "GBA_INITIELE_VULLING", Tsreg: at(2)},
			{ID: 4, Soort: "Geboorte in Nederland", Tsreg: at(3), Statuslev: ptr("fout"), Foutreden: ptr("geen personen")},
			{ID: 101, Soort: "VERHUIZING", Tsreg: at(4)},
		}
		if fmt.Sprint(rows) != fmt.Sprint(want) {
			t.Errorf("admhnd:\n got %v\nwant %v", rows, want)
		}
		var pairs []struct {
			A int64 `db:"admhnd_id"`
			P int64 `db:"persoon_id"`
		}
		if err := db.Select(&pairs, `select * from admhnd_persoon order by 1, 2`); err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(pairs); got != "[{1 10} {1 11} {2 10} {4 12}]" {
			t.Errorf("admhnd_persoon: got %s, want [{1 10} {1 11} {2 10} {4 12}]", got)
		}
	})

	t1, t2, t3 := at(10), at(11), at(12)
	if !t.Run("update", func(t *testing.T) {
		for _, c := range []struct {
			name      string
			query     string
			id        int64
			arg       any
			wantSrt   int
			wantCode  int
			wantWrite bool // kern.admhnd's row is written (its xmin changes)
			want      viewRow
		}{
			{"in levering with tspub", `update admhnd set statuslev = 'in_levering', tspub = $2 where id = $1`, 1, t1, 1, 3, true,
				viewRow{ID: 1, Soort: "Verhuizing intergemeentelijk", Tsreg: at(0), Statuslev: ptr("in_levering"), Tspub: &t1}},
			{"geleverd with tslev", `update admhnd set statuslev = 'geleverd', tslev = $2 where id = $1`, 1, t2, 1, 4, true,
				viewRow{ID: 1, Soort: "Verhuizing intergemeentelijk", Tsreg: at(0), Tslev: &t2, Statuslev: ptr("geleverd"), Tspub: &t1}},
			{"the same values", `update admhnd set statuslev = statuslev, tslev = $2 where id = $1`, 1, t2, 1, 4, false,
				viewRow{ID: 1, Soort: "Verhuizing intergemeentelijk", Tsreg: at(0), Tslev: &t2, Statuslev: ptr("geleverd"), Tspub: &t1}},
			{"back to NULL", `update admhnd set statuslev = null, tslev = null, tspub = $2 where id = $1`, 1, nil, 1, 1, true,
				viewRow{ID: 1, Soort: "Verhuizing intergemeentelijk", Tsreg: at(0)}},
			{"vrijgegeven alone", `update admhnd set vrijgegeven = $2 where id = $1`, 4, t3, 2, 5, false,
				viewRow{ID: 4, Soort: "Geboorte in Nederland", Tsreg: at(3), Statuslev: ptr("fout"), Foutreden: ptr("geen personen"), Vrijgegeven: &t3}},
			{"retried fout", `update admhnd set statuslev = null, foutreden = null, vrijgegeven = $2 where id = $1`, 4, nil, 2, 1, true,
				viewRow{ID: 4, Soort: "Geboorte in Nederland", Tsreg: at(3)}},
			{"niet leveren stays niet leveren", `update admhnd set tsreg = $2 where id = $1`, 3, at(5), 37, 2, true,
				viewRow{ID: 3, Soort: "GBA_INITIELE_VULLING", Tsreg: at(5)}},
			{"another soort", `update admhnd set soort = $2 where id = $1`, 2, "Geboorte in Nederland", 2, 1, true,
				viewRow{ID: 2, Soort: "Geboorte in Nederland", Tsreg: at(1)}},
		} {
			t.Run(c.name, func(t *testing.T) {
				before := readKern(t, db, c.id)
				var n int
				rows, err := db.Query(c.query+` returning id`, c.id, c.arg)
				if err != nil {
					t.Fatal(err)
				}
				for rows.Next() {
					n++
				}
				if err := rows.Err(); err != nil {
					t.Fatal(err)
				}
				rows.Close()
				if n != 1 {
					t.Errorf("update ... returning: got %d rows, want 1", n)
				}
				after := readKern(t, db, c.id)
				if after.Srt != c.wantSrt || after.Statuslev != c.wantCode {
					t.Errorf("kern.admhnd: got srt %d statuslev %d, want %d and %d", after.Srt, after.Statuslev, c.wantSrt, c.wantCode)
				}
				if wrote := after.Xmin != before.Xmin; wrote != c.wantWrite {
					t.Errorf("kern.admhnd written: got %t (xmin %s -> %s), want %t", wrote, before.Xmin, after.Xmin, c.wantWrite)
				}
				if got := readView(t, db, c.id); got.String() != c.want.String() {
					t.Errorf("admhnd:\n got %v\nwant %v", got, c.want)
				}
			})
		}
	}) {
		return
	}

	t.Run("errors as the contract's tables give them", func(t *testing.T) {
		for _, c := range []struct {
			name, query, code string
		}{
			{"duplicate person", `insert into admhnd_persoon (admhnd_id, persoon_id) values (1, 10)`, "23505"},
			{"person of a missing handeling", `insert into admhnd_persoon (admhnd_id, persoon_id) values (999, 10)`, "23503"},
			{"duplicate handeling", `insert into admhnd (id, soort, tsreg) values (1, 'VERHUIZING', now())`, "23505"},
			{"unknown status", `insert into admhnd (id, soort, tsreg, statuslev) values (5, 'VERHUIZING', now(), 'klaar')`, "23514"},
			{"no soort", `insert into admhnd (id, soort, tsreg) values (5, null, now())`, "23502"},
			// ON CONFLICT on a view with INSTEAD OF triggers: with a target PostgreSQL rejects it;
			// without one it is accepted and suppresses nothing.
			{"on conflict with a target", `insert into admhnd_persoon values (1, 10) on conflict (admhnd_id, persoon_id) do nothing`, "42P10"},
			{"on conflict do nothing", `insert into admhnd_persoon values (1, 10) on conflict do nothing`, "23505"},
		} {
			t.Run(c.name, func(t *testing.T) {
				_, err := db.Exec(c.query)
				if got := pqCode(err); got != c.code {
					t.Errorf("got %v (code %q), want code %s", err, got, c.code)
				}
			})
		}
		if his := readHis(t, db); len(his) != 4 {
			t.Errorf("his rows after the failed inserts: got %d, want 4", len(his))
		}
		var n int
		if err := db.Get(&n, `select count(*) from kern.admhnd`); err != nil || n != 5 {
			t.Errorf("kern.admhnd rows after the failed inserts: got %d (%v), want 5", n, err)
		}
	})

	t.Run("delete", func(t *testing.T) {
		if _, err := db.Exec(`delete from admhnd_persoon where admhnd_id = 1 and persoon_id = 11`); err != nil {
			t.Fatal(err)
		}
		his := readHis(t, db)
		if _, ok := his[[2]int64{1, 11}]; ok || len(his) != 3 {
			t.Errorf("his rows after deleting person 11 of handeling 1: got %v, want (1,10), (2,10) and (4,12)", slices.Collect(maps.Keys(his)))
		}

		if _, err := db.Exec(`delete from admhnd where id = 2`); err != nil {
			t.Fatal(err)
		}
		his = readHis(t, db)
		if _, ok := his[[2]int64{2, 10}]; ok {
			t.Error("his row of handeling 2 is still there")
		}
		if h := his[[2]int64{1, 10}]; h.Tsverval != nil || h.Actieverval != nil {
			t.Errorf("person 10's his row of handeling 1 after deleting handeling 2: got ended (%v, %v), want open again", h.Tsverval, h.Actieverval)
		}
		var n int
		if err := db.Get(&n, `select (select count(*) from kern.actie where admhnd = 2) + (select count(*) from kern.admhnd where id = 2)`); err != nil || n != 0 {
			t.Errorf("handeling 2's acties and row: got %d (%v), want none", n, err)
		}

		var id int64
		if err := db.Get(&id, `delete from admhnd where id = 4 returning id`); err != nil || id != 4 {
			t.Fatalf("delete handeling 4 returning id: got %d, %v", id, err)
		}
		if err := db.Get(&n, `select count(*) from brp_levering.admhnd_levering where admhnd_id = 4`); err != nil || n != 0 {
			t.Errorf("handeling 4's admhnd_levering row: got %d (%v), want none", n, err)
		}
		if _, err := db.Exec(`delete from admhnd_persoon; delete from admhnd where id = 1`); err != nil {
			t.Fatal(err)
		}
		var ids []int64
		if err := db.Select(&ids, `select id from admhnd order by id`); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ids, []int64{3, 101}) {
			t.Errorf("handelingen left: got %v, want [3 101]", ids)
		}
		if err := db.Get(&n, `select (select count(*) from kern.his_persafgeleidadministrati) + (select count(*) from kern.actie)
			+ (select count(*) from admhnd_persoon)`); err != nil || n != 0 {
			t.Errorf("his rows, acties and persons left: got %d (%v), want none", n, err)
		}
	})

	t.Run("two sessions add the same soort", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		tx1, err := db.BeginTxx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx1.Rollback() //nolint:errcheck // after Commit: nothing to do
		if _, err := tx1.Exec(`insert into admhnd (id, soort, tsreg) values (200, 'NIEUW_IN_DEZE_TEST', now())`); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			tx2, err := db.BeginTxx(ctx, nil)
			if err != nil {
				done <- err
				return
			}
			if _, err := tx2.Exec(`insert into admhnd (id, soort, tsreg) values (201, 'NIEUW_IN_DEZE_TEST', now())`); err != nil {
				tx2.Rollback() //nolint:errcheck // the error is the one to report
				done <- err
				return
			}
			done <- tx2.Commit()
		}()
		// The second session waits on the first's new soort.
		for {
			var waiting int
			if err := db.GetContext(ctx, &waiting, `select count(*) from pg_stat_activity
				where datname = current_database() and wait_event_type = 'Lock'`); err != nil {
				t.Fatal(err)
			}
			if waiting > 0 {
				break
			}
			select {
			case err := <-done:
				t.Fatalf("the second session did not wait for the first: %v", err)
			case <-time.After(10 * time.Millisecond):
			}
		}
		if err := tx1.Commit(); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatalf("second session: %v", err)
		}
		var srts []int
		if err := db.Select(&srts, `select srt from kern.admhnd where id in (200, 201)`); err != nil {
			t.Fatal(err)
		}
		var n int
		if err := db.Get(&n, `select count(*) from kern.srtadmhnd where naam = 'NIEUW_IN_DEZE_TEST'`); err != nil {
			t.Fatal(err)
		}
		if len(srts) != 2 || srts[0] != srts[1] || n != 1 {
			t.Errorf("got srt %v and %d soorten named NIEUW, want one soort for both", srts, n)
		}
	})
}
