package operate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/brp/levering/handeling"
	"github.com/brp/levering/internal/brptest"
	"github.com/brp/levering/internal/load"
	"github.com/brp/levering/operate"
	"github.com/brp/levering/operate/access"
)

// The crafted data set. tsreg is base + the number of seconds given, so (tsreg, id) order is
// the order below unless noted.
//
//	id  persons  soort       status                          blocks?
//	17  10       excluded    NULL (older than everything)    -
//	 1  1        HUWELIJK    fout, not released              person 1 (strict), waiting: 2
//	 2  1        HUWELIJK    NULL
//	 3  2        VERHUIZING  in_levering since 30s           person 2, waiting: 4
//	 4  2        VERHUIZING  NULL
//	 5  3        GEBOORTE    in_levering                     person 3, but nothing waits
//	 6  4        VERHUIZING  fout, released                  nobody (released)
//	 7  4        VERHUIZING  NULL
//	 9  5        OVERLIJDEN  fout, not released              person 5 waits only for excluded 8
//	 8  5        excluded    NULL
//	12  4        GEBOORTE    geleverd 5.5 minutes ago        (overtook fout 6)
//	10  9        GEBOORTE    geleverd 30 s ago
//	11  9        GEBOORTE    geleverd 20 s ago
//	13  9        GEBOORTE    geleverd 2 hours ago
//	14  6        GEBOORTE    NULL                            (no blocker)
//	15  7, 8     HUWELIJK    fout, not released              person 8 (strict), waiting: 16
//	16  8        HUWELIJK    NULL
const (
	reden1  = "afnemerindicatie ontbreekt voor persoon 1"
	reden15 = "persoon 8 niet gevonden"
)

func craft(t *testing.T, db *sqlx.DB) time.Time {
	t.Helper()
	ctx := context.Background()
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	at := func(s int) time.Time { return base.Add(time.Duration(s) * time.Second) }
	hs := []load.Handeling{
		{ID: 17, Soort: load.ExcludedSoort, Tsreg: at(0), Personen: []int64{10}},
		{ID: 1, Soort: "HUWELIJK", Tsreg: at(1), Personen: []int64{1}},
		{ID: 2, Soort: "HUWELIJK", Tsreg: at(2), Personen: []int64{1}},
		{ID: 3, Soort: "VERHUIZING", Tsreg: at(3), Personen: []int64{2}},
		{ID: 4, Soort: "VERHUIZING", Tsreg: at(4), Personen: []int64{2}},
		{ID: 5, Soort: "GEBOORTE", Tsreg: at(5), Personen: []int64{3}},
		{ID: 6, Soort: "VERHUIZING", Tsreg: at(6), Personen: []int64{4}},
		{ID: 7, Soort: "VERHUIZING", Tsreg: at(7), Personen: []int64{4}},
		{ID: 9, Soort: "OVERLIJDEN", Tsreg: at(8), Personen: []int64{5}},
		{ID: 8, Soort: load.ExcludedSoort, Tsreg: at(9), Personen: []int64{5}},
		{ID: 12, Soort: "GEBOORTE", Tsreg: at(10), Personen: []int64{4}},
		{ID: 10, Soort: "GEBOORTE", Tsreg: at(11), Personen: []int64{9}},
		{ID: 11, Soort: "GEBOORTE", Tsreg: at(12), Personen: []int64{9}},
		{ID: 13, Soort: "GEBOORTE", Tsreg: at(13), Personen: []int64{9}},
		{ID: 14, Soort: "GEBOORTE", Tsreg: at(14), Personen: []int64{6}},
		{ID: 15, Soort: "HUWELIJK", Tsreg: at(15), Personen: []int64{7, 8}},
		{ID: 16, Soort: "HUWELIJK", Tsreg: at(16), Personen: []int64{8}},
	}
	if err := load.Insert(ctx, db, hs); err != nil {
		t.Fatal(err)
	}
	sqlExec(t, db, `update admhnd set statuslev = 'fout', foutreden = $2, tspub = now() - interval '1 hour' where id = $1`, 1, reden1)
	sqlExec(t, db, `update admhnd set statuslev = 'in_levering', tspub = now() - interval '30 seconds' where id = 3`)
	sqlExec(t, db, `update admhnd set statuslev = 'in_levering', tspub = now() where id = 5`)
	sqlExec(t, db, `update admhnd set statuslev = 'fout', foutreden = 'time-out', vrijgegeven = now() where id = 6`)
	sqlExec(t, db, `update admhnd set statuslev = 'fout', foutreden = 'afgewezen' where id = 9`)
	sqlExec(t, db, `update admhnd set statuslev = 'geleverd', tslev = now() - interval '330 seconds' where id = 12`)
	sqlExec(t, db, `update admhnd set statuslev = 'geleverd', tslev = now() - interval '30 seconds' where id = 10`)
	sqlExec(t, db, `update admhnd set statuslev = 'geleverd', tslev = now() - interval '20 seconds' where id = 11`)
	sqlExec(t, db, `update admhnd set statuslev = 'geleverd', tslev = now() - interval '2 hours' where id = 13`)
	sqlExec(t, db, `update admhnd set statuslev = 'fout', foutreden = $2 where id = $1`, 15, reden15)
	sqlExec(t, db, `insert into publicatie_lease (cluster, holder, epoch, heartbeat, acquired)
		values ('default', 'host-a-123', 3, now() - interval '2 seconds', now() - interval '1 hour')`)
	return base
}

func sqlExec(t *testing.T, db *sqlx.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.Exec(q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func persons(bs []operate.BlockedPerson) []int64 {
	var out []int64
	for _, b := range bs {
		out = append(out, b.PersoonID)
	}
	return out
}

func TestOverviewStrict(t *testing.T) {
	db, _ := brptest.DB(t)
	base := craft(t, db)
	o, err := operate.ReadOverview(context.Background(), db, operate.OverviewConfig{Layout: brptest.Layout()})
	if err != nil {
		t.Fatal(err)
	}
	if o.Cluster != "default" || o.FoutPolicy != "strict" || !slices.Equal(o.Excluded, brptest.Layout().DefaultExcluded()) {
		t.Errorf("defaults: cluster %q policy %q excluded %v", o.Cluster, o.FoutPolicy, o.Excluded)
	}
	if d := time.Since(o.GeneratedAt); d < -time.Minute || d > time.Minute {
		t.Errorf("generated at %v, not the database's now", o.GeneratedAt)
	}
	// Backlog: 2, 4, 7, 14, 16; the excluded 8 and 17 do not count.
	if o.Backlog != 5 || o.InLevering != 2 || o.Fout != 4 || o.Geleverd != 4 {
		t.Errorf("counts: backlog %d in_levering %d fout %d geleverd %d, want 5 2 4 4", o.Backlog, o.InLevering, o.Fout, o.Geleverd)
	}
	want := []int64{0, 0, 0, 0, 1, 0, 0, 0, 0, 2}
	if !slices.Equal(o.DeliveredPerMinute, want) || o.DeliveredLastMinute != 2 {
		t.Errorf("per minute %v (last %d), want %v (last 2)", o.DeliveredPerMinute, o.DeliveredLastMinute, want)
	}
	// The oldest undelivered is 2, not the excluded 17 nor the fout 1.
	if o.Oldest == nil || o.Oldest.ID != 2 || o.Oldest.Statuslev != "" || !o.Oldest.Tsreg.Equal(base.Add(2*time.Second)) {
		t.Fatalf("oldest %+v, want handeling 2", o.Oldest)
	}
	if o.Oldest.AgeSeconds < 3500 || o.Oldest.AgeSeconds > 3700 {
		t.Errorf("oldest age %v s, want about an hour", o.Oldest.AgeSeconds)
	}
	// Blocked: 1 (fout 1), 2 (in levering 3), 8 (fout 15); not 3 (nothing waits), 4 (released),
	// 5 (only an excluded one waits), 7 (nothing waits).
	if got := persons(o.Blocked); !slices.Equal(got, []int64{1, 2, 8}) || o.BlockedTotal != 3 {
		t.Fatalf("blocked %v (total %d), want [1 2 8]: %+v", got, o.BlockedTotal, o.Blocked)
	}
	b := o.Blocked
	if b[0].BlockingID != 1 || b[0].BlockingStatus != "fout" || b[0].Why != "fout: "+reden1 || b[0].Waiting != 1 {
		t.Errorf("person 1: %+v", b[0])
	}
	if b[1].BlockingID != 3 || b[1].BlockingStatus != "in_levering" || !strings.HasPrefix(b[1].Why, "in levering since 3") || b[1].Waiting != 1 {
		t.Errorf("person 2: %+v", b[1])
	}
	if b[2].BlockingID != 15 || b[2].Why != "fout: "+reden15 || b[2].Waiting != 1 {
		t.Errorf("person 8: %+v", b[2])
	}
	var ids []int64
	for _, f := range o.Fouten {
		ids = append(ids, f.ID)
	}
	if !slices.Equal(ids, []int64{15, 9, 6, 1}) {
		t.Errorf("fout list %v, want newest first [15 9 6 1]", ids)
	}
	if f := o.Fouten[0]; !slices.Equal(f.Personen, []int64{7, 8}) || f.Foutreden != reden15 || f.Vrijgegeven != nil || f.Soort != "HUWELIJK" {
		t.Errorf("fout 15: %+v", f)
	}
	if o.Fouten[2].Vrijgegeven == nil {
		t.Errorf("fout 6 should be released: %+v", o.Fouten[2])
	}
	if l := o.Lease; l.Cluster != "default" || l.Holder != "host-a-123" || l.Epoch != 3 || l.SecondsSinceActivity < 1 || l.SecondsSinceActivity > 30 {
		t.Errorf("lease %+v", l)
	}
}

func TestOverviewSkipAndOtherConfig(t *testing.T) {
	db, _ := brptest.DB(t)
	craft(t, db)
	ctx := context.Background()
	o, err := operate.ReadOverview(ctx, db, operate.OverviewConfig{Layout: brptest.Layout(), FoutPolicy: "skip", Cluster: "other"})
	if err != nil {
		t.Fatal(err)
	}
	// Under skip only the in_levering handeling 3 holds anyone up.
	if got := persons(o.Blocked); !slices.Equal(got, []int64{2}) || o.BlockedTotal != 1 {
		t.Errorf("skip: blocked %v, want [2]", got)
	}
	if l := o.Lease; l.Cluster != "other" || l.Holder != "" || l.Epoch != 0 || l.SecondsSinceActivity != -1 {
		t.Errorf("lease of a cluster without a row: %+v", l)
	}
	// Excluding nothing: the excluded soort's 8 and 17 are backlog, 17 is the oldest and
	// person 5 now waits behind fout 9.
	o, err = operate.ReadOverview(ctx, db, operate.OverviewConfig{Layout: brptest.Layout(), Excluded: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	wantBacklog, wantOldest, wantBlocked := int64(7), int64(17), []int64{1, 2, 5, 8}
	if brptest.Layout() == handeling.Kern {
		// Bijhouding registers soort 37 as niet leveren (status 2): never backlog, never
		// blocking, whatever is excluded.
		wantBacklog, wantOldest, wantBlocked = 5, 2, []int64{1, 2, 8}
	}
	if o.Backlog != wantBacklog || o.Oldest == nil || o.Oldest.ID != wantOldest {
		t.Errorf("nothing excluded: backlog %d oldest %+v, want %d and %d", o.Backlog, o.Oldest, wantBacklog, wantOldest)
	}
	if got := persons(o.Blocked); !slices.Equal(got, wantBlocked) {
		t.Errorf("nothing excluded: blocked %v, want %v", got, wantBlocked)
	}
	if _, err := operate.ReadOverview(ctx, db, operate.OverviewConfig{Layout: brptest.Layout(), FoutPolicy: "lenient"}); !errors.Is(err, operate.ErrConfig) {
		t.Errorf("bad policy: %v, want ErrConfig", err)
	}
}

func TestOverviewEmpty(t *testing.T) {
	db, _ := brptest.DB(t)
	o, err := operate.ReadOverview(context.Background(), db, operate.OverviewConfig{Layout: brptest.Layout()})
	if err != nil {
		t.Fatal(err)
	}
	if o.Backlog != 0 || o.Oldest != nil || len(o.Blocked) != 0 || len(o.Fouten) != 0 || len(o.DeliveredPerMinute) != 10 || o.Lease.SecondsSinceActivity != -1 {
		t.Errorf("empty database: %+v", o)
	}
}

// recorded is a row of admhnd_beheer, read by the tests.
type recorded struct {
	Kind string  `db:"actie"`
	By   string  `db:"door"`
	Note *string `db:"toelichting"`
}

func audit(t *testing.T, db *sqlx.DB, id int64) []recorded {
	t.Helper()
	var out []recorded
	if err := db.Select(&out, `select actie, door, toelichting from admhnd_beheer where admhnd_id = $1 order by id`, id); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestRetry(t *testing.T) {
	db, _ := brptest.DB(t)
	craft(t, db)
	ctx := context.Background()
	if err := operate.Retry(ctx, db, brptest.Layout(), 1, "alice", "afnemer hersteld"); err != nil {
		t.Fatal(err)
	}
	var row struct {
		Statuslev, Foutreden, Vrijgegeven, Tspub *string
	}
	if err := db.Get(&row, `select statuslev, foutreden, vrijgegeven::text, tspub::text from admhnd where id = 1`); err != nil {
		t.Fatal(err)
	}
	if row.Statuslev != nil || row.Foutreden != nil || row.Vrijgegeven != nil || row.Tspub != nil {
		t.Errorf("after retry: %+v, want all NULL", row)
	}
	if a := audit(t, db, 1); len(a) != 1 || a[0].Kind != "retry" || a[0].By != "alice" || a[0].Note == nil || *a[0].Note != "afnemer hersteld" {
		t.Errorf("audit %+v", a)
	}
	// Handeling 1 is backlog again and the oldest undelivered; person 1 is no longer blocked.
	o, err := operate.ReadOverview(ctx, db, operate.OverviewConfig{Layout: brptest.Layout()})
	if err != nil {
		t.Fatal(err)
	}
	if o.Backlog != 6 || o.Fout != 3 || o.Oldest.ID != 1 || slices.Contains(persons(o.Blocked), 1) {
		t.Errorf("after retry: backlog %d fout %d oldest %d blocked %v", o.Backlog, o.Fout, o.Oldest.ID, persons(o.Blocked))
	}
	// A released fout handeling loses its release on retry.
	if err := operate.Retry(ctx, db, brptest.Layout(), 6, "alice", ""); err != nil {
		t.Fatal(err)
	}
	var released bool
	if err := db.Get(&released, `select vrijgegeven is not null from admhnd where id = 6`); err != nil || released {
		t.Errorf("6 still released after retry (%v)", err)
	}

	for _, c := range []struct {
		id   int64
		door string
		want error
	}{
		{1, "alice", operate.ErrNotFout},  // retried already: NULL
		{3, "alice", operate.ErrNotFout},  // in_levering
		{10, "alice", operate.ErrNotFout}, // geleverd
		{999, "alice", operate.ErrNotFound},
		{9, " ", operate.ErrActorRequired},
	} {
		if err := operate.Retry(ctx, db, brptest.Layout(), c.id, c.door, ""); !errors.Is(err, c.want) {
			t.Errorf("retry %d by %q: %v, want %v", c.id, c.door, err, c.want)
		}
	}
	if a := audit(t, db, 9); len(a) != 0 || brptest.Status(t, db, 9) != "fout" {
		t.Errorf("refused retry changed something: audit %+v status %s", a, brptest.Status(t, db, 9))
	}
}

func TestRelease(t *testing.T) {
	db, _ := brptest.DB(t)
	craft(t, db)
	ctx := context.Background()
	if err := operate.Release(ctx, db, brptest.Layout(), 15, "bob", ""); err != nil {
		t.Fatal(err)
	}
	var released bool
	if err := db.Get(&released, `select vrijgegeven is not null from admhnd where id = 15 and statuslev = 'fout'`); err != nil || !released {
		t.Fatalf("15 not released and fout: %v", err)
	}
	if a := audit(t, db, 15); len(a) != 1 || a[0].Kind != "release" || a[0].By != "bob" || a[0].Note != nil {
		t.Errorf("audit %+v", a)
	}
	o, err := operate.ReadOverview(ctx, db, operate.OverviewConfig{Layout: brptest.Layout()})
	if err != nil {
		t.Fatal(err)
	}
	if got := persons(o.Blocked); !slices.Equal(got, []int64{1, 2}) || o.Fout != 4 {
		t.Errorf("after release: blocked %v fout %d, want [1 2] and 4", got, o.Fout)
	}
	for _, c := range []struct {
		id   int64
		door string
		want error
	}{
		{15, "bob", operate.ErrAlreadyReleased},
		{6, "bob", operate.ErrAlreadyReleased},
		{2, "bob", operate.ErrNotFout},
		{999, "bob", operate.ErrNotFound},
		{9, "", operate.ErrActorRequired},
	} {
		if err := operate.Release(ctx, db, brptest.Layout(), c.id, c.door, "x"); !errors.Is(err, c.want) {
			t.Errorf("release %d by %q: %v, want %v", c.id, c.door, err, c.want)
		}
	}
	if a := audit(t, db, 15); len(a) != 1 {
		t.Errorf("refused release wrote audit rows: %+v", a)
	}
}

func TestListAndShowFout(t *testing.T) {
	db, _ := brptest.DB(t)
	craft(t, db)
	ctx := context.Background()
	fs, err := operate.ListFout(ctx, db, brptest.Layout(), 2)
	if err != nil || len(fs) != 2 || fs[0].ID != 15 || fs[1].ID != 9 {
		t.Fatalf("list 2: %+v %v", fs, err)
	}
	if fs, err := operate.ListFout(ctx, db, brptest.Layout(), 0); err != nil || len(fs) != 4 {
		t.Fatalf("list all: %d %v", len(fs), err)
	}

	d, err := operate.ShowFout(ctx, db, 15, operate.OverviewConfig{Layout: brptest.Layout()})
	if err != nil {
		t.Fatal(err)
	}
	if d.Statuslev != "fout" || d.Foutreden != reden15 || !slices.Equal(d.Personen, []int64{7, 8}) || d.Vrijgegeven != nil {
		t.Errorf("show 15: %+v", d)
	}
	if len(d.HeldBack) != 1 || d.HeldBack[0].ID != 16 || d.HeldBackTotal != 1 || d.Overtaken != 0 || len(d.Audit) != 0 {
		t.Errorf("show 15: held back %+v (%d) overtaken %d audit %+v", d.HeldBack, d.HeldBackTotal, d.Overtaken, d.Audit)
	}
	// Under skip it holds nothing back.
	if d, err := operate.ShowFout(ctx, db, 15, operate.OverviewConfig{Layout: brptest.Layout(), FoutPolicy: "skip"}); err != nil || len(d.HeldBack) != 0 {
		t.Errorf("show 15 under skip: %+v %v", d.HeldBack, err)
	}
	// 6 is released (holds nothing back) and was overtaken by the geleverd 12.
	d, err = operate.ShowFout(ctx, db, 6, operate.OverviewConfig{Layout: brptest.Layout()})
	if err != nil || len(d.HeldBack) != 0 || d.Overtaken != 1 || d.Vrijgegeven == nil {
		t.Errorf("show 6: %+v %v", d, err)
	}
	// 9 waits only for an excluded handeling.
	if d, err := operate.ShowFout(ctx, db, 9, operate.OverviewConfig{Layout: brptest.Layout()}); err != nil || d.HeldBackTotal != 0 {
		t.Errorf("show 9: %+v %v", d, err)
	}
	// After a retry the history is still there.
	if err := operate.Retry(ctx, db, brptest.Layout(), 15, "carol", "opnieuw"); err != nil {
		t.Fatal(err)
	}
	d, err = operate.ShowFout(ctx, db, 15, operate.OverviewConfig{Layout: brptest.Layout()})
	if err != nil || d.Statuslev != "" || len(d.Audit) != 1 || d.Audit[0].By != "carol" || d.Audit[0].Note != "opnieuw" || len(d.HeldBack) != 0 {
		t.Errorf("show 15 after retry: %+v %v", d, err)
	}
	if _, err := operate.ShowFout(ctx, db, 999, operate.OverviewConfig{Layout: brptest.Layout()}); !errors.Is(err, operate.ErrNotFound) {
		t.Errorf("show 999: %v, want ErrNotFound", err)
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// servePages serves the operator pages behind a guard that lets everyone in as a nameless
// operator (the guard is access's to test) and returns the server and the pages' log.
func servePages(t *testing.T, db *sqlx.DB, leader func() (string, bool)) (*httptest.Server, *bytes.Buffer) {
	t.Helper()
	var log bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&log, nil))
	g, err := access.New(access.Config{Anonymous: true}, logger)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g.Wrap(operate.Handler(db, operate.OverviewConfig{Layout: brptest.Layout()}, leader, logger)))
	t.Cleanup(srv.Close)
	return srv, &log
}

func TestHandlerServesOnlyBehindAGuard(t *testing.T) {
	db, _ := brptest.DB(t)
	craft(t, db)
	srv := httptest.NewServer(operate.Handler(db, operate.OverviewConfig{Layout: brptest.Layout()}, nil, slog.New(slog.DiscardHandler)))
	defer srv.Close()
	for _, path := range []string{"/", "/fout/1", "/overview.json"} {
		if code, body := get(t, srv.URL+path); code != http.StatusForbidden || strings.Contains(body, reden1) {
			t.Errorf("GET %s without a guard: %d %q, want 403", path, code, body)
		}
	}
}

func TestHandler(t *testing.T) {
	db, _ := brptest.DB(t)
	craft(t, db)
	srv, log := servePages(t, db, func() (string, bool) { return "host-a-123", true })

	for _, path := range []string{"/", "/status.html"} {
		code, body := get(t, srv.URL+path)
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d\n%s", path, code, body)
		}
		for _, want := range []string{
			`<meta http-equiv="refresh" content="5">`,
			`href="/fout/15"`, reden15, "afnemerindicatie ontbreekt voor persoon 1",
			"publicatie fout retry 1 --door NAME", "publicatie fout release 1 --door NAME",
			"publicatie fout retry 6 --door NAME", "host-a-123", "leads", "in levering since",
		} {
			if !strings.Contains(body, want) {
				t.Errorf("GET %s lacks %q", path, want)
			}
		}
		// 6 is released already: no release command for it.
		if strings.Contains(body, "publicatie fout release 6 ") {
			t.Errorf("GET %s offers to release the released 6", path)
		}
	}

	code, body := get(t, srv.URL+"/fout/15")
	if code != http.StatusOK || !strings.Contains(body, reden15) || !strings.Contains(body, "<td>16</td>") ||
		!strings.Contains(body, "publicatie fout release 15 --door NAME") {
		t.Errorf("GET /fout/15: %d\n%s", code, body)
	}
	if code, _ := get(t, srv.URL+"/fout/999"); code != http.StatusNotFound {
		t.Errorf("GET /fout/999: %d, want 404", code)
	}
	if code, _ := get(t, srv.URL+"/fout/abc"); code != http.StatusBadRequest {
		t.Errorf("GET /fout/abc: %d, want 400", code)
	}
	if code, _ := get(t, srv.URL+"/nope"); code != http.StatusNotFound {
		t.Errorf("GET /nope: %d, want 404", code)
	}

	code, body = get(t, srv.URL+"/overview.json")
	if code != http.StatusOK {
		t.Fatalf("GET /overview.json: %d %s", code, body)
	}
	var raw map[string]any
	if err := json.Unmarshal([]byte(body), &raw); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"generated_at", "backlog", "in_levering", "geleverd", "delivered_last_minute",
		"delivered_per_minute", "delivery_delay", "fout", "held_behind_fout", "held_behind_fout_personen", "future",
		"first_future", "oldest_undelivered", "blocked", "blocked_total", "fouten", "lease"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("overview.json lacks %q", k)
		}
	}
	var o operate.Overview
	if err := json.Unmarshal([]byte(body), &o); err != nil || o.Backlog != 5 || o.Lease.Holder != "host-a-123" || o.Oldest.ID != 2 {
		t.Errorf("overview.json: %+v %v", o, err)
	}
	if !strings.Contains(body, `"seconds_since_activity"`) || !strings.Contains(body, `"persoon_id"`) || !strings.Contains(body, `"foutreden"`) {
		t.Errorf("overview.json keys are not snake_case:\n%s", body)
	}

	// Every page served is recorded: who, which page, which handeling, nothing else.
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(log.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if m["msg"] == "operator page viewed" {
			delete(m, "time")
			delete(m, "remote_addr")
			lines = append(lines, m)
		}
	}
	want := []string{"status 200", "status 200", "fout 15 200", "fout 999 404", "overview.json 200"}
	if len(lines) != len(want) {
		t.Fatalf("%d audit lines, want %d (%v):\n%s", len(lines), len(want), want, log)
	}
	for i, m := range lines {
		got := fmt.Sprint(m["page"])
		if id, ok := m["admhnd_id"]; ok {
			got += fmt.Sprint(" ", id)
		}
		got += fmt.Sprint(" ", m["status"])
		keys := 6 // level, msg, operator, auth, page, status
		if _, ok := m["admhnd_id"]; ok {
			keys++
		}
		if got != want[i] || m["level"] != "INFO" || m["operator"] != "" || m["auth"] != "none" || len(m) != keys {
			t.Errorf("audit line %d: %v, want %s by the nameless operator and no other keys", i, m, want[i])
		}
	}
}

func TestHandlerEscapes(t *testing.T) {
	db, _ := brptest.DB(t)
	ctx := context.Background()
	if err := load.Insert(ctx, db, []load.Handeling{
		{ID: 1, Soort: `<b>SOORT</b>`, Tsreg: time.Now().Add(-time.Minute), Personen: []int64{1}},
		{ID: 2, Soort: "GEBOORTE", Tsreg: time.Now(), Personen: []int64{1}},
	}); err != nil {
		t.Fatal(err)
	}
	const evil = `<script>alert("pwned")</script>`
	sqlExec(t, db, `update admhnd set statuslev = 'fout', foutreden = $1 where id = 1`, evil)
	srv, _ := servePages(t, db, nil)
	for _, path := range []string{"/", "/fout/1"} {
		code, body := get(t, srv.URL+path)
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d", path, code)
		}
		if strings.Contains(body, "<script") || strings.Contains(body, "<b>SOORT") {
			t.Errorf("GET %s: unescaped markup from the database:\n%s", path, body)
		}
		if !strings.Contains(body, "&lt;script&gt;alert(&#34;pwned&#34;)&lt;/script&gt;") {
			t.Errorf("GET %s: escaped foutreden missing:\n%s", path, body)
		}
	}
	resp, err := http.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
}

func TestFormatAge(t *testing.T) {
	for s, want := range map[float64]string{-1: "never", 0.25: "250ms", 42.9: "42s", 185: "3m05s", 7620: "2h07m", 273600: "3d04h"} {
		if got := operate.FormatAge(s); got != want {
			t.Errorf("FormatAge(%v) = %q, want %q", s, got, want)
		}
	}
}

// The words for why a transaction holds the horizon; a young one's registering is not looked
// up (publicatie_horizon says null), so its words say what either case means.
func TestHoldingWords(t *testing.T) {
	yes, no := true, false
	for _, c := range []struct {
		t    operate.HorizonTransaction
		want string
	}{
		{operate.HorizonTransaction{Bulk: true, Registers: &yes}, "a bulk writer (linked more than 16 persons): holds it until it ends"},
		{operate.HorizonTransaction{}, "begun under a second ago: holds it for 1s, for 2s at most if it registers"},
		{operate.HorizonTransaction{Registers: &yes, State: "active"}, "registered handelingen: holds it while it runs a statement, else for 2s at most"},
		{operate.HorizonTransaction{Registers: &yes, State: "idle in transaction"}, "registered handelingen: holds it for 2s at most"},
		{operate.HorizonTransaction{Registers: &no, State: "active"}, "registered nothing yet: holds it for 1s at most"},
	} {
		if got := c.t.Holding(2); got != c.want {
			t.Errorf("%+v: %q, want %q", c.t, got, c.want)
		}
	}
}

// Handelingen with a tsreg outside the accepted range (refused by the publisher, or not yet)
// can be listed and shown: their tsreg is shown clamped to the range.
func TestOddTsregIsListedAndShown(t *testing.T) {
	t.Parallel()
	db, _ := brptest.DB(t)
	db.MustExec(`insert into admhnd (id, soort, tsreg, statuslev, foutreden) values
		(1, 'GEBOORTE', '-infinity', 'fout', 'tsreg'), (2, 'GEBOORTE', '0044-03-15 BC', null, null),
		(3, 'GEBOORTE', 'infinity', 'fout', 'tsreg')`)
	db.MustExec(`insert into admhnd_persoon values (1, 10), (2, 10), (3, 30)`)
	ctx := context.Background()
	o, err := operate.ReadOverview(ctx, db, operate.OverviewConfig{Layout: brptest.Layout()})
	if err != nil || o.Oldest == nil || o.Oldest.ID != 2 || !o.Oldest.Tsreg.Equal(handeling.TsregFrom) {
		t.Fatalf("overview: %+v, %v", o.Oldest, err)
	}
	if _, err := json.Marshal(o); err != nil {
		t.Fatalf("overview as JSON: %v", err)
	}
	fs, err := operate.ListFout(ctx, db, brptest.Layout(), 0)
	if err != nil || len(fs) != 2 {
		t.Fatalf("list: %+v, %v", fs, err)
	}
	for _, id := range []int64{1, 3} {
		if _, err := operate.ShowFout(ctx, db, id, operate.OverviewConfig{Layout: brptest.Layout(), FoutPolicy: handeling.Strict}); err != nil {
			t.Fatalf("show %d: %v", id, err)
		}
	}
}

// The overview names the open transaction that holds the publisher's horizon, and how long: a
// report that writes its own tables holds it for a second only, a bijhouding transaction that
// registered a handeling for MaxWait (here the default, 2 s).
func TestOverviewNamesTheTransactionThatHoldsTheHorizon(t *testing.T) {
	t.Parallel()
	db, url := brptest.DB(t)
	ctx := context.Background()
	horizon := func() operate.Horizon {
		t.Helper()
		o, err := operate.ReadOverview(ctx, db, operate.OverviewConfig{Layout: brptest.Layout()})
		if err != nil {
			t.Fatal(err)
		}
		return o.Horizon
	}
	if h := horizon(); h.Holder != nil || h.MaxWaitSeconds != 2 || h.MaxLeadSeconds != 2 {
		t.Fatalf("horizon of an idle database: %+v", h)
	}
	other := func(app string) *sqlx.Tx {
		t.Helper()
		conn := sqlx.MustConnect("postgres", url+"&application_name="+app)
		t.Cleanup(func() { conn.Close() })
		tx := conn.MustBegin()
		t.Cleanup(func() { _ = tx.Rollback() })
		return tx
	}
	report := other("report")
	report.MustExec(`create temporary table r as select 1 as x`)
	h := horizon()
	if h.Holder == nil || h.Holder.ApplicationName != "report" || h.Holder.Registers != nil || h.Holder.PID == 0 || h.WaitSeconds < h.Holder.AgeSeconds {
		t.Fatalf("a report just begun: %+v (holder %+v)", h, h.Holder)
	}
	time.Sleep(1100 * time.Millisecond)
	if h := horizon(); h.Holder != nil {
		t.Fatalf("a report open past the grace still holds the horizon: %+v", h.Holder)
	}
	bijhouding := other("bijhouding")
	bijhouding.MustExec(`insert into admhnd (id, soort, tsreg) values (1, 'VERHUIZING', now())`)
	time.Sleep(1100 * time.Millisecond)
	if h := horizon(); h.Holder == nil || h.Holder.ApplicationName != "bijhouding" || h.Holder.Registers == nil || !*h.Holder.Registers || h.Holder.AgeSeconds < 1 {
		t.Fatalf("a registering transaction past the grace: %+v", h.Holder)
	}
	time.Sleep(time.Second)
	if h := horizon(); h.Holder != nil {
		t.Fatalf("a registering transaction open past MaxWait still holds the horizon: %+v", h.Holder)
	}
	bijhouding2 := other("bijhouding")
	bijhouding2.MustExec(`insert into admhnd (id, soort, tsreg) values (2, 'VERHUIZING', now())`)
	// The waits and ages are in ms below a second and in s from there: on a busy machine the
	// status may come a second after the registration, when the horizon has looked up that it
	// registers (before, a young transaction holds it whatever it does: migration 0023).
	out := mustCLI(t, operate.CLI{DB: db, Config: operate.OverviewConfig{Layout: brptest.Layout()}}, "status")
	if !regexp.MustCompile(`horizon +waits \d+m?s: lead margin 0ms \(at most 2s\), open transaction pid \d+ "bijhouding", idle in transaction for (\d+ms, begun under a second ago: holds it for 1s, for 2s at most if it registers|\d+s, registered handelingen: holds it for 2s at most)\n`).MatchString(out) {
		t.Fatalf("publicatie status does not name the transaction that holds the horizon:\n%s", out)
	}

	// Open writers (migration 0018): one linking two persons, and a bulk writer, which holds
	// the horizon past MaxWait.
	bijhouding2.MustExec(`insert into admhnd_persoon values (2, 10), (2, 20)`)
	bulk := other("load")
	bulk.MustExec(`insert into admhnd (id, soort, tsreg) values (3, 'VERHUIZING', now())`)
	bulk.MustExec(`insert into admhnd_persoon select 3, g from generate_series(100, 150) g`)
	time.Sleep(2100 * time.Millisecond)
	h = horizon()
	// The bulk writer linked its 51 persons in one statement: in the contract layout the trigger
	// sees them at once and takes 17 person locks and the bulk lock; in the kern layout the
	// test's compatibility layer writes one his row a statement: 16 person locks, then one
	// more and the bulk lock.
	persons := 2 + 17
	if ow := h.OpenWriters; ow.Transactions != 2 || ow.Persons != persons || ow.OldestSeconds < 2 {
		t.Fatalf("open writers %+v, want 2 transactions, %d persons, the oldest 2 s old", ow, persons)
	}
	if h.Holder == nil || h.Holder.ApplicationName != "load" || !h.Holder.Bulk {
		t.Fatalf("a bulk writer open past MaxWait: holder %+v, want it holding the horizon", h.Holder)
	}
	out = mustCLI(t, operate.CLI{DB: db, Config: operate.OverviewConfig{Layout: brptest.Layout()}}, "status")
	for _, want := range []string{`"load", idle in transaction for`, "a bulk writer (linked more than 16 persons): holds it until it ends",
		fmt.Sprintf("open writers        2 transactions linked handelingen to persons, %d persons' work waits for them", persons)} {
		if !strings.Contains(out, want) {
			t.Fatalf("publicatie status lacks %q:\n%s", want, out)
		}
	}
}
