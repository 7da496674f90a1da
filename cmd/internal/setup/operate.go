package setup

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"

	"github.com/brp/levering/operate/access"
)

// Operate holds the settings of the operator listener (publicatie), which serves pages with
// persoon ids and fout reasons: off by default, and on an address other than loopback only
// with a way to authenticate operators.
type Operate struct {
	OperateAddr ListenAddr  `envconfig:"BRP_OPERATE_ADDR" default:"off"`
	TLSCert     string      `envconfig:"BRP_OPERATE_TLS_CERT"`
	TLSKey      string      `envconfig:"BRP_OPERATE_TLS_KEY"`
	ClientCA    string      `envconfig:"BRP_OPERATE_CLIENT_CA"`
	TokenFile   string      `envconfig:"BRP_OPERATE_TOKEN_FILE"`
	UsersFile   string      `envconfig:"BRP_OPERATE_USERS_FILE"`
	ProxyHeader HeaderName  `envconfig:"BRP_OPERATE_PROXY_HEADER"`
	ProxyAddrs  NetPrefixes `envconfig:"BRP_OPERATE_PROXY_ADDRS"`
}

// Guard reads the files the settings name and returns the operator listener's guard. Every
// setting is checked even while the listener is off, so that a mistake shows at once. The
// error names the variable and wraps ErrConfig.
func (o Operate) Guard(log *slog.Logger) (*access.Guard, error) {
	var cfg access.Config
	bad := func(name, value, expected string, err error) error {
		if err != nil {
			expected += ": " + err.Error()
		}
		return fmt.Errorf("%w: %s=%q: expected %s", ErrConfig, name, value, expected)
	}
	switch {
	case o.TLSCert != "" && o.TLSKey == "":
		return nil, bad("BRP_OPERATE_TLS_CERT", o.TLSCert, "BRP_OPERATE_TLS_KEY too (the certificate's key)", nil)
	case o.TLSKey != "" && o.TLSCert == "":
		return nil, bad("BRP_OPERATE_TLS_KEY", o.TLSKey, "BRP_OPERATE_TLS_CERT too (the key's certificate)", nil)
	case o.TLSCert != "":
		cert, err := tls.LoadX509KeyPair(o.TLSCert, o.TLSKey)
		if err != nil {
			return nil, bad("BRP_OPERATE_TLS_CERT", o.TLSCert, "a PEM certificate (chain) matching the PEM key of BRP_OPERATE_TLS_KEY", err)
		}
		cfg.Certificate = &cert
	}
	if o.ClientCA != "" {
		if cfg.Certificate == nil {
			return nil, bad("BRP_OPERATE_CLIENT_CA", o.ClientCA, "BRP_OPERATE_TLS_CERT and BRP_OPERATE_TLS_KEY too (client certificates need TLS)", nil)
		}
		pem, err := os.ReadFile(o.ClientCA)
		if err != nil {
			return nil, bad("BRP_OPERATE_CLIENT_CA", o.ClientCA, "a readable PEM file with CA certificates", err)
		}
		cfg.ClientCAs = x509.NewCertPool()
		if !cfg.ClientCAs.AppendCertsFromPEM(pem) {
			return nil, bad("BRP_OPERATE_CLIENT_CA", o.ClientCA, "a PEM file with CA certificates", nil)
		}
	}
	var err error
	if o.TokenFile != "" {
		if cfg.Tokens, err = parseFile(o.TokenFile, access.ParseTokens); err != nil {
			return nil, bad("BRP_OPERATE_TOKEN_FILE", o.TokenFile, "a readable file of NAME:TOKEN lines", err)
		}
	}
	if o.UsersFile != "" {
		if cfg.Users, err = parseFile(o.UsersFile, access.ParseUsers); err != nil {
			return nil, bad("BRP_OPERATE_USERS_FILE", o.UsersFile, "a readable file of NAME:BCRYPT-HASH lines (htpasswd -B)", err)
		}
	}
	switch {
	case o.ProxyHeader != "" && len(o.ProxyAddrs) == 0:
		return nil, bad("BRP_OPERATE_PROXY_HEADER", string(o.ProxyHeader), "BRP_OPERATE_PROXY_ADDRS too (the addresses the proxy connects from)", nil)
	case o.ProxyHeader == "" && len(o.ProxyAddrs) > 0:
		return nil, bad("BRP_OPERATE_PROXY_ADDRS", o.ProxyAddrs.String(), "BRP_OPERATE_PROXY_HEADER too (the header in which the proxy names the user)", nil)
	}
	cfg.ProxyHeader, cfg.ProxyFrom = string(o.ProxyHeader), o.ProxyAddrs
	loopback := o.OperateAddr.Loopback()
	if !cfg.Authenticates() {
		if o.OperateAddr != "off" && !loopback {
			return nil, bad("BRP_OPERATE_ADDR", string(o.OperateAddr), "a loopback address (127.0.0.1:PORT) or off, unless operators must authenticate: "+
				"set BRP_OPERATE_CLIENT_CA, BRP_OPERATE_TOKEN_FILE, BRP_OPERATE_USERS_FILE or BRP_OPERATE_PROXY_HEADER", nil)
		}
		cfg.Anonymous = true
	}
	g, err := access.New(cfg, log)
	if err != nil {
		return nil, fmt.Errorf("%w: BRP_OPERATE_*: %v", ErrConfig, err)
	}
	if o.OperateAddr != "off" {
		if cfg.Anonymous {
			log.Warn("operator pages without authentication: whoever can connect to the loopback address sees persons",
				slog.String("operate_addr", string(o.OperateAddr)))
		} else if !loopback && cfg.Certificate == nil && (len(cfg.Tokens) > 0 || len(cfg.Users) > 0) {
			log.Warn("operator credentials travel unencrypted: set BRP_OPERATE_TLS_CERT and BRP_OPERATE_TLS_KEY",
				slog.String("operate_addr", string(o.OperateAddr)))
		}
	}
	return g, nil
}

func parseFile[T any](path string, parse func(io.Reader) (T, error)) (T, error) {
	f, err := os.Open(path)
	if err != nil {
		var zero T
		return zero, err
	}
	defer f.Close()
	return parse(f)
}

// ServeOperate serves the operator pages h behind g on addr (unless it is "off"), with TLS
// when g has a certificate, until ctx ends. It logs "operator pages listening" with the
// address actually bound (operate_addr) and returns that address.
func ServeOperate(ctx context.Context, addr ListenAddr, g *access.Guard, h http.Handler, log *slog.Logger) (string, error) {
	tc := g.TLSConfig()
	return serve(ctx, addr, g.Wrap(h), tc, log, "operator pages listening", "operate_addr",
		slog.Bool("tls", tc != nil), slog.String("auth", strings.Join(g.Methods(), ",")))
}

// Loopback reports whether l listens on a loopback address only: 127.0.0.0/8, ::1 or
// localhost. An empty host listens on every interface.
func (l ListenAddr) Loopback() bool {
	host, _, err := net.SplitHostPort(string(l))
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}

// HeaderName is an HTTP header name such as X-Forwarded-Email; empty means none.
type HeaderName string

// Decode implements envconfig.Decoder.
func (h *HeaderName) Decode(v string) error {
	v = strings.TrimSpace(v)
	if v != "" && (!access.ValidHeaderName(v) || strings.EqualFold(v, "Authorization")) {
		return fmt.Errorf("expected an HTTP header name such as X-Forwarded-Email")
	}
	*h = HeaderName(v)
	return nil
}

// NetPrefixes is a comma-separated list of IP addresses and CIDR prefixes; empty means none.
type NetPrefixes []netip.Prefix

// Decode implements envconfig.Decoder.
func (p *NetPrefixes) Decode(v string) error {
	var out NetPrefixes
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		pfx, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil {
				return fmt.Errorf("expected IP addresses or CIDR prefixes, comma-separated (10.0.0.7, 10.1.0.0/16)")
			}
			pfx = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		}
		out = append(out, pfx.Masked())
	}
	*p = out
	return nil
}

// String lists the prefixes as Decode reads them.
func (p NetPrefixes) String() string {
	s := make([]string, len(p))
	for i, x := range p {
		s[i] = x.String()
	}
	return strings.Join(s, ",")
}
