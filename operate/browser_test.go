package operate_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/brp/levering/internal/brptest"
	"github.com/brp/levering/internal/load"
	"github.com/brp/levering/internal/rig"
)

// chromium finds the browser; its absence fails the test (CI installs it), and skips it in the
// unit lane (-short).
func chromium(t *testing.T) string {
	t.Helper()
	if fi, err := os.Stat("/usr/bin/chromium"); err == nil && !fi.IsDir() {
		return "/usr/bin/chromium"
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	if testing.Short() {
		t.Skip("-short: chromium is not installed (apt-get install -y chromium; scripts/test.sh does)")
	}
	t.Fatal("chromium not found at /usr/bin/chromium or on PATH: install it with apt-get install -y chromium")
	return ""
}

// runChromium runs headless Chromium with a fresh profile and returns its standard output.
func runChromium(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--hide-scrollbars", "--user-data-dir=" + t.TempDir()}
	cmd := exec.CommandContext(ctx, chromium(t), append(base, slices.DeleteFunc(args, func(a string) bool { return a == "" })...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
	}
	return stdout.String()
}

// screenshot writes a PNG of url to file (trust: a Chromium flag or "") and checks it looks like one.
func screenshot(t *testing.T, trust, url, file, size string) {
	t.Helper()
	runChromium(t, trust, "--screenshot="+file, "--window-size="+size, url)
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	if !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) || len(b) < 10_000 {
		t.Fatalf("screenshot %s is not a plausible PNG (%d bytes)", file, len(b))
	}
}

// TestBrowserRendersStatusPage looks at the status page as an operator does: in Chromium,
// through the real publicatie's operator listener, over TLS (Chromium trusts the test
// server's key alone) with a user name and password.
func TestBrowserRendersStatusPage(t *testing.T) {
	db, dbURL := brptest.DB(t)
	ctx := context.Background()
	now := time.Now()
	if err := load.Insert(ctx, db, []load.Handeling{
		{ID: 4242, Soort: "VERHUIZING", Tsreg: now.Add(-2 * time.Minute), Personen: []int64{770077}},
		{ID: 4243, Soort: "VERHUIZING", Tsreg: now.Add(-time.Minute), Personen: []int64{770077}},
	}); err != nil {
		t.Fatal(err)
	}
	const reden = "afnemerindicatie ontbreekt voor persoon 770077"
	sqlExec(t, db, `update admhnd set statuslev = 'fout', foutreden = $1 where id = 4242`, reden)
	pki, ops := brptest.NewPKI(t, "operators CA"), brptest.NewOperators(t)
	pub := brptest.Start(t, "publicatie", brptest.Build(t, "cmd/publicatie"), rig.Env(brptest.Broker(), dbURL, brptest.NewQueues(t), ops.Env(pki)...)...)
	pub.WaitLeader(time.Minute)
	addr := pub.OperateAddr()
	authed := "https://" + url.UserPassword(ops.User, ops.Password).String() + "@" + addr
	trust := "--ignore-certificate-errors-spki-list=" + pki.ServerSPKI()

	dom := runChromium(t, trust, "--dump-dom", authed+"/")
	for _, want := range []string{"4242", "770077", reden, "publicatie fout retry 4242 --door NAME", "leads"} {
		if !strings.Contains(dom, want) {
			t.Errorf("rendered DOM lacks %q:\n%s", want, dom)
		}
	}
	dom = runChromium(t, trust, "--dump-dom", authed+"/fout/4242")
	if !strings.Contains(dom, reden) || !strings.Contains(dom, "4243") {
		t.Errorf("detail page DOM lacks the reason or the held-back 4243:\n%s", dom)
	}
	screenshot(t, trust, authed+"/", filepath.Join(t.TempDir(), "status.png"), "1280,900")

	// Without credentials the browser is shown no person (headless Chromium renders nothing
	// of a 401 that asks for a password), and the listener answered 401.
	dom = runChromium(t, trust, "--dump-dom", "https://"+addr+"/fout/4242")
	if strings.Contains(dom, "770077") || strings.Contains(dom, "afnemerindicatie") {
		t.Errorf("unauthenticated DOM shows the person:\n%s", dom)
	}
	resp, err := pki.HTTPClient().Get("https://" + addr + "/fout/4242")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || strings.Contains(string(body), "770077") || strings.Contains(string(body), "afnemerindicatie") {
		t.Errorf("unauthenticated GET: %d %q, want 401 without the person", resp.StatusCode, body)
	}
	// Each view is recorded with the operator and the handeling.
	var fout []map[string]any
	for _, l := range pub.Lines("operator page viewed") {
		if l["operator"] != ops.User || l["auth"] != "basic" {
			t.Errorf("audit line names someone else: %v", l)
		}
		if l["page"] == "fout" {
			fout = append(fout, l)
		}
	}
	if len(fout) != 1 || fout[0]["admhnd_id"] != float64(4242) {
		t.Errorf("audit lines of the detail page: %v", fout)
	}
}

// TestBrowserScreenshotForDocs writes a screenshot of a realistic status page to the file named
// by BRP_WRITE_SCREENSHOT (relative to the repository root), for docs/status-page.png:
//
//	BRP_WRITE_SCREENSHOT=docs/status-page.png go test -run ScreenshotForDocs ./operate/
func TestBrowserScreenshotForDocs(t *testing.T) {
	out := os.Getenv("BRP_WRITE_SCREENSHOT")
	if out == "" {
		t.Skip("set BRP_WRITE_SCREENSHOT=docs/status-page.png to write the documentation screenshot")
	}
	if !filepath.IsAbs(out) {
		out = filepath.Join("..", out)
	}
	db, _ := brptest.DB(t)
	realistic(t, db)
	srv, _ := servePages(t, db, func() (string, bool) { return "brp-lev-01-48213-k2x9", true })
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		t.Fatal(err)
	}
	size := os.Getenv("BRP_SCREENSHOT_SIZE")
	if size == "" {
		size = "1280,1220" // the whole page
	}
	screenshot(t, "", srv.URL+"/", out, size)
	if p := os.Getenv("BRP_WRITE_SCREENSHOT_DETAIL"); p != "" {
		var id int64
		if err := db.Get(&id, `select id from admhnd where statuslev = 'fout' and vrijgegeven is null order by tsreg desc limit 1`); err != nil {
			t.Fatal(err)
		}
		screenshot(t, "", fmt.Sprintf("%s/fout/%d", srv.URL, id), p, size)
	}
	t.Logf("wrote %s", out)
}

// realistic fills db as during a busy hour: 20 000 handelingen registered over the last ~80
// minutes (about 250 a minute), delivered a second or two after registration, some in levering,
// a backlog, six in fout (two released, one with an audit trail) holding back later
// handelingen of their persons.
func realistic(t *testing.T, db *sqlx.DB) {
	t.Helper()
	const first, n = 9_810_001, 20_000
	hs := load.Generate(load.Spec{N: n, Personen: 2500, Multi: 0.12, Excluded: 0.02, FirstID: first, Seed: 7})
	ts := time.Now().Add(-8 * time.Second)
	for i := n - 1; i >= 0; i-- { // spread tsreg backwards from now, the rate varying a little
		hs[i].Tsreg = ts.Truncate(time.Millisecond)
		ts = ts.Add(-time.Duration(float64(240*time.Millisecond) * (1 + 0.3*math.Sin(float64(i)/700))))
		for j := range hs[i].Personen {
			hs[i].Personen[j] += 3_400_000
		}
	}
	fouten := []struct {
		id       int64
		soort    string
		reden    string
		released bool
	}{
		{first + 19_590, "VERHUIZING", "afnemerindicatie ontbreekt voor persoon 3401417", false},
		{first + 19_640, "GEBOORTE", "handeling heeft geen bijgehouden personen", false},
		{first + 19_702, "HUWELIJK", "persoonslijst 3400733 niet gevonden in de BRP-cache", false},
		{first + 19_731, "NAAMSWIJZIGING", "verzending geweigerd door afnemer 501234: bericht groter dan 4 MiB", true},
		{first + 19_765, "OVERLIJDEN", "time-out na 30s bij het ophalen van de persoonslijst", false},
		{first + 19_788, "NAAMSWIJZIGING", "autorisatie ontbreekt voor soort NAAMSWIJZIGING bij afnemer 600012", true},
	}
	for _, f := range fouten {
		h := &hs[f.id-first]
		h.Soort = f.soort
		if strings.Contains(f.reden, "geen bijgehouden personen") {
			h.Personen = nil
		}
	}
	if err := load.Insert(context.Background(), db, hs); err != nil {
		t.Fatal(err)
	}
	// Delivered: all but the last 70, a second or two after registration.
	sqlExec(t, db, `update admhnd set statuslev = 'geleverd', tslev = tsreg + make_interval(secs => 0.4 + (id % 17) * 0.12)
		where id < $1 and soort <> 'GBA_INITIELE_VULLING'`, first+n-70)
	for _, f := range fouten {
		sqlExec(t, db, `update admhnd set statuslev = 'fout', tslev = null, foutreden = $2,
			vrijgegeven = case when $3 then now() - interval '2 minutes' end where id = $1`, f.id, f.reden, f.released)
	}
	sqlExec(t, db, `insert into admhnd_beheer (admhnd_id, actie, door, op, toelichting)
		values ($1, 'release', 'j.devries', now() - interval '2 minutes', 'afnemer informeert zelf; volgorde gaat voor')`, fouten[3].id)
	// What an unreleased fout handeling holds back is not delivered.
	sqlExec(t, db, `update admhnd a set statuslev = null, tslev = null
		where a.statuslev = 'geleverd' and exists (
			select 1 from admhnd_persoon p join admhnd_persoon q on q.persoon_id = p.persoon_id join admhnd f on f.id = q.admhnd_id
			where p.admhnd_id = a.id and f.statuslev = 'fout' and f.vrijgegeven is null and (f.tsreg, f.id) < (a.tsreg, a.id))`)
	// In levering: the oldest waiting handelingen nobody older holds back.
	sqlExec(t, db, `update admhnd set statuslev = 'in_levering', tspub = now() - make_interval(secs => (id % 7) * 0.5 + 0.3)
		where id in (
			select a.id from admhnd a
			where a.statuslev is null and a.soort <> 'GBA_INITIELE_VULLING' and a.id > $1
			  and not exists (
				select 1 from admhnd_persoon p join admhnd_persoon q on q.persoon_id = p.persoon_id join admhnd o on o.id = q.admhnd_id
				where p.admhnd_id = a.id and o.id <> a.id and o.soort <> 'GBA_INITIELE_VULLING'
				  and ((o.statuslev is null and (o.tsreg, o.id) < (a.tsreg, a.id)) or (o.statuslev = 'fout' and o.vrijgegeven is null)))
			order by a.tsreg, a.id limit 45)`, first+n-70)
	sqlExec(t, db, `insert into publicatie_lease (cluster, holder, epoch, heartbeat, acquired)
		values ('default', 'brp-lev-01-48213-k2x9', 4, now() - interval '0.8 seconds', now() - interval '3 hours')`)
}
