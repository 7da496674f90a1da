package scenarios

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/brp/levering/handeling"
	"github.com/brp/levering/internal/brptest"
	"github.com/brp/levering/internal/load"
	"github.com/brp/levering/internal/rig"
)

// lacksRights begins the line a process logs while its role lacks a right of the grants file.
const lacksRights = "the database role lacks rights the service needs"

// TestRunsWithTheShippedGrants (issue 47): with the roles and rights of the layout's grants file
// (schema/grants), applied with psql as a DBA does, bijhouding registers as its own role (late
// registrations and persons committed late, so the service's triggers fire as bijhouding), a
// publisher and two consumers run as the runtime role and deliver everything in per-person
// order, and the operator commands, the status document and the operator pages work as that
// role, without any "permission denied". A consumer whose role lacks one grant stays not ready,
// naming it, until a DBA grants it.
func TestRunsWithTheShippedGrants(t *testing.T) {
	t.Parallel()
	kern := brptest.Layout() == handeling.Kern
	w := makeEmptyWorld(t, nil, brptest.Broker(), load.Spec{N: 1000, Personen: 100, Multi: 0.3, Excluded: 0.05, NoPerson: 2, Seed: 47})
	roles := brptest.GrantRoles(t, w.db, w.dbURL, brptest.Layout())
	if kern {
		// Bijhouding's own rights on the kern schema, for what load.InsertKern and addPersons
		// write besides kern.admhnd and kern.his_persafgeleidadministrati: bijhouding's affair,
		// not the service's, so not in the grants file. (srtadmhnd: InsertKern adds the soorten a
		// test database lacks; actie: its id is read back.)
		w.db.MustExec(fmt.Sprintf(`grant select, insert on kern.srtadmhnd to %[1]s;
			grant insert on kern.pers to %[1]s;
			grant select, insert on kern.actie to %[1]s;
			grant usage on sequence kern.seq_actie, kern.seq_his_persafgeleidadministrati to %[1]s`, roles.Bijhouding))
	}
	bij := openAs(t, roles.BijhoudingURL)

	// Before the service runs: the workload, an hour back (registered late), and a handeling
	// whose second person comes in a transaction of its own.
	registerAs(t, bij, w.hs)
	ts := time.Now().Add(-50 * time.Minute).Truncate(time.Millisecond)
	late := load.Handeling{ID: 5001, Soort: "VERHUIZING", Tsreg: ts, Personen: []int64{5001}}
	registerAs(t, bij, []load.Handeling{late})
	late.Personen = addPersons(t, bij, late, 5002)
	// f1 ended in fout (a known error of an earlier run); f2, of the same person, waits behind it.
	const reden = "afnemerindicatie ontbreekt"
	f1 := load.Handeling{ID: 5003, Soort: "VERHUIZING", Tsreg: ts.Add(time.Millisecond), Personen: []int64{5003}}
	f2 := load.Handeling{ID: 5004, Soort: "GEBOORTE", Tsreg: ts.Add(2 * time.Millisecond), Personen: []int64{5003}}
	registerAs(t, bij, []load.Handeling{f1, f2})
	w.db.MustExec(`update admhnd set statuslev = 'fout', foutreden = $2 where id = $1`, f1.ID, reden)
	var noPerson []int64
	for _, h := range w.hs {
		if len(h.Personen) == 0 {
			noPerson = append(noPerson, h.ID)
		}
	}
	w.hs = append(w.hs, late, f1, f2)

	svcEnv := func(extra ...string) []string { return rig.Env(w.broker, roles.ServiceURL, w.q, extra...) }
	pubBin, conBin := brptest.Build(t, "cmd/publicatie"), brptest.Build(t, "cmd/mutatielevering")
	pub := brptest.Start(t, "publicatie", pubBin, svcEnv("BRP_OPERATE_ADDR=127.0.0.1:0")...)
	procs := []*brptest.Proc{pub,
		brptest.Start(t, "mutatielevering-1", conBin, svcEnv()...),
		brptest.Start(t, "mutatielevering-2", conBin, svcEnv()...)}
	pub.WaitLeader(time.Minute)
	for _, p := range procs[1:] {
		p.WaitReady(time.Minute)
	}
	// The processes' sessions are the runtime role's (not the owner's through some setting).
	var users []string
	if err := w.db.Select(&users, `select distinct usename::text from pg_stat_activity
		where datname = current_database() and (application_name like 'publicatie[%' or application_name like 'mutatielevering[%')`); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(users, []string{roles.Service}) {
		t.Fatalf("the processes' sessions run as %v, want only %s", users, roles.Service)
	}

	// While it runs: more of bijhouding, of other persons, an hour back, 100 per transaction,
	// and one handeling whose second person comes later.
	more := load.Generate(load.Spec{N: 500, Personen: 50, Multi: 0.3, FirstID: 10_001, Seed: 48})
	for i := range more {
		for j := range more[i].Personen {
			more[i].Personen[j] += 1000
		}
	}
	for i := 0; i < len(more); i += 100 {
		registerAs(t, bij, more[i:i+100])
		time.Sleep(50 * time.Millisecond)
	}
	late2 := load.Handeling{ID: 20_001, Soort: "HUWELIJK", Tsreg: time.Now().Add(-time.Hour).Truncate(time.Millisecond), Personen: []int64{2001}}
	registerAs(t, bij, []load.Handeling{late2})
	time.Sleep(200 * time.Millisecond)
	late2.Personen = addPersons(t, bij, late2, 2002)
	w.hs = append(w.hs, more...)
	w.hs = append(w.hs, late2)

	// The operator, as the runtime role: the consumers set the handelingen without persons fout;
	// f2 waits behind f1 (strict policy) until f1 is retried.
	brptest.Eventually(t, time.Minute, func() error {
		for _, id := range noPerson {
			if s := brptest.Status(t, w.db, id); s != "fout" {
				return fmt.Errorf("handeling %d without persons is %q, want fout", id, s)
			}
		}
		return nil
	})
	if s := brptest.Status(t, w.db, f2.ID); s != "" {
		t.Fatalf("f2 is %q while f1 is fout, want still to be delivered", s)
	}
	cli := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(pubBin, args...)
		cmd.Env = append(os.Environ(), "BRP_DATABASE_URL="+roles.ServiceURL,
			"BRP_DATABASE_LAYOUT="+string(brptest.Layout().Or()), "BRP_LOG_FORMAT=json")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("publicatie %v as %s: %v\n%s", args, roles.Service, err, out)
		}
		return string(out)
	}
	if out := cli("status"); !strings.Contains(out, "fout") {
		t.Errorf("publicatie status:\n%s", out)
	}
	if out := cli("fout", "list"); !strings.Contains(out, reden) {
		t.Errorf("fout list does not show f1's reason:\n%s", out)
	}
	if out := cli("fout", "show", strconv.FormatInt(f1.ID, 10)); !strings.Contains(out, reden) {
		t.Errorf("fout show %d:\n%s", f1.ID, out)
	}
	cli("fout", "release", strconv.FormatInt(noPerson[0], 10), "--door", "beheerder-a", "--note", "afnemer informed")
	cli("fout", "retry", strconv.FormatInt(f1.ID, 10), "--door", "beheerder-b")

	// The status document and the operator pages (anonymous on loopback), as the runtime role,
	// among them the fout page of one with operator history.
	if st := status(t, pub); !st.Leader || st.Holder == "" {
		t.Errorf("status document: %+v, want this instance leading", st)
	}
	base := "http://" + pub.OperateAddr()
	for _, page := range []string{"/", "/overview.json", "/fout/" + strconv.FormatInt(noPerson[1], 10), "/fout/" + strconv.FormatInt(noPerson[0], 10)} {
		if code, body := get(t, base+page); code != http.StatusOK {
			t.Errorf("operator page %s: %d\n%s", page, code, body)
		}
	}

	w.verify(t) // everything delivered (f1 now too, before f2), per-person order kept
	var audit []string
	if err := w.db.Select(&audit, `select admhnd_id || ':' || actie || ':' || door from admhnd_beheer order by id`); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%d:release:beheerder-a,%d:retry:beheerder-b", noPerson[0], f1.ID); strings.Join(audit, ",") != want {
		t.Errorf("audit %v, want %s", audit, want)
	}
	for _, p := range procs {
		for _, l := range p.Output() {
			if strings.Contains(l, lacksRights) || strings.Contains(strings.ToLower(l), "permission denied") ||
				strings.Contains(l, "cannot see other roles' transactions") {
				t.Errorf("%s: %s", p.Name, l)
			}
		}
		if ws := p.Warnings(); len(ws) > 0 {
			t.Logf("%s warned: %s", p.Name, strings.Join(ws, "\n"))
		}
	}

	t.Run("LackingOneGrant", func(t *testing.T) {
		short := brptest.GrantRoles(t, w.db, w.dbURL, brptest.Layout())
		right := "update (tspub) on admhnd"
		if kern {
			right = "update (tslev) on kern.admhnd"
		}
		w.db.MustExec(`revoke ` + right + ` from ` + short.Service)
		con := brptest.Start(t, "mutatielevering-lacking", conBin, rig.Env(w.broker, short.ServiceURL, brptest.NewQueues(t))...)
		var line map[string]any
		brptest.Eventually(t, 30*time.Second, func() error {
			if line = logged(con, lacksRights); line == nil {
				return fmt.Errorf("%s has not logged %q:\n%s", con.Name, lacksRights, con.Tail(10))
			}
			return nil
		})
		if line["missing"] != "grant "+right || line["role"] != short.Service {
			t.Errorf("logged %v, want missing %q of role %s", line, "grant "+right, short.Service)
		}
		want := "waiting for the database rights (missing: grant " + right + "; see schema/grants)"
		if code, body := readyz(t, con); code != http.StatusServiceUnavailable || body["starting"] != want {
			t.Errorf("readyz %d %v, want 503 with starting %q", code, body, want)
		}
		w.db.MustExec(`grant ` + right + ` to ` + short.Service)
		con.WaitReady(15 * time.Second)
		if logged(con, "the database role has every right the service needs now") == nil {
			t.Errorf("%s did not say it has its rights now:\n%s", con.Name, con.Tail(10))
		}
	})
}

func openAs(t testing.TB, url string) *sqlx.DB {
	t.Helper()
	db, err := sqlx.Open("postgres", url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// registerAs writes hs as bijhouding does, on the test's layout, through db.
func registerAs(t testing.TB, db *sqlx.DB, hs []load.Handeling) {
	t.Helper()
	insert := load.Insert
	if brptest.Layout() == handeling.Kern {
		insert = load.InsertKern
	}
	if err := insert(context.Background(), db, hs); err != nil {
		t.Fatalf("bijhouding: %v", err)
	}
}

// addPersons adds persons to h in a transaction of its own, as bijhouding does that commits them
// after the handeling, and returns h's persons then.
func addPersons(t testing.TB, db *sqlx.DB, h load.Handeling, persons ...int64) []int64 {
	t.Helper()
	tx := db.MustBegin()
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	var err error
	if brptest.Layout() == handeling.Kern {
		if _, err = tx.Exec(`insert into kern.pers (id) select unnest($1::bigint[]) on conflict do nothing`, pq.Array(persons)); err == nil {
			_, err = tx.Exec(`with a as (insert into kern.actie (admhnd, tsreg) values ($1, $2) returning id)
				insert into kern.his_persafgeleidadministrati (pers, tsreg, actieinh, admhnd, tslaatstewijz, sorteervolgorde)
				select p, $2, a.id, $1, $2, 1 from a, unnest($3::bigint[]) as p`, h.ID, h.Tsreg, pq.Array(persons))
		}
	} else {
		_, err = tx.Exec(`insert into admhnd_persoon (admhnd_id, persoon_id) select $1, unnest($2::bigint[])`, h.ID, pq.Array(persons))
	}
	if err == nil {
		err = tx.Commit()
	}
	if err != nil {
		t.Fatalf("bijhouding: persons of %d: %v", h.ID, err)
	}
	return slices.Sorted(slices.Values(append(slices.Clone(h.Personen), persons...)))
}

// logged returns the first JSON log line of p whose msg begins with prefix, or nil.
func logged(p *brptest.Proc, prefix string) map[string]any {
	for _, l := range p.Output() {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil {
			if msg, _ := m["msg"].(string); strings.HasPrefix(msg, prefix) {
				return m
			}
		}
	}
	return nil
}

func get(t testing.TB, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
