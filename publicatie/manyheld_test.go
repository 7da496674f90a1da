package publicatie

import (
	"fmt"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/brp/levering/handeling"
	"github.com/brp/levering/internal/brptest"
)

// insertHeld registers n persons (from 1) each with a handeling in status first and a later
// one still to be delivered, as a bulk load without triggers (bulkLoad): as if a round had read
// what the triggers would have recorded.
func (e *roundEnv) insertHeld(n int, first string) {
	e.t.Helper()
	if brptest.Layout() == handeling.Kern {
		e.insertHeldKern(n, first)
		return
	}
	e.bulkLoad(func(tx *sqlx.Tx) {
		tx.MustExec(`insert into admhnd (id, soort, tsreg, statuslev, foutreden, tspub)
			select i, 'VERHUIZING', $2::timestamptz + make_interval(secs => i / 1000.0), $3,
			       case when $4 then 'test' end, now()
			from generate_series(1, $1::int) i`, n, t0, first, first == "fout")
		tx.MustExec(`insert into admhnd (id, soort, tsreg)
			select $1::int + i, 'VERHUIZING', $2::timestamptz + make_interval(secs => ($1::int + i) / 1000.0)
			from generate_series(1, $1::int) i`, n, t0)
		tx.MustExec(`insert into admhnd_persoon (admhnd_id, persoon_id)
			select i, i from generate_series(1, $1::int) i union all select $1::int + i, i from generate_series(1, $1::int) i`, n)
	})
	brptest.Analyze(e.t, e.db)
}

// insertHeldKern is insertHeld on the kern tables themselves: the test views write them a
// person at a time, too slow for 100,000.
func (e *roundEnv) insertHeldKern(n int, first string) {
	e.t.Helper()
	status := map[string]int{"fout": 5, "in_levering": 3}[first]
	e.bulkLoad(func(tx *sqlx.Tx) {
		tx.MustExec(`insert into kern.pers (id) select i from generate_series(1, $1::int + 1) i on conflict do nothing`, n)
		tx.MustExec(`insert into kern.admhnd (id, srt, partij, tsreg, statuslev)
			select i, 1, 1, $2::timestamptz + make_interval(secs => i / 1000.0), case when i <= $1::int then $3::smallint else 1 end
			from generate_series(1, 2 * $1::int) i`, n, t0, status)
		tx.MustExec(`insert into admhnd_levering (admhnd_id, tspub, foutreden)
			select i, now(), case when $2 then 'test' end from generate_series(1, $1::int) i`, n, first == "fout")
		tx.MustExec(`insert into kern.actie (id, admhnd, tsreg) select id, id, tsreg from kern.admhnd where id <= 2 * $1::int`, n)
		tx.MustExec(`select setval('kern.seq_actie', 2 * $1::int)`, n)
		tx.MustExec(`insert into kern.his_persafgeleidadministrati (pers, tsreg, actieinh, admhnd, tslaatstewijz, sorteervolgorde)
			select (id - 1) % $1::int + 1, tsreg, id, id, tsreg, 1 from kern.admhnd where id <= 2 * $1::int`, n)
	})
	e.db.MustExec(`analyze kern.admhnd, kern.actie, kern.his_persafgeleidadministrati, admhnd_levering`)
}

// bulkLoad runs load in one transaction without triggers and foreign-key checks, as
// pg_restore --disable-triggers loads (session_replication_role = replica; the tests' database
// user is a superuser). The rows a test loads this way are consistent by construction, and what
// the service's triggers would record of them (late arrivals, fout changes) is what a round
// has read already. Loading 100,000 held on the kern layout took 20 s with them, 13 s of it
// the kern schema's foreign-key checks.
func (e *roundEnv) bulkLoad(load func(tx *sqlx.Tx)) {
	e.t.Helper()
	tx := e.db.MustBegin()
	defer tx.Rollback() //nolint:errcheck // nothing to undo after the commit
	tx.MustExec(`set local session_replication_role = replica`)
	load(tx)
	if err := tx.Commit(); err != nil {
		e.t.Fatal(err)
	}
}

// foutInLevering sets every handeling in levering fout, as a consumer's known error does. On
// the kern layout it writes the kern table and admhnd_levering as the test view's update
// trigger would, in two statements rather than a trigger call per row.
func (e *roundEnv) foutInLevering() {
	e.t.Helper()
	if brptest.Layout() != handeling.Kern {
		e.db.MustExec(`update admhnd set statuslev = 'fout', foutreden = 'test' where statuslev = 'in_levering'`)
		return
	}
	e.db.MustExec(`insert into admhnd_levering (admhnd_id, foutreden)
		select id, 'test' from kern.admhnd where statuslev = 3
		on conflict (admhnd_id) do update set foutreden = excluded.foutreden`)
	e.db.MustExec(`update kern.admhnd set statuslev = 5 where statuslev = 3`)
}

// insertFree registers, after insertHeld(n), a handeling of person n+1 newer than all of
// them, and returns its id.
func (e *roundEnv) insertFree(n int) int64 {
	e.t.Helper()
	free := int64(2*n + 1)
	e.db.MustExec(`insert into admhnd (id, soort, tsreg)
		values ($1::bigint, 'VERHUIZING', $2::timestamptz + make_interval(secs => $1::bigint / 1000.0))`, free, t0)
	e.db.MustExec(`insert into admhnd_persoon (admhnd_id, persoon_id) values ($1, $2)`, free, n+1)
	e.db.MustExec(`delete from publicatie_nakomer`)
	brptest.Analyze(e.t, e.db)
	return free
}

// A fout never stops delivery for other persons (issue 39): n persons each have a fout and a
// later handeling still to be delivered, and a free handeling of another person comes after
// all of them. Rounds publish the free one and nothing held, the view holds none of the held
// work (it is parked, so it takes no room: 100,000 would fill a view of the default size),
// and the leader's metrics count what handeling.ReadHeld counts. Both ways the held work
// arises: the fouts are there when the view is built, or they come (a consumer's fout of
// what was in levering) while the later handelingen are in the view.
func TestFreeHandelingPassesManyHeld(t *testing.T) {
	t.Parallel()
	for _, n := range []int{4_100, 100_000} {
		for _, fout := range []string{"before", "while in the view"} {
			t.Run(fmt.Sprintf("%d %s", n, fout), func(t *testing.T) {
				t.Parallel()
				cfg, first := Config{}, "fout"
				if fout != "before" {
					// All in levering at once (over time, MaxInLevering at a time): room for
					// the round to take the later ones in.
					cfg.MaxInLevering, first = n+1000, "in_levering"
					// On a busy machine the 30 rounds below can outlast the default
					// RedeliveryTimeout; a round would then republish the 100,000 in levering
					// in one broker transaction, which is not what this test is about.
					cfg.RedeliveryTimeout = 24 * time.Hour
				}
				e := newRoundEnv(t, cfg)
				e.insertHeld(n, first)
				if first == "in_levering" {
					// Take the later ones into the view (at most Limit a round), then one
					// round more with the view full.
					for i, full := 0, 0; i < 30 && full < 2; i++ {
						if got := e.round(); len(got) > 0 {
							t.Fatalf("published %v while their persons are in levering", got)
						}
						if e.pub.work.view.size() == min(n, DefaultViewSize) {
							full++
						}
					}
					if size := e.pub.work.view.size(); size != min(n, DefaultViewSize) {
						t.Fatalf("the view holds %d handelingen, want the %d later ones", size, min(n, DefaultViewSize))
					}
					e.foutInLevering()
				}
				free := e.insertFree(n)
				rounds := 0
				var got []int64
				for ; rounds < 100 && len(got) == 0; rounds++ {
					got = e.round()
				}
				wantIDs(t, fmt.Sprintf("the first round that published (of %d)", rounds), got, free)
				v := e.pub.work.view
				if v.size() != 0 || v.heldN != n {
					t.Fatalf("the view holds %d handelingen and %d held behind fout, want none and %d", v.size(), v.heldN, n)
				}
				held := e.held(true)
				gauge := handeling.Held{Handelingen: int64(testutil.ToFloat64(e.pub.m.held)), Personen: int64(testutil.ToFloat64(e.pub.m.heldPersons))}
				if held != (handeling.Held{Handelingen: int64(n), Personen: int64(n)}) || gauge != held {
					t.Fatalf("held behind fout: ReadHeld %+v, the metrics %+v; want %d of %d persons", held, gauge, n, n)
				}
				t.Logf("%d held: the free handeling published by round %d", n, rounds)
			})
		}
	}
}
