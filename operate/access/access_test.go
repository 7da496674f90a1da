package access_test

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/brp/levering/internal/brptest"
	"github.com/brp/levering/operate/access"
)

// secretPage stands for the operator pages: it shows a person and says who asked.
const secretPage = "persoon 987654321012"

func page() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		op, ok := access.FromContext(r.Context())
		if !ok {
			http.Error(w, "no operator", http.StatusInternalServerError)
			return
		}
		_, _ = io.WriteString(w, op.Method+"|"+op.Name+"|"+secretPage)
	})
}

// serve runs cfg's guard in front of page on a TLS test server and returns its URL and the
// log.
func serve(t *testing.T, cfg access.Config) (string, *bytes.Buffer) {
	t.Helper()
	var log bytes.Buffer
	g, err := access.New(cfg, slog.New(slog.NewJSONHandler(&log, nil)))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(g.Wrap(page()))
	srv.TLS = g.TLSConfig()
	if srv.TLS == nil {
		srv.Start()
	} else {
		srv.StartTLS()
	}
	t.Cleanup(srv.Close)
	return srv.URL, &log
}

type request struct {
	name   string
	client *http.Client
	header map[string][]string
	user   []string // user, password
}

// get sends r and returns the status and body.
func get(t *testing.T, url string, r request) (int, string, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url+"/fout/42", nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range r.header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if r.user != nil {
		req.SetBasicAuth(r.user[0], r.user[1])
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

func loadCert(t *testing.T, p *brptest.PKI) *tls.Certificate {
	t.Helper()
	c, err := tls.LoadX509KeyPair(p.CertFile, p.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	return &c
}

func TestEveryWayInAndOnlyThose(t *testing.T) {
	t.Parallel()
	pki := brptest.NewPKI(t, "operators CA")
	ops := brptest.NewOperators(t)
	tokens, users := parse(t, ops)
	url, log := serve(t, access.Config{Certificate: loadCert(t, pki), ClientCAs: pki.Pool, Tokens: tokens, Users: users,
		ProxyHeader: "X-Forwarded-Email", ProxyFrom: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	plain := pki.HTTPClient()
	wrong := ops.Token[:len(ops.Token)-1] + "x"
	if strings.HasSuffix(ops.Token, "x") {
		wrong = ops.Token[:len(ops.Token)-1] + "y"
	}
	for _, c := range []struct {
		request
		want string // method|name, or "" for a refusal
	}{
		{request{name: "no credentials", client: plain}, ""},
		{request{name: "bearer token", client: plain, header: map[string][]string{"Authorization": {"Bearer " + ops.Token}}}, "bearer|" + ops.TokenName},
		{request{name: "wrong bearer token", client: plain, header: map[string][]string{"Authorization": {"Bearer " + wrong}}}, ""},
		{request{name: "password", client: plain, user: []string{ops.User, ops.Password}}, "basic|" + ops.User},
		{request{name: "wrong password", client: plain, user: []string{ops.User, ops.Password + "x"}}, ""},
		{request{name: "unknown user", client: plain, user: []string{"m.jansen", ops.Password}}, ""},
		{request{name: "token as password", client: plain, user: []string{ops.TokenName, ops.Token}}, ""},
		{request{name: "other scheme", client: plain, header: map[string][]string{"Authorization": {"Digest " + ops.Token}}}, ""},
		{request{name: "client certificate", client: pki.HTTPClient(pki.Client("anna"))}, "mtls|CN=anna,O=BRP test"},
		{request{name: "proxy header", client: plain, header: map[string][]string{"X-Forwarded-Email": {"anna@example.nl"}}}, "proxy|anna@example.nl"},
		{request{name: "proxy header twice", client: plain, header: map[string][]string{"X-Forwarded-Email": {"anna@example.nl", "root"}}}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, body, err := get(t, url, c.request)
			if err != nil {
				t.Fatal(err)
			}
			if c.want == "" {
				if code != http.StatusUnauthorized || strings.Contains(body, secretPage) {
					t.Fatalf("got %d %q, want 401 without the page", code, body)
				}
				return
			}
			if code != http.StatusOK || body != c.want+"|"+secretPage {
				t.Fatalf("got %d %q, want 200 as %s", code, body, c.want)
			}
		})
	}
	// A certificate of another CA does not even complete the handshake. (Go's client would
	// not offer it to a server that names its CAs; this one insists.)
	foreign := brptest.NewPKI(t, "another CA").Client("anna")
	client := pki.HTTPClient()
	client.Transport.(*http.Transport).TLSClientConfig.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		return &foreign, nil
	}
	if code, body, err := get(t, url, request{client: client}); err == nil {
		t.Fatalf("a client certificate of another CA got %d %q", code, body)
	}
	// Refusals are logged with their reason; no secret is.
	for _, secret := range []string{ops.Token, ops.Password, wrong} {
		if strings.Contains(log.String(), secret) {
			t.Fatalf("the log holds a secret:\n%s", log)
		}
	}
	for _, reason := range []string{"no credentials", "bearer token not accepted", "user name or password not accepted",
		"authorization scheme not accepted", "proxy header is not one name"} {
		if !strings.Contains(log.String(), `"msg":"operator request refused","reason":"`+reason+`"`) {
			t.Errorf("no refusal logged with reason %q:\n%s", reason, log)
		}
	}
}

func TestChallengeNamesTheSchemes(t *testing.T) {
	t.Parallel()
	ops := brptest.NewOperators(t)
	tokens, users := parse(t, ops)
	url, _ := serve(t, access.Config{Tokens: tokens, Users: users})
	resp, err := http.Get(url + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	got := strings.Join(resp.Header.Values("WWW-Authenticate"), "; ")
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(got, "Basic realm=") || !strings.Contains(got, "Bearer realm=") {
		t.Fatalf("%d with WWW-Authenticate %q, want 401 with Basic and Bearer", resp.StatusCode, got)
	}
}

func TestCertificateOnlyRefusesWith403(t *testing.T) {
	t.Parallel()
	pki := brptest.NewPKI(t, "operators CA")
	url, _ := serve(t, access.Config{Certificate: loadCert(t, pki), ClientCAs: pki.Pool})
	code, body, err := get(t, url, request{client: pki.HTTPClient()})
	if err != nil || code != http.StatusForbidden || strings.Contains(body, secretPage) {
		t.Fatalf("without a client certificate: %d %q %v, want 403 without the page", code, body, err)
	}
	code, body, err = get(t, url, request{client: pki.HTTPClient(pki.Client("beheer-1"))})
	if err != nil || code != http.StatusOK || !strings.HasPrefix(body, "mtls|CN=beheer-1,O=BRP test|") {
		t.Fatalf("with a client certificate: %d %q %v", code, body, err)
	}
}

func TestProxyHeaderFromElsewhereIsRefused(t *testing.T) {
	t.Parallel()
	url, log := serve(t, access.Config{ProxyHeader: "X-Forwarded-User", ProxyFrom: []netip.Prefix{netip.MustParsePrefix("192.0.2.7/32")}})
	code, body, err := get(t, url, request{client: http.DefaultClient, header: map[string][]string{"X-Forwarded-User": {"admin"}}})
	if err != nil || code != http.StatusForbidden || strings.Contains(body, secretPage) {
		t.Fatalf("proxy header from 127.0.0.1: %d %q %v, want 403", code, body, err)
	}
	if !strings.Contains(log.String(), "proxy header from an address that is not the proxy's") {
		t.Fatalf("refusal not logged:\n%s", log)
	}
}

func TestAnonymousLetsEveryoneIn(t *testing.T) {
	t.Parallel()
	url, _ := serve(t, access.Config{Anonymous: true})
	code, body, err := get(t, url, request{client: http.DefaultClient, header: map[string][]string{"Authorization": {"Bearer nonsense"}}})
	if err != nil || code != http.StatusOK || body != "none||"+secretPage {
		t.Fatalf("%d %q %v", code, body, err)
	}
}

func TestConfigErrorsNameTheField(t *testing.T) {
	t.Parallel()
	pki := brptest.NewPKI(t, "ca")
	ops := brptest.NewOperators(t)
	tokens, users := parse(t, ops)
	prefix := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	for want, cfg := range map[string]access.Config{
		"no way in":      {},
		"ClientCAs":      {ClientCAs: pki.Pool},
		"ProxyHeader":    {ProxyHeader: "X-User"},
		"ProxyFrom":      {ProxyFrom: prefix},
		"not a header":   {ProxyHeader: "X User", ProxyFrom: prefix},
		"Anonymous":      {Anonymous: true, Users: users},
		"Tokens: the":    {Tokens: map[string]string{"bot": "short"}},
		"Tokens: name":   {Tokens: map[string]string{"a:b": ops.Token}},
		"another name":   {Tokens: map[string]string{"bot": ops.Token, "bot2": ops.Token}},
		"Users: the":     {Users: map[string][]byte{"anna": []byte("plain")}},
		"Users: name \"": {Users: map[string][]byte{"": users[ops.User]}},
	} {
		_, err := access.New(cfg, slog.Default())
		if !errors.Is(err, access.ErrConfig) || !strings.Contains(err.Error(), want) {
			t.Errorf("config %q: error %v, want one naming %q", want, err, want)
		}
	}
	if _, err := access.New(access.Config{Tokens: tokens}, slog.Default()); err != nil {
		t.Errorf("valid config refused: %v", err)
	}
}

func TestFiles(t *testing.T) {
	t.Parallel()
	// Written by htpasswd -nbB -C 5 anna 'geheim wachtwoord' (Apache's $2y$ variant).
	users, err := access.ParseUsers(strings.NewReader("# beheerders\n\nanna:$2y$05$qgjZYMp2dZk82.YYP7jjOeGEzQ0RnK/AptW8YSTMVgHaG2DLzNZG2\n"))
	if err != nil || len(users) != 1 {
		t.Fatalf("users %v, %v", users, err)
	}
	url, _ := serve(t, access.Config{Users: users})
	if code, body, err := get(t, url, request{client: http.DefaultClient, user: []string{"anna", "geheim wachtwoord"}}); err != nil || code != http.StatusOK {
		t.Fatalf("htpasswd's hash: %d %q %v", code, body, err)
	}
	tokens, err := access.ParseTokens(strings.NewReader(" bot : 0123456789abcdef:with-colon \n"))
	if err != nil || tokens["bot"] != "0123456789abcdef:with-colon" {
		t.Fatalf("tokens %v, %v", tokens, err)
	}
	const secret = "s3cr3t-s3cr3t-s3cr3t"
	for name, c := range map[string]struct {
		text  string
		parse func(io.Reader) error
	}{
		"short token":     {"bot:" + secret + "\nbot2:short\n", parseTokens},
		"no colon":        {secret + "\n", parseTokens},
		"token twice":     {"a:" + secret + "\nb:" + secret + "\n", parseTokens},
		"name twice":      {"a:" + secret + "\na:" + secret + "x\n", parseTokens},
		"empty":           {"# nobody\n", parseTokens},
		"plain password":  {"anna:" + secret + "\n", parseUsers},
		"md5 hash":        {"anna:$apr1$" + secret + "\n", parseUsers},
		"empty users":     {"", parseUsers},
		"name twice user": {"anna:$2y$05$qgjZYMp2dZk82.YYP7jjOeGEzQ0RnK/AptW8YSTMVgHaG2DLzNZG2\nanna:$2y$05$qgjZYMp2dZk82.YYP7jjOeGEzQ0RnK/AptW8YSTMVgHaG2DLzNZG2\n", parseUsers},
	} {
		err := c.parse(strings.NewReader(c.text))
		if err == nil || !strings.Contains(err.Error(), "line") || strings.Contains(err.Error(), secret) {
			t.Errorf("%s: error %v, want one naming the line without the secret", name, err)
		}
	}
}

func parseTokens(r io.Reader) error { _, err := access.ParseTokens(r); return err }
func parseUsers(r io.Reader) error  { _, err := access.ParseUsers(r); return err }

// parse reads the test's credentials files as the command does.
func parse(t *testing.T, ops brptest.Operators) (map[string]string, map[string][]byte) {
	t.Helper()
	read := func(path string) io.Reader {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return bytes.NewReader(b)
	}
	tokens, err := access.ParseTokens(read(ops.TokenFile))
	if err != nil {
		t.Fatal(err)
	}
	users, err := access.ParseUsers(read(ops.UsersFile))
	if err != nil {
		t.Fatal(err)
	}
	return tokens, users
}
