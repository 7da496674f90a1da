// Package access decides who may see the operator pages, which show persoon ids and fout
// reasons (personal data). An operator proves who they are with a client certificate (mTLS), a
// bearer token, a user name and password, or is named by a reverse proxy that authenticated
// them (OIDC), believed only on connections from the proxy's addresses. Guard.Wrap refuses
// everyone else before the pages are reached and hands the Operator to the pages in the
// request's context, so that they can record who looked at what.
package access

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"unicode"

	"golang.org/x/crypto/bcrypt"
)

// How an operator was authenticated: Operator.Method.
const (
	MTLS   = "mtls"   // a client certificate signed by Config.ClientCAs
	Bearer = "bearer" // a token of Config.Tokens
	Basic  = "basic"  // a user of Config.Users and their password
	Proxy  = "proxy"  // named in Config.ProxyHeader by a proxy at Config.ProxyFrom
	None   = "none"   // nobody: Config.Anonymous
)

// Config says which credentials the operator listener accepts. At least one way in must be
// set, or Anonymous.
type Config struct {
	// Certificate is the server's certificate and key: with it the listener serves TLS
	// (Guard.TLSConfig). Nil serves plain HTTP.
	Certificate *tls.Certificate
	// ClientCAs verify client certificates (extended key usage clientAuth); a verified one
	// authenticates its subject. Needs Certificate. Trust only a CA that issues certificates
	// to operators: every holder of a certificate it signed gets in.
	ClientCAs *x509.CertPool
	// Tokens are the accepted bearer tokens by the name of who holds each (the name is what
	// the audit records). Tokens must be at least minTokenLength long and distinct.
	Tokens map[string]string
	// Users are the accepted user names, each with a bcrypt hash of their password
	// (htpasswd -B).
	Users map[string][]byte
	// ProxyHeader is the request header in which a reverse proxy that authenticated the user
	// names them (oauth2-proxy: X-Forwarded-Email). It is believed only on connections from
	// ProxyFrom, and must be set together with it. The proxy must overwrite the header that
	// clients send.
	ProxyHeader string
	// ProxyFrom are the addresses the proxy connects from.
	ProxyFrom []netip.Prefix
	// Anonymous lets every request through as an operator without a name (Method None).
	// Only for a listener on loopback, where whoever connects already has the host; it
	// excludes every other field but Certificate.
	Anonymous bool
}

// minTokenLength is the shortest bearer token accepted (openssl rand -hex 32 makes 64).
const minTokenLength = 16

// ErrConfig is wrapped by every Config validation error.
var ErrConfig = errors.New("access: invalid config")

// Authenticates reports whether c names a way to authenticate operators.
func (c Config) Authenticates() bool {
	return c.ClientCAs != nil || len(c.Tokens) > 0 || len(c.Users) > 0 || c.ProxyHeader != ""
}

func (c Config) validate() error {
	switch {
	case c.ClientCAs != nil && c.Certificate == nil:
		return fmt.Errorf("%w: ClientCAs needs Certificate (client certificates need TLS)", ErrConfig)
	case (c.ProxyHeader == "") != (len(c.ProxyFrom) == 0):
		return fmt.Errorf("%w: ProxyHeader and ProxyFrom go together", ErrConfig)
	case c.ProxyHeader != "" && !ValidHeaderName(c.ProxyHeader):
		return fmt.Errorf("%w: ProxyHeader %q is not a header name", ErrConfig, c.ProxyHeader)
	case c.Anonymous && c.Authenticates():
		return fmt.Errorf("%w: Anonymous excludes ClientCAs, Tokens, Users and ProxyHeader", ErrConfig)
	case !c.Anonymous && !c.Authenticates():
		return fmt.Errorf("%w: no way in: set ClientCAs, Tokens, Users or ProxyHeader (or Anonymous on loopback)", ErrConfig)
	}
	seen := map[string]bool{}
	for name, tok := range c.Tokens {
		switch {
		case !validName(name):
			return fmt.Errorf("%w: Tokens: name %q is not a name", ErrConfig, name)
		case len(tok) < minTokenLength:
			return fmt.Errorf("%w: Tokens: the token of %q is shorter than %d characters", ErrConfig, name, minTokenLength)
		case seen[tok]:
			return fmt.Errorf("%w: Tokens: %q has the token of another name", ErrConfig, name)
		}
		seen[tok] = true
	}
	for name, hash := range c.Users {
		if !validName(name) {
			return fmt.Errorf("%w: Users: name %q is not a name", ErrConfig, name)
		}
		if _, err := bcrypt.Cost(hash); err != nil {
			return fmt.Errorf("%w: Users: the hash of %q is not a bcrypt hash", ErrConfig, name)
		}
	}
	return nil
}

// ValidHeaderName reports whether h is an HTTP header name (letters, digits, hyphens).
func ValidHeaderName(h string) bool {
	return h != "" && !strings.ContainsFunc(h, func(r rune) bool {
		return !(r == '-' || r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r)))
	})
}

// validName accepts what may name an operator in a log line: printable, no colon (the files'
// separator), at most 256 bytes.
func validName(s string) bool {
	return s != "" && len(s) <= 256 && !strings.ContainsFunc(s, func(r rune) bool { return r == ':' || !unicode.IsPrint(r) })
}

// Operator is who made a request that Guard let through.
type Operator struct {
	// Name is the certificate's subject, the token's or user's name, or what the proxy said;
	// "" for Method None.
	Name string
	// Method is how they were authenticated: MTLS, Bearer, Basic, Proxy or None.
	Method string
}

type ctxKey struct{}

// FromContext returns the operator Guard put in ctx; false when the request did not pass a
// Guard.
func FromContext(ctx context.Context) (Operator, bool) {
	op, ok := ctx.Value(ctxKey{}).(Operator)
	return op, ok
}

// Guard checks the credentials of every request against one Config.
type Guard struct {
	cfg    Config
	log    *slog.Logger
	tokens []token
	dummy  []byte // hashed like Users, compared for unknown users so they take as long
}

type token struct {
	name string
	sum  [sha256.Size]byte
}

// New checks cfg (errors wrap ErrConfig and name the field) and returns its Guard; refusals
// are logged on log.
func New(cfg Config, log *slog.Logger) (*Guard, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	g := &Guard{cfg: cfg, log: log}
	for name, tok := range cfg.Tokens {
		g.tokens = append(g.tokens, token{name: name, sum: sha256.Sum256([]byte(tok))})
	}
	if len(cfg.Users) > 0 {
		cost := bcrypt.MinCost
		for _, h := range cfg.Users {
			c, _ := bcrypt.Cost(h) // validated
			cost = max(cost, c)
		}
		var err error
		if g.dummy, err = bcrypt.GenerateFromPassword([]byte(rand.Text()), cost); err != nil {
			return nil, fmt.Errorf("access: %w", err)
		}
	}
	return g, nil
}

// Methods lists the ways in that g accepts, for a start-up log line.
func (g *Guard) Methods() []string {
	var m []string
	for _, x := range []struct {
		on   bool
		name string
	}{{g.cfg.ClientCAs != nil, MTLS}, {len(g.tokens) > 0, Bearer}, {len(g.cfg.Users) > 0, Basic},
		{g.cfg.ProxyHeader != "", Proxy}, {g.cfg.Anonymous, None}} {
		if x.on {
			m = append(m, x.name)
		}
	}
	return m
}

// TLSConfig is the listener's TLS configuration, nil without Config.Certificate. With
// ClientCAs a client certificate is verified when one is offered; clients without one may
// still use another way in.
func (g *Guard) TLSConfig() *tls.Config {
	if g.cfg.Certificate == nil {
		return nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*g.cfg.Certificate}}
	if g.cfg.ClientCAs != nil {
		tc.ClientCAs = g.cfg.ClientCAs
		tc.ClientAuth = tls.VerifyClientCertIfGiven
	}
	return tc
}

// Wrap serves next only to requests that g authenticates, with their Operator in the
// request's context (FromContext). Others get 401 (or 403 when no way in can be asked for in
// HTTP: client certificates, a proxy) with a fixed body, and a log line "operator request
// refused" with the reason and the client's address; credentials are never logged.
func (g *Guard) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		op, refused := g.authenticate(r)
		if refused != "" {
			g.log.Warn("operator request refused", slog.String("reason", refused),
				slog.String("remote_addr", r.RemoteAddr), slog.String("path", r.URL.Path))
			g.refuse(w)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, op)))
	})
}

// authenticate returns the request's operator, or why it is refused. A verified client
// certificate goes first, then the proxy's header (a proxy may pass an Authorization header
// of its own), then the Authorization header.
func (g *Guard) authenticate(r *http.Request) (Operator, string) {
	if g.cfg.Anonymous {
		return Operator{Method: None}, ""
	}
	if g.cfg.ClientCAs != nil && r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
		return Operator{Name: r.TLS.VerifiedChains[0][0].Subject.String(), Method: MTLS}, ""
	}
	if g.cfg.ProxyHeader != "" {
		switch vs := r.Header.Values(g.cfg.ProxyHeader); {
		case len(vs) == 0:
		case !g.fromProxy(r.RemoteAddr):
			return Operator{}, "proxy header from an address that is not the proxy's"
		case len(vs) > 1 || !validName(vs[0]):
			return Operator{}, "proxy header is not one name"
		default:
			return Operator{Name: vs[0], Method: Proxy}, ""
		}
	}
	auth := r.Header.Get("Authorization")
	scheme, cred, _ := strings.Cut(auth, " ")
	switch {
	case auth == "":
		return Operator{}, "no credentials"
	case strings.EqualFold(scheme, "Bearer") && len(g.tokens) > 0:
		if name, ok := g.token(strings.TrimSpace(cred)); ok {
			return Operator{Name: name, Method: Bearer}, ""
		}
		return Operator{}, "bearer token not accepted"
	case strings.EqualFold(scheme, "Basic") && len(g.cfg.Users) > 0:
		if user, pass, ok := r.BasicAuth(); ok && g.password(user, pass) {
			return Operator{Name: user, Method: Basic}, ""
		}
		return Operator{}, "user name or password not accepted"
	}
	return Operator{}, "authorization scheme not accepted"
}

func (g *Guard) fromProxy(remote string) bool {
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		return false
	}
	a := ap.Addr().Unmap()
	return slices.ContainsFunc(g.cfg.ProxyFrom, func(p netip.Prefix) bool { return p.Contains(a) })
}

// token compares the digest of cred with every token's in constant time, so neither the
// match nor its position shows in the response time.
func (g *Guard) token(cred string) (string, bool) {
	sum := sha256.Sum256([]byte(cred))
	name, found := "", false
	for _, t := range g.tokens {
		if subtle.ConstantTimeCompare(sum[:], t.sum[:]) == 1 {
			name, found = t.name, true
		}
	}
	return name, found
}

// password checks user's password; an unknown user costs a bcrypt comparison too.
func (g *Guard) password(user, pass string) bool {
	hash, known := g.cfg.Users[user]
	if !known {
		hash = g.dummy
	}
	return bcrypt.CompareHashAndPassword(hash, []byte(pass)) == nil && known
}

func (g *Guard) refuse(w http.ResponseWriter) {
	h := w.Header()
	if len(g.cfg.Users) > 0 {
		h.Add("WWW-Authenticate", `Basic realm="BRP levering operator", charset="UTF-8"`)
	}
	if len(g.tokens) > 0 {
		h.Add("WWW-Authenticate", `Bearer realm="BRP levering operator"`)
	}
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	code := http.StatusUnauthorized
	if len(h.Values("WWW-Authenticate")) == 0 {
		code = http.StatusForbidden // 401 requires a challenge; certificates and proxies have none
	}
	w.WriteHeader(code)
	_, _ = io.WriteString(w, "The operator pages need authentication (see docs/operations.md, section Operator pages).\n")
}
