package broker_test

import (
	"context"
	"crypto/tls"
	"net"
	"strings"
	"testing"

	"github.com/brp/levering/broker"
	"github.com/brp/levering/internal/brptest"
)

// Over TLS, each node's certificate is checked against that node's own host when the config
// names no ServerName: a list of nodes has no one name.
func TestTLSChecksEachNodesHost(t *testing.T) {
	t.Parallel()
	pki := brptest.NewPKI(t, "broker CA")
	_, port, _ := net.SplitHostPort(brptest.TLSFront(t, pki, "127.0.0.1", brptest.Broker().Addr, nil))
	cfg := brptest.Broker()
	cfg.TLS = &tls.Config{RootCAs: pki.Pool, MinVersion: tls.VersionTLS12}
	for _, addr := range []string{"localhost:" + port, deadNode(t) + ",127.0.0.1:" + port} {
		cfg.Addr = addr
		c, err := broker.Dial(context.Background(), cfg)
		if err != nil {
			t.Fatalf("dial %s over TLS: %v", addr, err)
		}
		if c.Profile.Name != "ActiveMQ" {
			t.Fatalf("dial %s over TLS: server %q", addr, c.Server)
		}
		c.Close()
	}
	if cfg.TLS.ServerName != "" {
		t.Fatalf("Dial changed the caller's TLS config: ServerName %q", cfg.TLS.ServerName)
	}
	cfg.Addr = brptest.TLSFront(t, pki, "127.0.0.2", brptest.Broker().Addr, nil) // 127.0.0.2 is not in the certificate
	c, err := broker.Dial(context.Background(), cfg)
	if err == nil {
		c.Close()
		t.Fatal("dial of a node whose host the certificate does not name succeeded")
	}
	if !strings.Contains(err.Error(), "not 127.0.0.2") {
		t.Fatalf("dial of a node whose host the certificate does not name: %v, want a certificate error", err)
	}
}
