package operate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/brp/levering/internal/brptest"
	"github.com/brp/levering/internal/load"
	"github.com/brp/levering/operate"
	"github.com/brp/levering/operate/access"
)

func ids(fs []operate.Fout) []int64 {
	out := []int64{}
	for _, f := range fs {
		out = append(out, f.ID)
	}
	return out
}

// A selection narrows by every field set; a dry run says how many and which, and changes
// nothing. craft's fout handelingen: 1 (reason1, person 1), 6 (time-out, released, person 4),
// 9 (afgewezen, person 5), 15 (reden15, persons 7 and 8).
func TestBulkSelection(t *testing.T) {
	t.Parallel()
	db, _ := brptest.DB(t)
	base := craft(t, db)
	at := func(s int) time.Time { return base.Add(time.Duration(s) * time.Second) }
	ctx := context.Background()
	for _, tc := range []struct {
		name         string
		sel          operate.Selection
		retry, relse []int64
	}{
		{"all", operate.Selection{All: true}, []int64{1, 6, 9, 15}, []int64{1, 9, 15}},
		{"reason in any case", operate.Selection{Reason: "PERSOON"}, []int64{1, 15}, []int64{1, 15}},
		{"tsreg range", operate.Selection{Since: at(6), Until: at(15)}, []int64{6, 9}, []int64{9}},
		{"person", operate.Selection{Person: 8}, []int64{15}, []int64{15}},
		{"fields together", operate.Selection{Person: 1, Reason: "afgewezen"}, []int64{}, []int64{}},
		{"all and a field", operate.Selection{All: true, Until: at(7)}, []int64{1, 6}, []int64{1}},
	} {
		r, err := operate.RetryMany(ctx, db, brptest.Layout(), tc.sel, "", "", true)
		if err != nil || !slices.Equal(ids(r.First), tc.retry) || r.Selected != int64(len(tc.retry)) || r.Done != 0 {
			t.Errorf("%s: retry dry run: %v (%d selected, %d done; %v), want %v", tc.name, ids(r.First), r.Selected, r.Done, err, tc.retry)
		}
		r, err = operate.ReleaseMany(ctx, db, brptest.Layout(), tc.sel, "", "", true)
		if err != nil || !slices.Equal(ids(r.First), tc.relse) || r.Selected != int64(len(tc.relse)) {
			t.Errorf("%s: release dry run: %v (%d; %v), want %v", tc.name, ids(r.First), r.Selected, err, tc.relse)
		}
	}
	for _, sel := range []operate.Selection{{}, {All: false}} {
		if _, err := operate.RetryMany(ctx, db, brptest.Layout(), sel, "a", "", false); !errors.Is(err, operate.ErrEmptySelection) {
			t.Errorf("retry of %+v: %v, want ErrEmptySelection", sel, err)
		}
	}
	if _, err := operate.RetryMany(ctx, db, brptest.Layout(), operate.Selection{All: true}, " ", "", false); !errors.Is(err, operate.ErrActorRequired) {
		t.Errorf("retry without a door: %v, want ErrActorRequired", err)
	}
	var n int
	if err := db.Get(&n, `select count(*) from admhnd_beheer`); err != nil || n != 0 {
		t.Errorf("dry runs and refusals wrote %d audit rows (%v)", n, err)
	}
	for _, id := range []int64{1, 6, 9, 15} {
		if s := brptest.Status(t, db, id); s != "fout" {
			t.Errorf("%d is %q after dry runs, want fout", id, s)
		}
	}
}

// A bulk retry and release change what the selection holds, each handeling with its own audit
// row, and leave alone what left fout (or was released) before they came to it.
func TestBulkRetryAndRelease(t *testing.T) {
	t.Parallel()
	db, _ := brptest.DB(t)
	craft(t, db)
	ctx := context.Background()
	r, err := operate.RetryMany(ctx, db, brptest.Layout(), operate.Selection{Reason: "persoon"}, "alice", "afnemer hersteld", false)
	if err != nil || r.Selected != 2 || r.Done != 2 || r.Batches != 1 {
		t.Fatalf("retry: %+v, %v; want 2 of 2 in 1 batch", r, err)
	}
	for id, want := range map[int64]string{1: "", 15: "", 6: "fout", 9: "fout"} {
		if s := brptest.Status(t, db, id); s != want {
			t.Errorf("%d after the retry is %q, want %q", id, s, want)
		}
	}
	for _, id := range []int64{1, 15} {
		if a := audit(t, db, id); len(a) != 1 || a[0].Kind != "retry" || a[0].By != "alice" || a[0].Note == nil || *a[0].Note != "afnemer hersteld" {
			t.Errorf("audit of %d: %+v", id, a)
		}
	}
	r, err = operate.ReleaseMany(ctx, db, brptest.Layout(), operate.Selection{All: true}, "bob", "", false)
	if err != nil || r.Selected != 1 || r.Done != 1 {
		t.Fatalf("release: %+v, %v; want 9 alone (6 was released already)", r, err)
	}
	var released bool
	if err := db.Get(&released, `select vrijgegeven is not null from admhnd where id = 9 and statuslev = 'fout'`); err != nil || !released {
		t.Errorf("9 not released and fout (%v)", err)
	}
	if a := audit(t, db, 9); len(a) != 1 || a[0].Kind != "release" || a[0].By != "bob" || a[0].Note != nil {
		t.Errorf("audit of 9: %+v", a)
	}
	if a := audit(t, db, 6); len(a) != 0 {
		t.Errorf("6, released before, got audit rows %+v", a)
	}
}

// More fout handelingen than a batch: every one retried, in transactions of BulkBatch.
func TestBulkRetryInBatches(t *testing.T) {
	t.Parallel()
	db, _ := brptest.DB(t)
	const n = 2*operate.BulkBatch + 500
	hs := load.Generate(load.Spec{N: n, Personen: 500, Seed: 49})
	if err := load.Insert(context.Background(), db, hs); err != nil {
		t.Fatal(err)
	}
	sqlExec(t, db, `update admhnd set statuslev = 'fout', foutreden = 'bulk' where soort <> $1`, load.ExcludedSoort)
	var fout int64
	if err := db.Get(&fout, `select count(*) from admhnd where statuslev = 'fout'`); err != nil {
		t.Fatal(err)
	}
	r, err := operate.RetryMany(context.Background(), db, brptest.Layout(), operate.Selection{All: true}, "carol", "", false)
	if err != nil || r.Selected != fout || r.Done != fout || r.Batches != int((fout+operate.BulkBatch-1)/operate.BulkBatch) {
		t.Fatalf("retry of %d: %+v, %v", fout, r, err)
	}
	var left, rows int64
	if err := db.QueryRow(`select (select count(*) from admhnd where statuslev = 'fout'),
		(select count(distinct admhnd_id) from admhnd_beheer where actie = 'retry' and door = 'carol')`).Scan(&left, &rows); err != nil {
		t.Fatal(err)
	}
	if left != 0 || rows != fout {
		t.Errorf("after the retry %d still fout, %d audit rows; want 0 and %d", left, rows, fout)
	}
}

func TestCLIBulk(t *testing.T) {
	t.Parallel()
	db, _ := brptest.DB(t)
	craft(t, db)
	c := operate.CLI{DB: db, Config: operate.OverviewConfig{Layout: brptest.Layout()}, Actor: "from-env"}
	out := masked(mustCLI(t, c, "fout", "retry", "--reason", "Persoon", "--dry-run"))
	want := `dry run: fout handelingen with reason containing "Persoon" would be retried: 2 (nothing changed)
the first 2 by id (fout show ID for persons and history):
  ID  SOORT     REGISTERED           RELEASED  REASON
  1   HUWELIJK  YYYY-MM-DD hh:mm:ss  no        afnemerindicatie ontbreekt voor persoon 1
  15  HUWELIJK  YYYY-MM-DD hh:mm:ss  no        persoon 8 niet gevonden
`
	wantText(t, "dry run", out, want)
	out = masked(mustCLI(t, c, "fout", "release", "--all", "--door", "dave", "--note", "known"))
	if !strings.HasPrefix(out, "every fout handeling: 3 of 3 released by dave, in 1 transactions.\n") {
		t.Errorf("release --all:\n%s", out)
	}
	if a := audit(t, db, 15); len(a) != 1 || a[0].Kind != "release" || a[0].By != "dave" {
		t.Errorf("audit of 15: %+v", a)
	}
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"fout", "retry"}, "fout retry: want an ID, or a selection: --all, --reason, --since, --until or --person"},
		{[]string{"fout", "retry", "1", "--all"}, "fout retry: give an ID or a selection (--all, --reason, --since, --until, --person), not both"},
		{[]string{"fout", "release", "1", "--dry-run"}, "fout release: give an ID or a selection"},
		{[]string{"fout", "retry", "--since", "yesterday"}, `fout retry: --since "yesterday" is not a time`},
		{[]string{"fout", "retry", "1", "2"}, "fout retry: want 0 or 1 argument (ID), got 2"},
	} {
		_, err := cli(t, c, tc.args...)
		if !errors.Is(err, operate.ErrUsage) || !strings.HasPrefix(err.Error(), "bad usage: "+tc.says) {
			t.Errorf("%q: %v, want a usage error saying %q", tc.args, err, tc.says)
		}
	}
}

// actionToken is the bearer token of operator beheerder-x in TestHandlerActions.
const actionToken = "0123456789abcdef0123456789abcdef"

// post sends body (contentType) to url, with a bearer token unless token is "", and returns
// the status and the decoded answer.
func post(t *testing.T, url, token, contentType, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// The operator API does what the CLI does, attributed to the authenticated operator, and
// logs the action with its count, never the persons.
func TestHandlerActions(t *testing.T) {
	t.Parallel()
	db, _ := brptest.DB(t)
	craft(t, db)
	var log bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&log, nil))
	g, err := access.New(access.Config{Tokens: map[string]string{"beheerder-x": actionToken}}, logger)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g.Wrap(operate.Handler(db, operate.OverviewConfig{Layout: brptest.Layout()}, nil, logger)))
	defer srv.Close()
	// An anonymous listener only shows: a dry run, no action.
	anon, _ := servePages(t, db, nil)
	if code, out := post(t, anon.URL+"/fout/retry", "", "application/json", `{"all": true}`); code != http.StatusForbidden {
		t.Errorf("anonymous retry: %d %v, want 403", code, out)
	}
	if code, out := post(t, anon.URL+"/fout/retry", "", "application/json", `{"all": true, "dry_run": true}`); code != http.StatusOK || out["selected"] != 4.0 {
		t.Errorf("anonymous dry run: %d %v, want 200 and 4 selected", code, out)
	}
	for _, tc := range []struct {
		path, ct, body string
		code           int
		says           string
	}{
		{"/fout/retry", "text/plain", `{"all": true}`, http.StatusUnsupportedMediaType, "application/json"},
		{"/fout/retry", "application/json", `{"all": true, "bogus": 1}`, http.StatusBadRequest, "unknown field"},
		{"/fout/retry", "application/json", `{}`, http.StatusBadRequest, "names nothing"},
		{"/fout/retry", "application/json", `{"id": 1, "all": true}`, http.StatusBadRequest, "not both"},
		{"/fout/retry", "application/json", `{"id": 999}`, http.StatusNotFound, "not found"},
		{"/fout/retry", "application/json", `{"id": 3}`, http.StatusConflict, "not in fout"},
		{"/fout/release", "application/json", `{"id": 6}`, http.StatusConflict, "released"},
	} {
		code, out := post(t, srv.URL+tc.path, actionToken, tc.ct, tc.body)
		if msg, _ := out["error"].(string); code != tc.code || !strings.Contains(msg, tc.says) {
			t.Errorf("POST %s %s: %d %v, want %d saying %q", tc.path, tc.body, code, out, tc.code, tc.says)
		}
	}
	code, out := post(t, srv.URL+"/fout/retry", actionToken, "application/json", `{"reason": "persoon", "dry_run": true}`)
	if code != http.StatusOK || out["selected"] != 2.0 || out["done"] != 0.0 || brptest.Status(t, db, 1) != "fout" {
		t.Fatalf("dry run: %d %v", code, out)
	}
	code, out = post(t, srv.URL+"/fout/retry", actionToken, "application/json", `{"reason": "persoon", "note": "hersteld"}`)
	if code != http.StatusOK || out["done"] != 2.0 || brptest.Status(t, db, 1) != "" || brptest.Status(t, db, 15) != "" {
		t.Fatalf("retry: %d %v", code, out)
	}
	code, out = post(t, srv.URL+"/fout/release", actionToken, "application/json", `{"id": 9}`)
	if code != http.StatusOK || out["done"] != 1.0 {
		t.Fatalf("release 9: %d %v", code, out)
	}
	if a := audit(t, db, 15); len(a) != 1 || a[0].Kind != "retry" || a[0].By != "beheerder-x" || a[0].Note == nil || *a[0].Note != "hersteld" {
		t.Errorf("audit of 15: %+v", a)
	}
	// The detail page shows the operator history now.
	if code, body := get(t, anon.URL+"/fout/9"); code != http.StatusOK || !strings.Contains(body, "<td>release</td><td>beheerder-x</td>") {
		t.Errorf("GET /fout/9: %d\n%s", code, body)
	}
	if !strings.Contains(log.String(), `"msg":"operator action"`) || strings.Contains(log.String(), `"persoon`) {
		t.Errorf("log:\n%s", log.String())
	}
}

// Past its budget a dear read gives way: the overview shows the leading publisher's count of
// what is held (labelled with when it counted), or says a number was not counted, and answers
// instead of timing out (issue 49: publicatie status failed with 100,000 held). The reads are
// made slow by the fault seam WithSlowReads; the database ends them at the budget.
func TestOverviewWithinBudget(t *testing.T) {
	t.Parallel()
	db, _ := brptest.DB(t)
	ctx := context.Background()
	craft(t, db)
	cfg := operate.OverviewConfig{Layout: brptest.Layout()}
	exact, err := operate.ReadOverview(ctx, db, cfg)
	if err != nil || exact.HeldCounted != operate.HeldExact || exact.BlockedOmitted || exact.Geleverd < 0 {
		t.Fatalf("within the budget: held %d (%s), blocked omitted %v, geleverd %d, %v",
			exact.HeldBehindFout, exact.HeldCounted, exact.BlockedOmitted, exact.Geleverd, err)
	}

	cfg = operate.WithSlowReads(operate.OverviewConfig{Layout: brptest.Layout(), Budget: 20 * time.Millisecond})
	o, err := operate.ReadOverview(ctx, db, cfg)
	if err != nil {
		t.Fatalf("over budget: %v", err)
	}
	if o.HeldCounted != operate.HeldUnknown || o.HeldBehindFout != -1 || !o.BlockedOmitted || o.BlockedTotal != -1 || o.Geleverd != -1 {
		t.Errorf("over budget, no leader's count: held %d (%s), blocked omitted %v (%d), geleverd %d",
			o.HeldBehindFout, o.HeldCounted, o.BlockedOmitted, o.BlockedTotal, o.Geleverd)
	}
	if o.Backlog != exact.Backlog || o.Fout != exact.Fout || o.InLevering != exact.InLevering || len(o.Fouten) != len(exact.Fouten) {
		t.Errorf("the cheap numbers changed over budget: %+v, want those of %+v", o, exact)
	}
	out := mustCLI(t, operate.CLI{DB: db, Config: cfg}, "status")
	for _, want := range []string{"not counted: counting took over 20ms, and no publisher has counted them yet",
		"not counted: counting the history took over 20ms", "blocked persons: not listed"} {
		if !strings.Contains(out, want) {
			t.Errorf("status over budget lacks %q:\n%s", want, out)
		}
	}

	// The leader counted what its view holds a minute ago.
	sqlExec(t, db, `update publicatie_state set held_handelingen = 1234, held_personen = 56, held_counted_at = now() - interval '1 minute'`)
	o, err = operate.ReadOverview(ctx, db, cfg)
	if err != nil || o.HeldCounted != operate.HeldByLeader || o.HeldBehindFout != 1234 || o.HeldBehindFoutPersonen != 56 || o.HeldCountedAt == nil {
		t.Fatalf("over budget with the leader's count: %d of %d (%s, %v), %v", o.HeldBehindFout, o.HeldBehindFoutPersonen, o.HeldCounted, o.HeldCountedAt, err)
	}
	// "1m00s ago", or a second or more later where the machine is busy (a lane beside two busy
	// loops rendered the page 1m01s after the count).
	out = mustCLI(t, operate.CLI{DB: db, Config: cfg}, "status")
	if !regexp.MustCompile(`1234  handeling\(en\) of 56 person\(s\), also through multi-person handelingen \(the leading publisher's count, 1m\d\ds ago: counting them here took over 20ms\)`).MatchString(out) {
		t.Errorf("status with the leader's count:\n%s", out)
	}
	g, err := access.New(access.Config{Anonymous: true}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g.Wrap(operate.Handler(db, cfg, nil, nil)))
	defer srv.Close()
	if code, body := get(t, srv.URL+"/"); code != http.StatusOK || !regexp.MustCompile(`the leading publisher's count of its view, 1m\d\ds ago`).MatchString(body) ||
		!strings.Contains(body, "Not listed: listing them took over 20ms") || !strings.Contains(body, "geleverd in total not counted") {
		t.Errorf("status page over budget: %d\n%s", code, body)
	}
}
