package brptest

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"testing"
)

// TLSFront terminates TLS on host with pki's server certificate (localhost, 127.0.0.1) in
// front of upstream, as stunnel, a load balancer or a broker's own TLS connector would, and
// returns its address. With clientCAs it requires a client certificate of one of them
// (needClientAuth).
func TLSFront(t testing.TB, pki *PKI, host, upstream string, clientCAs *x509.CertPool) string {
	t.Helper()
	NeedsServices(t)
	cert, err := tls.LoadX509KeyPair(pki.CertFile, pki.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	tc := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if clientCAs != nil {
		tc.ClientAuth, tc.ClientCAs = tls.RequireAndVerifyClientCert, clientCAs
	}
	l, err := tls.Listen("tcp", host+":0", tc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if err := c.(*tls.Conn).Handshake(); err != nil {
					return
				}
				u, err := net.Dial("tcp", upstream)
				if err != nil {
					return
				}
				defer u.Close()
				go func() { _, _ = io.Copy(u, c); u.Close() }()
				_, _ = io.Copy(c, u)
			}()
		}
	}()
	return l.Addr().String()
}
