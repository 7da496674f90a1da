package brptest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// PKI is a throw-away certificate authority in a test's temporary directory, for the TLS of
// the operator listener.
type PKI struct {
	t   testing.TB
	ca  *x509.Certificate
	key *ecdsa.PrivateKey
	dir string
	// CAFile is the CA's certificate (PEM): BRP_OPERATE_CLIENT_CA, and what clients trust.
	CAFile string
	// CertFile and KeyFile are a server certificate for 127.0.0.1, ::1 and localhost and its
	// key (PEM): BRP_OPERATE_TLS_CERT and BRP_OPERATE_TLS_KEY.
	CertFile, KeyFile string
	// Pool holds the CA's certificate.
	Pool *x509.CertPool
	// Server is the server certificate.
	Server *x509.Certificate
}

// NewPKI makes a CA named name and a server certificate signed by it.
func NewPKI(t testing.TB, name string) *PKI {
	t.Helper()
	p := &PKI{t: t, dir: t.TempDir(), key: newKey(t)}
	tmpl := &x509.Certificate{
		SerialNumber: serial(t), Subject: pkix.Name{CommonName: name, Organization: []string{"BRP test"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	p.ca = p.sign(tmpl, &p.key.PublicKey, p.key)
	p.Pool = x509.NewCertPool()
	p.Pool.AddCert(p.ca)
	p.CAFile = p.write("ca.pem", "CERTIFICATE", p.ca.Raw)
	skey := newKey(t)
	p.Server = p.sign(&x509.Certificate{
		SerialNumber: serial(t), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, &skey.PublicKey, p.key)
	p.CertFile = p.write("server.pem", "CERTIFICATE", p.Server.Raw)
	p.KeyFile = p.write("server-key.pem", "PRIVATE KEY", marshalKey(t, skey))
	return p
}

// Client issues a client certificate (extended key usage clientAuth) with common name cn
// and organisation "BRP test"; its subject reads "CN=<cn>,O=BRP test".
func (p *PKI) Client(cn string) tls.Certificate {
	p.t.Helper()
	key := newKey(p.t)
	c := p.sign(&x509.Certificate{
		SerialNumber: serial(p.t), Subject: pkix.Name{CommonName: cn, Organization: []string{"BRP test"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, &key.PublicKey, p.key)
	return tls.Certificate{Certificate: [][]byte{c.Raw}, PrivateKey: key, Leaf: c}
}

// ClientFiles issues a client certificate as Client does and writes it and its key as PEM
// files, for a process's settings (BRP_STOMP_TLS_CERT, BRP_STOMP_TLS_KEY).
func (p *PKI) ClientFiles(cn string) (certFile, keyFile string) {
	p.t.Helper()
	c := p.Client(cn)
	return p.write(cn+".pem", "CERTIFICATE", c.Leaf.Raw),
		p.write(cn+"-key.pem", "PRIVATE KEY", marshalKey(p.t, c.PrivateKey.(*ecdsa.PrivateKey)))
}

// HTTPClient is a client that trusts the CA and presents certs (none: no client certificate).
func (p *PKI) HTTPClient(certs ...tls.Certificate) *http.Client {
	return &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: p.Pool, Certificates: certs, MinVersion: tls.VersionTLS12}}}
}

// ServerSPKI is the base64 SHA-256 of the server certificate's public key, as Chromium's
// --ignore-certificate-errors-spki-list takes it (trust this one key, nothing else).
func (p *PKI) ServerSPKI() string {
	sum := sha256.Sum256(p.Server.RawSubjectPublicKeyInfo)
	return base64.StdEncoding.EncodeToString(sum[:])
}

func (p *PKI) sign(tmpl *x509.Certificate, pub *ecdsa.PublicKey, key *ecdsa.PrivateKey) *x509.Certificate {
	p.t.Helper()
	parent := p.ca
	if parent == nil {
		parent = tmpl
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, key)
	if err != nil {
		p.t.Fatalf("brptest: certificate: %v", err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		p.t.Fatalf("brptest: certificate: %v", err)
	}
	return c
}

func (p *PKI) write(name, typ string, der []byte) string {
	p.t.Helper()
	path := filepath.Join(p.dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		p.t.Fatalf("brptest: %v", err)
	}
	return path
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("brptest: key: %v", err)
	}
	return k
}

func marshalKey(t testing.TB, k *ecdsa.PrivateKey) []byte {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatalf("brptest: key: %v", err)
	}
	return der
}

func serial(t testing.TB) *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		t.Fatalf("brptest: serial: %v", err)
	}
	return n
}

// Operators are the credentials files of a test's operator listener: one bearer token and
// one user with a password.
type Operators struct {
	// TokenFile holds TokenName:Token (BRP_OPERATE_TOKEN_FILE).
	TokenFile, TokenName, Token string
	// UsersFile holds User with a bcrypt hash of Password (BRP_OPERATE_USERS_FILE).
	UsersFile, User, Password string
}

// NewOperators writes the files into a temporary directory of t.
func NewOperators(t testing.TB) Operators {
	t.Helper()
	dir := t.TempDir()
	o := Operators{TokenName: "monitoring-bot", Token: rand.Text() + rand.Text(), User: "j.devries", Password: rand.Text(),
		TokenFile: filepath.Join(dir, "tokens"), UsersFile: filepath.Join(dir, "users")}
	hash, err := bcrypt.GenerateFromPassword([]byte(o.Password), bcrypt.MinCost)
	if err != nil {
		t.Fatalf("brptest: %v", err)
	}
	for path, content := range map[string]string{
		o.TokenFile: "# operators' bearer tokens\n" + o.TokenName + ":" + o.Token + "\n",
		o.UsersFile: o.User + ":" + string(hash) + "\n",
	} {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatalf("brptest: %v", err)
		}
	}
	return o
}

// Env is the environment of a publicatie whose operator listener takes an address of its
// own on loopback, serves TLS with p's server certificate, and accepts p's client
// certificates, o's token and o's user.
func (o Operators) Env(p *PKI) []string {
	return []string{"BRP_OPERATE_ADDR=127.0.0.1:0", "BRP_OPERATE_TLS_CERT=" + p.CertFile, "BRP_OPERATE_TLS_KEY=" + p.KeyFile,
		"BRP_OPERATE_CLIENT_CA=" + p.CAFile, "BRP_OPERATE_TOKEN_FILE=" + o.TokenFile, "BRP_OPERATE_USERS_FILE=" + o.UsersFile}
}
