package broker_test

import (
	"context"
	"crypto/tls"
	"testing"

	"github.com/brp/levering/broker"
	"github.com/brp/levering/internal/brptest"
)

// A broker that requires client certificates admits a process that presents one of its CA
// and refuses one without.
func TestClientCertificate(t *testing.T) {
	t.Parallel()
	server := brptest.NewPKI(t, "broker CA")
	clients := brptest.NewPKI(t, "client CA")
	cfg := brptest.Broker()
	cfg.Addr = brptest.TLSFront(t, server, "127.0.0.1", brptest.Broker().Addr, clients.Pool)
	cfg.TLS = &tls.Config{RootCAs: server.Pool, MinVersion: tls.VersionTLS12}
	if c, err := broker.Dial(context.Background(), cfg); err == nil {
		c.Disconnect()
		t.Fatal("connected without a client certificate")
	}
	cfg.TLS.Certificates = []tls.Certificate{clients.Client("publicatie")}
	c, err := broker.Dial(context.Background(), cfg)
	if err != nil {
		t.Fatalf("with a client certificate: %v", err)
	}
	c.Disconnect()
}
