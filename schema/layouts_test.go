package schema_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/brp/levering/internal/brptest"
)

// layoutOps are the writes of bijhouding, the consumers and the operators in one layout's
// tables, as the writers themselves make them (multi-row statements on the kern tables, not
// the tests' compatibility views, which insert row by row).
type layoutOps struct {
	// register: $1 ids, $2 leads (intervals before now()), $3 statuses (NULL or fout).
	register string
	// link: $1 the handelingen's ids, $2 the persons, pairwise.
	link string
	// status: $1 id, $2 the contract's status name (NULL: te leveren).
	status string
	// release: $1 id.
	release string
}

var opsOf = map[string]layoutOps{
	"contract": {
		register: `insert into admhnd (id, soort, tsreg, statuslev)
			select id, 'VERHUIZING', now() - lead, status
			from unnest($1::bigint[], $2::interval[], $3::text[]) as r(id, lead, status)`,
		link:    `insert into admhnd_persoon (admhnd_id, persoon_id) select * from unnest($1::bigint[], $2::bigint[])`,
		status:  `update admhnd set statuslev = $2 where id = $1`,
		release: `update admhnd set vrijgegeven = now() where id = $1`,
	},
	"kern": {
		register: `insert into kern.admhnd (id, srt, partij, tsreg, statuslev)
			select id, 1, 1, now() - lead, case when status = 'fout' then 5 else 1 end
			from unnest($1::bigint[], $2::interval[], $3::text[]) as r(id, lead, status)`,
		link: `with p as (
			    insert into kern.pers (id) select distinct unnest($2::bigint[]) on conflict do nothing
			), a as (
			    insert into kern.actie (admhnd, tsreg)
			    select h.id, h.tsreg from kern.admhnd h where h.id in (select unnest($1::bigint[]))
			    returning id, admhnd, tsreg
			)
			insert into kern.his_persafgeleidadministrati (pers, tsreg, actieinh, admhnd, tslaatstewijz, sorteervolgorde)
			select l.pers, a.tsreg, a.id, a.admhnd, a.tsreg, 1
			from a join unnest($1::bigint[], $2::bigint[]) as l(admhnd, pers) on l.admhnd = a.admhnd`,
		status: `update kern.admhnd set statuslev = publicatie_status_code($2) where id = $1`,
		release: `insert into admhnd_levering (admhnd_id, vrijgegeven) values ($1, now())
			on conflict (admhnd_id) do update set vrijgegeven = excluded.vrijgegeven`,
	},
}

// TestLayoutsRecordAlike runs the same generated history of registrations, person links,
// status changes and releases on both layouts and finds that their triggers (the
// definitions/*/registration, persons and status files, written once per layout) record the
// same: late registrations and links in publicatie_nakomer (with a lead or not) and
// publicatie_herlees, fout changes, persons linked after delivery, lead samples, and the open
// writer's locks each transaction holds before it commits.
func TestLayoutsRecordAlike(t *testing.T) {
	t.Parallel()
	contract, _ := brptest.DBWith(t, brptest.StatusText)
	kern, _ := brptest.DBWith(t, brptest.KernForm)
	dbs := map[string]*sqlx.DB{"contract": contract, "kern": kern}
	for _, db := range dbs {
		// The margin the leader learned, nobody asleep (no notifications), every lead sampled.
		db.MustExec(`update publicatie_state set margin = '100 ms', max_lead = '2 s', sleeping = false,
			lead_sample_rate = 1, lead_sample_until = 'infinity'`)
	}
	r := rand.New(rand.NewPCG(50, 2))
	leads := []string{"0", "20 ms", "150 ms", "1.5 s", "3 s", "1 day"}
	var ids []int64
	next := int64(1)
	seen := map[string]bool{}
	for step := range 200 {
		var what string
		var run func(tx *sqlx.Tx, o layoutOps) error
		switch k := r.IntN(10); {
		case k < 4 || len(ids) == 0: // a registration: one handeling or many, with persons or not
			n := []int{1, 1, 2, 5, 17, 40, 120}[r.IntN(7)]
			var rid, la, lp []int64
			var rl []string
			var rs []*string
			for range n {
				rid = append(rid, next)
				if n > 100 { // a load of old handelingen: more late ones than a transaction records one by one
					rl = append(rl, "1 day")
				} else {
					rl = append(rl, leads[r.IntN(len(leads))])
				}
				var s *string
				if r.IntN(15) == 0 {
					f := "fout"
					s = &f
				}
				rs = append(rs, s)
				for _, p := range r.Perm(60)[:r.IntN(3)] { // persons of a pool of 60, shared
					la, lp = append(la, next), append(lp, 1+int64(p))
				}
				next++
			}
			ids = append(ids, rid...)
			what = fmt.Sprintf("register %v leads %v, persons %v of %v", rid, rl, lp, la)
			run = func(tx *sqlx.Tx, o layoutOps) error {
				if _, err := tx.Exec(o.register, pq.Array(rid), pq.Array(rl), pq.Array(rs)); err != nil {
					return err
				}
				if len(la) > 0 {
					_, err := tx.Exec(o.link, pq.Array(la), pq.Array(lp))
					return err
				}
				return nil
			}
		case k < 6: // persons linked later, to one handeling or several
			var la, lp []int64
			for range []int{1, 1, 3, 20}[r.IntN(4)] {
				la, lp = append(la, ids[r.IntN(len(ids))]), append(lp, 1000+int64(step)*100+int64(len(lp)))
			}
			what = fmt.Sprintf("link %v to %v", lp, la)
			run = func(tx *sqlx.Tx, o layoutOps) error {
				_, err := tx.Exec(o.link, pq.Array(la), pq.Array(lp))
				return err
			}
		case k < 9: // a publisher's mark, a consumer's delivery or fout, an operator's retry
			id := ids[r.IntN(len(ids))]
			var s *string
			if v := []string{"in_levering", "geleverd", "fout", ""}[r.IntN(4)]; v != "" {
				s = &v
			}
			what = fmt.Sprintf("status %d to %v", id, deref(s))
			run = func(tx *sqlx.Tx, o layoutOps) error {
				_, err := tx.Exec(o.status, id, s)
				return err
			}
		default: // an operator's release
			id := ids[r.IntN(len(ids))]
			what = fmt.Sprintf("release %d", id)
			run = func(tx *sqlx.Tx, o layoutOps) error {
				_, err := tx.Exec(o.release, id)
				return err
			}
		}
		// Now and then a late writer: its first write comes more than half a second after
		// its start, and it commits later than that.
		late := r.IntN(40) == 0
		if late {
			what = "late writer: " + what
		}
		got := map[string]string{}
		for name, db := range dbs {
			tx := db.MustBegin()
			if late {
				tx.MustExec(`select pg_sleep(0.6)`)
			} else {
				// A transaction that commits more than half a second after its start records what
				// it registered at its commit (publicatie_vastgelegd). Only the late writer is
				// meant to: a busy machine must not make a quick one slow in one layout alone, so
				// its commit-time check is told the view is already to be built again.
				tx.MustExec(`select set_config('brp_levering.herlees', '1', true)`)
			}
			if err := run(tx, opsOf[name]); err != nil {
				t.Fatalf("step %d, %s, %s: %v", step, what, name, err)
			}
			// Which persons of a statement of more than 16 links are locked depends on the
			// order of its rows; with the bulk writer's lock the horizon holds everyone anyway.
			var locks string
			if err := tx.Get(&locks, `select case when bool_or(classid = 7345004) then 'bulk writer'
				else count(*) filter (where classid = 7345003) || ' person locks' end
				from pg_locks where pid = pg_backend_pid() and locktype = 'advisory'`); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatalf("step %d, %s, %s: commit: %v", step, what, name, err)
			}
			got[name] = locks + "; " + records(t, db)
		}
		if got["contract"] != got["kern"] {
			t.Fatalf("step %d, %s:\ncontract: %s\nkern:     %s", step, what, got["contract"], got["kern"])
		}
		for _, part := range strings.Split(got["contract"], "; ") {
			if !strings.HasSuffix(part, " ") && !strings.HasSuffix(part, " 0") && !strings.HasSuffix(part, " 0 person locks") {
				seen[strings.Fields(part)[0]] = true
			}
		}
	}
	// The history must have made every trigger record something, or it compared nothing there.
	for _, want := range []string{"bulk", "nakomer", "herlees", "fout_changes", "laat_personen", "lead_samples"} {
		if !seen[want] {
			t.Errorf("no step recorded %s: the generated history leaves it untested", want)
		}
	}
}

// records reads and deletes what the service's triggers recorded.
func records(t *testing.T, db *sqlx.DB) string {
	t.Helper()
	var out []string
	for _, q := range []struct{ name, read, clear string }{
		{"nakomer", `select admhnd_id || case when voorsprong is null then '' else '+lead' end from publicatie_nakomer order by admhnd_id`, `delete from publicatie_nakomer`},
		{"herlees", `select admhnd_id::text from publicatie_herlees order by admhnd_id`, `delete from publicatie_herlees`},
		{"fout_changes", `select admhnd_id::text from publicatie_fout_changes order by admhnd_id`, `delete from publicatie_fout_changes`},
		{"laat_personen", `select admhnd_id::text from publicatie_laat_personen order by admhnd_id`, `delete from publicatie_laat_personen`},
		{"lead_samples", `select count(*)::text from publicatie_lead_samples`, `delete from publicatie_lead_samples`},
	} {
		var rows []string
		if err := db.Select(&rows, q.read); err != nil {
			t.Fatal(err)
		}
		db.MustExec(q.clear)
		out = append(out, q.name+" "+strings.Join(slices.Compact(rows), ","))
	}
	return strings.Join(out, "; ")
}

func deref(s *string) string {
	if s == nil {
		return "te leveren"
	}
	return *s
}
