package operate_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/jmoiron/sqlx"

	"github.com/brp/levering/internal/brptest"
	"github.com/brp/levering/internal/load"
	"github.com/brp/levering/operate"
)

// cli runs an operator command in-process as cmd/publicatie does and returns what it wrote.
func cli(t *testing.T, c operate.CLI, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := c.Run(context.Background(), args, &out)
	return out.String(), err
}

// mustCLI is cli for a command that must succeed.
func mustCLI(t *testing.T, c operate.CLI, args ...string) string {
	t.Helper()
	out, err := cli(t, c, args...)
	if err != nil {
		t.Fatalf("%v: %v\n%s", args, err, out)
	}
	return out
}

var (
	stamp  = regexp.MustCompile(`\d{4}-\d\d-\d\d \d\d:\d\d:\d\d`)
	millis = regexp.MustCompile(`hh:mm:ss\.\d{3}`)
	ages   = regexp.MustCompile(`(age|since|activity|p50|p99|ahead|handed over) \d+(ms|s|m\d\ds|h\d\dm|d\d\dh)\b`)
)

// masked replaces what depends on the clock and the time zone by placeholders of the same
// width, so that the columns stay aligned.
func masked(s string) string {
	s = stamp.ReplaceAllString(s, "YYYY-MM-DD hh:mm:ss")
	s = millis.ReplaceAllString(s, "hh:mm:ss.fff")
	return ages.ReplaceAllString(s, "$1 AGE")
}

// tsreg is handeling id's tsreg.
func tsreg(t *testing.T, db *sqlx.DB, id int64) time.Time {
	t.Helper()
	var ts time.Time
	if err := db.Get(&ts, `select tsreg from admhnd where id = $1`, id); err != nil {
		t.Fatal(err)
	}
	return ts
}

// wantText compares a command's output with what it should be.
func wantText(t *testing.T, what, got, want string) {
	t.Helper()
	if got != want {
		t.Errorf("%s:\n%s\nwant:\n%s", what, got, want)
	}
}

func TestCLIStatus(t *testing.T) {
	db, _ := brptest.DB(t)
	craft(t, db)
	// The kern layout names soort 37 as kern.srtadmhnd does.
	wantText(t, "status", masked(mustCLI(t, operate.CLI{DB: db, Config: operate.OverviewConfig{Layout: brptest.Layout()}}, "status")), strings.Replace(`publicatie status at YYYY-MM-DD hh:mm:ss.fff (database clock)
cluster default, fout policy strict, excluded GBA_INITIELE_VULLING

backlog (te leveren)   5
in levering            2
delivered last minute  2  ▁▁▁▁▄▁▁▁▁█ per minute, last 10 minutes
geleverd in total      4
fout                   4
held behind fout       2  handeling(en) of 2 person(s), also through multi-person handelingen
in the future          0  tsreg over 5s ahead of the database clock

delivery delay      p50 AGE, p99 AGE (registration to delivery, 2 delivered in the last 5 minutes)
oldest undelivered  2 HUWELIJK, registered YYYY-MM-DD hh:mm:ss.fff, age AGE, te leveren
horizon             waits 0ms: lead margin 0ms (at most 2s), no open transaction holds it
lease               host-a-123 leads, epoch 3, last activity AGE ago

blocked persons: 3
  PERSOON  HELD BY  WAITING  WHY
  1        1        1        fout: afnemerindicatie ontbreekt voor persoon 1
  2        3        1        in levering since AGE
  8        15       1        fout: persoon 8 niet gevonden

fout handelingen: 4
  ID  SOORT       REGISTERED           PERSONEN  RELEASED  REASON
  15  HUWELIJK    YYYY-MM-DD hh:mm:ss  7,8       no        persoon 8 niet gevonden
  9   OVERLIJDEN  YYYY-MM-DD hh:mm:ss  5         no        afgewezen
  6   VERHUIZING  YYYY-MM-DD hh:mm:ss  4         yes       time-out
  1   HUWELIJK    YYYY-MM-DD hh:mm:ss  1         no        afnemerindicatie ontbreekt voor persoon 1

  publicatie fout show ID | fout retry ID --door NAME | fout release ID --door NAME
`, load.ExcludedSoort, brptest.Layout().DefaultExcluded()[0], 1))

	// Another configuration, no lease, nothing blocked, and more than the rows shown.
	empty, _ := brptest.DB(t)
	sqlExec(t, empty, `insert into publicatie_lease (cluster, holder, epoch, heartbeat, acquired)
		values ('west', '', 7, now() - interval '90 seconds', now() - interval '1 hour')`)
	wantText(t, "status of an empty database", masked(mustCLI(t, operate.CLI{DB: empty, Config: operate.OverviewConfig{Layout: brptest.Layout(), Excluded: []string{}, FoutPolicy: "skip", Cluster: "west"}}, "status")),
		`publicatie status at YYYY-MM-DD hh:mm:ss.fff (database clock)
cluster west, fout policy skip, excluded none

backlog (te leveren)   0
in levering            0
delivered last minute  0  ▁▁▁▁▁▁▁▁▁▁ per minute, last 10 minutes
geleverd in total      0
fout                   0
held behind fout       0
in the future          0  tsreg over 5s ahead of the database clock

delivery delay      no deliveries in the last 5 minutes
oldest undelivered  none
horizon             waits 0ms: lead margin 0ms (at most 2s), no open transaction holds it
lease               nobody holds it: handed over AGE ago at the end of epoch 7; the next publicatie to poll takes it

blocked persons: 0

fout handelingen: 0
`)
	var hs []load.Handeling
	for i := range int64(10) {
		hs = append(hs, load.Handeling{ID: 100 + i, Soort: "GEBOORTE", Tsreg: time.Now().Add(-time.Hour), Personen: []int64{100 + i}},
			load.Handeling{ID: 200 + i, Soort: "GEBOORTE", Tsreg: time.Now(), Personen: []int64{100 + i}})
	}
	if err := load.Insert(context.Background(), empty, hs); err != nil {
		t.Fatal(err)
	}
	sqlExec(t, empty, `update admhnd set statuslev = 'fout', foutreden = 'x' where id < 200`)
	out := mustCLI(t, operate.CLI{DB: empty, Config: operate.OverviewConfig{Layout: brptest.Layout()}}, "status")
	for _, want := range []string{"\nblocked persons: 10\n", "  ... 2 more on the status page\n", "\nfout handelingen: 10\n", "  ... 2 more: publicatie fout list\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("status with 10 blocked and fout does not say %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "fout: x"); n != 8 {
		t.Errorf("status lists %d blocked persons, want 8:\n%s", n, out)
	}
}

func TestCLIFoutList(t *testing.T) {
	db, _ := brptest.DB(t)
	c := operate.CLI{DB: db, Config: operate.OverviewConfig{Layout: brptest.Layout()}}
	wantText(t, "fout list of nothing", mustCLI(t, c, "fout", "list"), "no handelingen in fout\n")
	craft(t, db)
	long := strings.Repeat("lange reden ", 10)
	sqlExec(t, db, `update admhnd set foutreden = $1 where id = 1`, long)
	wantText(t, "fout list", masked(mustCLI(t, c, "fout", "list")),
		`  ID  SOORT       REGISTERED           PERSONEN  RELEASED  REASON
  15  HUWELIJK    YYYY-MM-DD hh:mm:ss  7,8       no        persoon 8 niet gevonden
  9   OVERLIJDEN  YYYY-MM-DD hh:mm:ss  5         no        afgewezen
  6   VERHUIZING  YYYY-MM-DD hh:mm:ss  4         yes       time-out
  1   HUWELIJK    YYYY-MM-DD hh:mm:ss  1         no        `+long[:99]+"…\n")
	// Flags before or after, with or without "=".
	for _, args := range [][]string{{"fout", "list", "--limit", "2"}, {"fout", "list", "-limit=2"}} {
		wantText(t, fmt.Sprint(args), masked(mustCLI(t, c, args...)),
			`  ID  SOORT       REGISTERED           PERSONEN  RELEASED  REASON
  15  HUWELIJK    YYYY-MM-DD hh:mm:ss  7,8       no        persoon 8 niet gevonden
  9   OVERLIJDEN  YYYY-MM-DD hh:mm:ss  5         no        afgewezen
`)
	}
	// The registered column is tsreg in local time.
	if out := mustCLI(t, c, "fout", "list", "--limit", "1"); !strings.Contains(out, "  "+tsreg(t, db, 15).Local().Format("2006-01-02 15:04:05")+"  ") {
		t.Errorf("fout list does not show tsreg of 15 in local time:\n%s", out)
	}
}

func TestCLIFoutShow(t *testing.T) {
	db, _ := brptest.DB(t)
	craft(t, db)
	c := operate.CLI{DB: db, Config: operate.OverviewConfig{Layout: brptest.Layout()}}
	wantText(t, "fout show 15", masked(mustCLI(t, c, "fout", "show", "15")), `handeling   15
soort       HUWELIJK
registered  YYYY-MM-DD hh:mm:ss.fff
status      fout
personen    7,8
reason      persoon 8 niet gevonden
released    no
holds back  1 waiting handeling(en)
  16 HUWELIJK, registered YYYY-MM-DD hh:mm:ss.fff

history (0)

commands
  publicatie fout retry 15 --door NAME --note TEXT
  publicatie fout release 15 --door NAME --note TEXT
`)
	if out := mustCLI(t, c, "fout", "show", "15"); !strings.Contains(out, "registered  "+tsreg(t, db, 15).Local().Format("2006-01-02 15:04:05.000")+"\n") {
		t.Errorf("fout show does not show tsreg in local time:\n%s", out)
	}
	// Under skip it holds nothing back.
	if out := mustCLI(t, operate.CLI{DB: db, Config: operate.OverviewConfig{Layout: brptest.Layout(), FoutPolicy: "skip"}}, "fout", "show", "15"); !strings.Contains(out, "holds back  0 waiting handeling(en)\n\nhistory") {
		t.Errorf("fout show under skip:\n%s", out)
	}

	// 6: released, overtaken by the geleverd 12, with history.
	mustCLI(t, c, "fout", "retry", "6", "--door", "alice", "--note", "eerste poging")
	sqlExec(t, db, `update admhnd set statuslev = 'fout', foutreden = 'time-out', vrijgegeven = now() where id = 6`)
	wantText(t, "fout show 6", masked(mustCLI(t, c, "fout", "show", "6")), `handeling   6
soort       VERHUIZING
registered  YYYY-MM-DD hh:mm:ss.fff
status      fout
personen    4
reason      time-out
released    YYYY-MM-DD hh:mm:ss.fff
holds back  0 waiting handeling(en)

history (1)
  YYYY-MM-DD hh:mm:ss.fff  retry by alice: eerste poging

commands
  note: 1 later handeling(en) of its persons are already in levering or geleverd;
  a retry delivers this one after them.
  publicatie fout retry 6 --door NAME --note TEXT
`)

	// Not in fout: no reason, no release, no commands. Fout 1 holds back more than the 10
	// listed once person 1 has twelve more.
	var hs []load.Handeling
	for i := range int64(12) {
		hs = append(hs, load.Handeling{ID: 300 + i, Soort: "GEBOORTE", Tsreg: time.Now(), Personen: []int64{1}})
	}
	if err := load.Insert(context.Background(), db, hs); err != nil {
		t.Fatal(err)
	}
	wantText(t, "fout show 3", masked(mustCLI(t, c, "fout", "show", "3")), `handeling   3
soort       VERHUIZING
registered  YYYY-MM-DD hh:mm:ss.fff
status      in_levering
personen    2
holds back  0 waiting handeling(en)

history (0)
`)
	out := masked(mustCLI(t, c, "fout", "show", "1"))
	if !strings.Contains(out, "holds back  13 waiting handeling(en)\n  2 HUWELIJK, registered YYYY-MM-DD hh:mm:ss.fff\n") ||
		strings.Count(out, ", registered ") != 10 || !strings.Contains(out, "  ... 3 more\n") {
		t.Errorf("fout show 1 with 13 held back:\n%s", out)
	}
	mustCLI(t, c, "fout", "retry", "1", "--door", "bob")
	if out := mustCLI(t, c, "fout", "show", "1"); !strings.Contains(out, "status      te leveren (NULL)\npersonen    1\nholds back") {
		t.Errorf("fout show 1 after a retry:\n%s", out)
	}

	out, err := cli(t, c, "fout", "show", "999")
	if !errors.Is(err, operate.ErrNotFound) || errors.Is(err, operate.ErrUsage) || out != "" {
		t.Errorf("fout show 999: %v, output %q; want ErrNotFound and no usage error", err, out)
	}
}

func TestCLIRetryAndRelease(t *testing.T) {
	db, _ := brptest.DB(t)
	craft(t, db)
	c := operate.CLI{DB: db, Config: operate.OverviewConfig{Layout: brptest.Layout()}, Actor: "from-env"}
	// Flags before or after the ID; --door defaults to CLI.Actor.
	wantText(t, "retry", mustCLI(t, c, "fout", "retry", "--note", "afnemer hersteld", "1", "--door", "alice"),
		"handeling 1 retried by alice: it is te leveren again; the publisher delivers it in its place.\n")
	wantText(t, "release", mustCLI(t, c, "fout", "release", "15"),
		"handeling 15 released by from-env: it stays fout; later handelingen of its persons may pass it now.\n")
	if a := audit(t, db, 1); len(a) != 1 || a[0].Kind != "retry" || a[0].By != "alice" || a[0].Note == nil || *a[0].Note != "afnemer hersteld" {
		t.Errorf("audit of 1: %+v", a)
	}
	if a := audit(t, db, 15); len(a) != 1 || a[0].Kind != "release" || a[0].By != "from-env" || a[0].Note != nil {
		t.Errorf("audit of 15: %+v", a)
	}
	if s := brptest.Status(t, db, 1); s != "" {
		t.Errorf("1 after retry is %q, want te leveren", s)
	}

	// Without a door (none given, none in the environment) nothing happens.
	for _, c := range []struct {
		cli  operate.CLI
		args []string
	}{
		{operate.CLI{DB: db, Config: operate.OverviewConfig{Layout: brptest.Layout()}}, []string{"fout", "retry", "9"}},
		{operate.CLI{DB: db, Config: operate.OverviewConfig{Layout: brptest.Layout()}, Actor: "from-env"}, []string{"fout", "release", "9", "--door", " "}},
	} {
		out, err := cli(t, c.cli, c.args...)
		if !errors.Is(err, operate.ErrUsage) || !errors.Is(err, operate.ErrActorRequired) || out != "" ||
			!strings.Contains(err.Error(), "--door NAME is required") {
			t.Errorf("%v without a door: %v, output %q; want a usage error wrapping ErrActorRequired", c.args, err, out)
		}
	}
	// Refusals of the actions are not usage errors.
	for _, c := range []struct {
		args []string
		want error
	}{
		{[]string{"fout", "retry", "3", "--door", "a"}, operate.ErrNotFout},
		{[]string{"fout", "retry", "999", "--door", "a"}, operate.ErrNotFound},
		{[]string{"fout", "release", "15", "--door", "a"}, operate.ErrAlreadyReleased},
	} {
		out, err := cli(t, operate.CLI{DB: db, Config: operate.OverviewConfig{Layout: brptest.Layout()}}, c.args...)
		if !errors.Is(err, c.want) || errors.Is(err, operate.ErrUsage) || out != "" {
			t.Errorf("%v: %v, output %q; want %v", c.args, err, out, c.want)
		}
	}
	if a := audit(t, db, 9); len(a) != 0 || brptest.Status(t, db, 9) != "fout" {
		t.Errorf("refused commands changed 9: audit %+v, status %q", a, brptest.Status(t, db, 9))
	}
}

func TestCLIUsage(t *testing.T) {
	db, _ := brptest.DB(t)
	craft(t, db)
	c := operate.CLI{DB: db, Config: operate.OverviewConfig{Layout: brptest.Layout()}, Actor: "someone"}
	for _, tc := range []struct {
		args []string
		says string
	}{
		{nil, "no command"},
		{[]string{"bogus"}, `unknown command "bogus"`},
		{[]string{"status", "extra"}, `status: unexpected argument "extra"`},
		{[]string{"status", "--bogus"}, "status: flag provided but not defined: -bogus"},
		{[]string{"fout"}, "fout: missing list, show, retry or release"},
		{[]string{"fout", "bogus"}, `fout: unknown command "bogus" (want list, show, retry or release)`},
		{[]string{"fout", "list", "extra"}, `fout list: unexpected argument "extra"`},
		{[]string{"fout", "list", "--limit", "x"}, `fout list: invalid value "x" for flag -limit`},
		{[]string{"fout", "list", "--limit=0"}, "fout list: --limit must be positive"},
		{[]string{"fout", "show"}, "fout show: want 1 argument (ID), got 0"},
		{[]string{"fout", "show", "1", "2"}, "fout show: want 1 argument (ID), got 2"},
		{[]string{"fout", "show", "abc"}, `fout show: ID must be a handeling id (a number), not "abc"`},
		{[]string{"fout", "retry", "x", "--door", "a"}, `fout retry: ID must be a handeling id (a number), not "x"`},
		{[]string{"fout", "retry", "1", "--door"}, "fout retry: flag needs an argument: -door"},
		{[]string{"fout", "release", "9", "--bogus"}, "fout release: flag provided but not defined: -bogus"},
	} {
		out, err := cli(t, c, tc.args...)
		if !errors.Is(err, operate.ErrUsage) || out != "" {
			t.Errorf("%q: %v, output %q; want a usage error", tc.args, err, out)
			continue
		}
		if msg := err.Error(); !strings.HasPrefix(msg, "bad usage: "+tc.says) || !strings.HasSuffix(msg, "\nusage:\n"+usageText) {
			t.Errorf("%q says:\n%s\nwant %q, then the usage", tc.args, msg, tc.says)
		}
	}
	if a := audit(t, db, 1); len(a) != 0 {
		t.Errorf("usage errors changed something: %+v", a)
	}
	// -h writes the usage and runs nothing.
	for _, args := range [][]string{{"status", "-h"}, {"fout", "show", "--help"}, {"fout", "retry", "1", "-h"}, {"fout", "list", "-help"}} {
		if out := mustCLI(t, c, args...); out != "usage:\n"+usageText+"\n" {
			t.Errorf("%q wrote:\n%s", args, out)
		}
	}
	if a := audit(t, db, 1); len(a) != 0 {
		t.Errorf("-h ran the command: %+v", a)
	}
}

// usageText is the usage after its first line.
const usageText = `  publicatie status                                      the publication at a glance
  publicatie fout list [--limit N]                       fout handelingen, newest first (default 200)
  publicatie fout show ID                                reason, persons, history, what it holds back
  publicatie fout retry ID [--door NAME] [--note TEXT]   deliver it again, in its place
  publicatie fout release ID [--door NAME] [--note TEXT] let its persons' later handelingen pass it
  publicatie fout retry|release SELECTION [--dry-run] [--door NAME] [--note TEXT]
                                                         the same for every fout handeling selected
--door names who acts (recorded in admhnd_beheer); default $SUDO_USER, else $USER.
SELECTION is --all, or any of --reason TEXT (the foutreden contains it, in any case),
--since TIME and --until TIME (tsreg from, before; RFC 3339 or YYYY-MM-DD[THH:MM:SS], local
time), --person ID; together they narrow it. --dry-run says how many and which first, and
changes nothing. Each handeling gets its own audit row; the change goes in transactions of 1000.`

// Text from the database cannot steer the operator's terminal.
func TestCLIWritesNoControlCharacters(t *testing.T) {
	db, _ := brptest.DB(t)
	hs := []load.Handeling{
		{ID: 1, Soort: "OVER\x1b[2JLIJDEN", Tsreg: time.Now().Add(-time.Minute), Personen: []int64{1}},
		{ID: 2, Soort: "GEBOORTE\r", Tsreg: time.Now(), Personen: []int64{1}},
	}
	if err := load.Insert(context.Background(), db, hs); err != nil {
		t.Fatal(err)
	}
	sqlExec(t, db, `update admhnd set statuslev = 'fout', foutreden = E'afge\nwezen\x07' where id = 1`)
	sqlExec(t, db, `insert into publicatie_lease (cluster, holder, epoch, heartbeat, acquired)
		values ('default', E'host\b\b\bevil', 1, now(), now())`)
	c := operate.CLI{DB: db, Config: operate.OverviewConfig{Layout: brptest.Layout()}}
	mustCLI(t, c, "fout", "retry", "1", "--door", "mallory\x1b]0;", "--note", "note\x07")
	sqlExec(t, db, `update admhnd set statuslev = 'fout', foutreden = E'afge\nwezen\x07' where id = 1`)
	checkControl(t, c, []string{"status"}, "OVER [2JLIJDEN", "afge wezen ", "host   evil leads")
	checkControl(t, c, []string{"fout", "list"}, "OVER [2JLIJDEN", "afge wezen ")
	checkControl(t, c, []string{"fout", "show", "1"}, "soort       OVER [2JLIJDEN\n", "reason      afge wezen \n", "GEBOORTE , registered", "retry by mallory ]0;: note \n")
}

func checkControl(t *testing.T, c operate.CLI, args []string, want ...string) {
	t.Helper()
	out := mustCLI(t, c, args...)
	for _, r := range out {
		if r != '\n' && unicode.IsControl(r) {
			t.Errorf("%q writes control character %U:\n%q", args, r, out)
		}
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("%q does not write %q:\n%s", args, w, out)
		}
	}
}
