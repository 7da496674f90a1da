package main

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/brp/levering/internal/brptest"
	"github.com/brp/levering/internal/rig"
)

// runKern runs the publicatie binary with BRP_DATABASE_LAYOUT=kern on the database of dbURL
// and returns its exit code, standard output and the lines of standard error that are not
// JSON log lines.
func runKern(t *testing.T, bin, dbURL string, args ...string) (int, string, []string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "BRP_DATABASE_URL="+dbURL, "BRP_DATABASE_LAYOUT=kern", "BRP_HTTP_ADDR=off")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	var lines []string
	for _, line := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		if line != "" && !strings.HasPrefix(line, "{") {
			lines = append(lines, line)
		}
	}
	return cmd.ProcessState.ExitCode(), stdout.String(), lines
}

// On a BRP kern database, through the binary: migrate refuses kern tables that differ from
// what the service needs (exit 1, one line, nothing created), migrates the real ones, and the
// operator's commands read and change the kern tables and the service's schema only.
func TestKernThroughTheBinary(t *testing.T) {
	bin := brptest.Build(t, "cmd/publicatie")

	bad, badURL := brptest.BareDB(t, rig.BijhoudingKern)
	bad.MustExec(`alter table kern.admhnd drop column tslev`)
	code, _, lines := runKern(t, bin, badURL, "migrate")
	const want = "publicatie: migrate: kern layout: the database's kern tables differ from what the service needs: kern.admhnd has no column tslev"
	if code != 1 || len(lines) != 1 || lines[0] != want {
		t.Errorf("migrate on kern tables without tslev: exit %d, stderr %q; want 1 and %q", code, lines, want)
	}
	var schemas int
	if err := bad.Get(&schemas, `select count(*) from pg_namespace where nspname = 'brp_levering'`); err != nil || schemas != 0 {
		t.Errorf("the refused migrate left %d brp_levering schemas (%v)", schemas, err)
	}

	db, dbURL := brptest.BareDB(t, rig.BijhoudingKern)
	if code, out, lines := runKern(t, bin, dbURL, "migrate"); code != 0 || !strings.Contains(out, "definitions files applied now") {
		t.Fatalf("migrate: exit %d:\n%s%s", code, out, lines)
	}
	if code, out, lines := runKern(t, bin, dbURL, "migrate", "status"); code != 0 || !strings.Contains(out, "schema up to date") {
		t.Fatalf("migrate status: exit %d:\n%s%s", code, out, lines)
	}
	// Bijhouding's handelingen: 1 fout (persons 1 and 2), 2 waiting behind it (person 2),
	// 3 of soort 37 registered niet leveren.
	db.MustExec(`insert into kern.pers (id) values (1), (2);
		insert into kern.admhnd (id, srt, partij, tsreg, statuslev) values
			(1, 3, 1, now() - interval '2 minutes', 5), (2, 1, 1, now() - interval '1 minute', 1),
			(3, 37, 1, now() - interval '3 minutes', 2);
		insert into kern.actie (id, admhnd, tsreg) select id, id, tsreg from kern.admhnd;
		insert into kern.his_persafgeleidadministrati (pers, tsreg, actieinh, admhnd, tslaatstewijz, sorteervolgorde) values
			(1, now() - interval '2 minutes', 1, 1, now(), 1), (2, now() - interval '2 minutes', 1, 1, now(), 1),
			(2, now() - interval '1 minute', 2, 2, now(), 1), (1, now() - interval '3 minutes', 3, 3, now(), 1);
		insert into brp_levering.admhnd_levering (admhnd_id, foutreden) values (1, 'persoon 2 niet gevonden')`)
	code, out, lines := runKern(t, bin, dbURL, "status")
	for _, w := range []string{"excluded GBA - Initiële vulling", "backlog (te leveren)   1", "fout                   1",
		"held behind fout       1", "Voltrekking huwelijk in Nederland"} {
		if code != 0 || !strings.Contains(out, w) {
			t.Errorf("status: exit %d, want %q in:\n%s%s", code, w, out, lines)
		}
	}
	code, out, lines = runKern(t, bin, dbURL, "fout", "show", "1")
	if code != 0 || !strings.Contains(out, "persoon 2 niet gevonden") || !strings.Contains(out, "1, 2") && !strings.Contains(out, "1,2") {
		t.Errorf("fout show 1: exit %d:\n%s%s", code, out, lines)
	}
	if code, out, lines := runKern(t, bin, dbURL, "fout", "release", "1", "--door", "beheerder"); code != 0 {
		t.Fatalf("fout release: exit %d:\n%s%s", code, out, lines)
	}
	var released bool
	if err := db.Get(&released, `select vrijgegeven is not null from brp_levering.admhnd_levering where admhnd_id = 1`); err != nil || !released {
		t.Errorf("after release: vrijgegeven set %v (%v)", released, err)
	}
	if code, out, lines := runKern(t, bin, dbURL, "fout", "retry", "1", "--door", "beheerder"); code != 0 {
		t.Fatalf("fout retry: exit %d:\n%s%s", code, out, lines)
	}
	var statuses []int
	if err := db.Select(&statuses, `select statuslev from kern.admhnd order by id`); err != nil || len(statuses) != 3 ||
		statuses[0] != 1 || statuses[1] != 1 || statuses[2] != 2 {
		t.Errorf("statuses after retry %v (%v), want [1 1 2]: retry sets 5 back to 1, status 2 untouched", statuses, err)
	}
	var actions int
	if err := db.Get(&actions, `select count(*) from brp_levering.admhnd_beheer where admhnd_id = 1 and door = 'beheerder'`); err != nil || actions != 2 {
		t.Errorf("%d actions recorded (%v), want release and retry", actions, err)
	}
	brptest.KernUntouched(t, db, 1)
}
