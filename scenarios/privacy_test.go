package scenarios

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/brp/levering/internal/brptest"
	"github.com/brp/levering/internal/load"
	"github.com/brp/levering/internal/rig"
)

// Guarantee 8: persoon ids and fout reasons only for authenticated operators.

// personalWorld is a run whose persons have ids no other number in a response or a log line
// is likely to equal, plus one handeling in fout whose reason names its person.
type personalWorld struct {
	*world
	persons map[string]bool // decimal persoon ids
	foutID  int64
	reden   string
	pub     *brptest.Proc
	con     *brptest.Proc
	pki     *brptest.PKI
	ops     brptest.Operators
}

func newPersonalWorld(t *testing.T) *personalWorld {
	t.Helper()
	const base = 987_650_000_000
	w := makeEmptyWorld(t, nil, brptest.Broker(), load.Spec{N: 200, Personen: 20, Multi: 0.3, Seed: 31})
	pw := &personalWorld{world: w, persons: map[string]bool{}, foutID: 1_000_000}
	delivered := 0
	for i := range w.hs {
		for j := range w.hs[i].Personen {
			w.hs[i].Personen[j] += base
			pw.persons[strconv.FormatInt(w.hs[i].Personen[j], 10)] = true
		}
		if w.hs[i].Soort != load.ExcludedSoort {
			delivered++
		}
	}
	const foutPersoon = base + 999
	pw.persons[strconv.Itoa(foutPersoon)] = true
	pw.reden = fmt.Sprintf("afnemerindicatie ontbreekt voor persoon %d", foutPersoon)
	fout := load.Handeling{ID: pw.foutID, Soort: "VERHUIZING", Tsreg: time.Now().Add(-2 * time.Hour), Personen: []int64{foutPersoon}}
	if err := load.Insert(context.Background(), w.db, append([]load.Handeling{fout}, w.hs...)); err != nil {
		t.Fatal(err)
	}
	if _, err := w.db.Exec(`update admhnd set statuslev = 'fout', foutreden = $2 where id = $1`, pw.foutID, pw.reden); err != nil {
		t.Fatal(err)
	}
	pw.pki, pw.ops = brptest.NewPKI(t, "operators CA"), brptest.NewOperators(t)
	pw.con = w.consumerProc(t, "mutatielevering", brptest.Build(t, "cmd/mutatielevering"))
	pw.pub = w.publisherProc(t, "publicatie", brptest.Build(t, "cmd/publicatie"), pw.ops.Env(pw.pki)...)
	w.waitDelivered(t, delivered)
	return pw
}

var number = regexp.MustCompile(`[0-9]+`)

// personal returns what in s is personal: a persoon id (a whole number) or the fout reason.
func (pw *personalWorld) personal(s string) []string {
	var found []string
	for _, n := range number.FindAllString(s, -1) {
		if pw.persons[n] {
			found = append(found, n)
		}
	}
	if strings.Contains(s, "afnemerindicatie") {
		found = append(found, "the fout reason")
	}
	return found
}

// basic is the credentials of HTTP basic authentication.
func basic(user, password string) string {
	return base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
}

// fetch gets url with client and returns the status and body.
func fetch(t *testing.T, client *http.Client, url string, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode, string(b)
}

func TestProbesAndLogsCarryNoPersons(t *testing.T) {
	t.Parallel()
	pw := newPersonalWorld(t)
	// The operator pages show these persons to an operator: the data is there to be leaked.
	op := pw.pki.HTTPClient(pw.pki.Client("anna"))
	if code, body := fetch(t, op, "https://"+pw.pub.OperateAddr()+"/overview.json"); code != http.StatusOK || len(pw.personal(body)) < 2 {
		t.Fatalf("an operator's overview: %d, personal data %v", code, pw.personal(body))
	}
	for _, c := range []struct {
		p     *brptest.Proc
		paths []string
	}{
		{pw.pub, []string{"/healthz", "/readyz", "/metrics", "/status", "/", "/status.html", "/overview.json", fmt.Sprintf("/fout/%d", pw.foutID)}},
		{pw.con, []string{"/healthz", "/readyz", "/metrics"}},
	} {
		for _, path := range c.paths {
			code, body := fetch(t, http.DefaultClient, "http://"+c.p.HTTPAddr()+path)
			if found := pw.personal(body); len(found) > 0 {
				t.Errorf("%s %s (%d) carries personal data %v:\n%s", c.p.Name, path, code, found, body)
			}
			switch {
			case strings.HasPrefix(path, "/healthz") || path == "/readyz" || path == "/metrics" || path == "/status":
				if code != http.StatusOK {
					t.Errorf("%s %s: %d", c.p.Name, path, code)
				}
			case code != http.StatusNotFound:
				t.Errorf("%s %s: %d, want 404 (the page moved to the operator listener)", c.p.Name, path, code)
			}
		}
	}
	// Logs above debug level name handelingen, not persons (the operator's view above included).
	for _, p := range []*brptest.Proc{pw.pub, pw.con} {
		for _, l := range p.Output() {
			if !strings.Contains(l, `"level":"DEBUG"`) && len(pw.personal(l)) > 0 {
				t.Errorf("%s logged personal data %v: %s", p.Name, pw.personal(l), l)
			}
		}
	}
}

func TestOperatorListenerLetsOnlyOperatorsIn(t *testing.T) {
	t.Parallel()
	pw := newPersonalWorld(t)
	base := "https://" + pw.pub.OperateAddr()
	anon, anna := pw.pki.HTTPClient(), pw.pki.HTTPClient(pw.pki.Client("anna"))
	fout := fmt.Sprintf("/fout/%d", pw.foutID)
	for _, path := range []string{"/", "/status.html", fout, "/overview.json"} {
		for name, hdr := range map[string][]string{
			"no credentials": nil,
			"wrong token":    {"Authorization", "Bearer " + strings.Repeat("0", 40)},
			"wrong password": {"Authorization", "Basic " + basic(pw.ops.User, "guess")},
		} {
			code, body := fetch(t, anon, base+path, hdr...)
			if code != http.StatusUnauthorized || len(pw.personal(body)) > 0 {
				t.Errorf("%s with %s: %d %q, want 401 without personal data", path, name, code, body)
			}
		}
	}
	// Each way in, each recorded with who and what.
	for _, c := range []struct {
		client *http.Client
		path   string
		header []string
	}{
		{anon, "/", []string{"Authorization", "Bearer " + pw.ops.Token}},
		{anon, "/overview.json", []string{"Authorization", "Basic " + basic(pw.ops.User, pw.ops.Password)}},
		{anna, fout, nil},
	} {
		code, body := fetch(t, c.client, base+c.path, c.header...)
		if code != http.StatusOK || !strings.Contains(body, pw.reden) {
			t.Errorf("%s authenticated: %d, want 200 with the fout reason:\n%s", c.path, code, body)
		}
	}
	// The audit line is written after the response, and reaches the test through a pipe.
	brptest.Eventually(t, 10*time.Second, func() error {
		if n, m := len(pw.pub.Lines("operator page viewed")), len(pw.pub.Lines("operator request refused")); n < 3 || m < 12 {
			return fmt.Errorf("%d audit lines and %d refusals logged so far", n, m)
		}
		return nil
	})
	var got []string
	for _, l := range pw.pub.Lines("operator page viewed") {
		s := fmt.Sprint(l["auth"], " ", l["operator"], " ", l["page"])
		if id, ok := l["admhnd_id"]; ok {
			s += fmt.Sprint(" ", int64(id.(float64)))
		}
		got = append(got, s)
	}
	want := []string{"bearer " + pw.ops.TokenName + " status", "basic " + pw.ops.User + " overview.json",
		fmt.Sprintf("mtls CN=anna,O=BRP test fout %d", pw.foutID)}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("audit lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if n := len(pw.pub.Lines("operator request refused")); n != 12 {
		t.Errorf("%d refusals logged, want 12", n)
	}
}

// A listener on every interface starts when operators must authenticate, and then lets
// nobody in without.
func TestOperatorListenerOnTheNetworkNeedsCredentials(t *testing.T) {
	t.Parallel()
	_, dbURL := brptest.DB(t)
	ops := brptest.NewOperators(t)
	pub := brptest.Start(t, "publicatie", brptest.Build(t, "cmd/publicatie"), rig.Env(brptest.Broker(), dbURL, brptest.NewQueues(t),
		"BRP_OPERATE_ADDR=0.0.0.0:0", "BRP_OPERATE_USERS_FILE="+ops.UsersFile)...)
	addr := pub.OperateAddr()
	if !strings.HasPrefix(addr, "[::]:") && !strings.HasPrefix(addr, "0.0.0.0:") {
		t.Fatalf("operator listener on %s, want every interface", addr)
	}
	port := addr[strings.LastIndex(addr, ":")+1:]
	if code, _ := fetch(t, http.DefaultClient, "http://127.0.0.1:"+port+"/"); code != http.StatusUnauthorized {
		t.Fatalf("unauthenticated: %d, want 401", code)
	}
	if code, _ := fetch(t, http.DefaultClient, "http://127.0.0.1:"+port+"/", "Authorization", "Basic "+basic(ops.User, ops.Password)); code != http.StatusOK {
		t.Fatalf("authenticated: %d, want 200", code)
	}
	if len(pub.Lines("operator credentials travel unencrypted: set BRP_OPERATE_TLS_CERT and BRP_OPERATE_TLS_KEY")) != 1 {
		t.Errorf("no warning about passwords without TLS on the network")
	}
}
