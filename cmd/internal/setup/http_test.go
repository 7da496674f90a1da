package setup_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/brp/levering/broker"
	"github.com/brp/levering/cmd/internal/setup"
	"github.com/brp/levering/internal/brptest"
)

// dependency_up says at scrape time what /readyz says about the database and the broker, so
// the DependencyDown alert fires for whichever a process lost.
func TestDependencyUpFollowsTheReadinessChecks(t *testing.T) {
	t.Parallel()
	brokerDown := errors.New("connection refused")
	var brokerErr error
	reg := prometheus.NewRegistry()
	mux := setup.Mux(reg, nil,
		setup.Check{Name: "database", Check: func(context.Context) error { return nil }},
		setup.Check{Name: "broker", Check: func(context.Context) error { return brokerErr }},
		setup.Check{Name: "batches", Check: func(context.Context) error { return nil }})
	want := func(broker string) string {
		return `# HELP brp_levering_dependency_up 1 if this process reaches the dependency (its readiness check passed at scrape time), else 0.
# TYPE brp_levering_dependency_up gauge
brp_levering_dependency_up{dependency="broker"} ` + broker + `
brp_levering_dependency_up{dependency="database"} 1
`
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want("1")), "brp_levering_dependency_up"); err != nil {
		t.Fatal(err)
	}
	brokerErr = brokerDown
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want("0")), "brp_levering_dependency_up"); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	if rec.Code != 503 || !strings.Contains(rec.Body.String(), "connection refused") {
		t.Fatalf("/readyz: %d %s", rec.Code, rec.Body)
	}
}

// Durations are logged in seconds under a key that says so, not as slog's nanoseconds.
func TestLoggerWritesDurationsInSeconds(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	setup.Common{LogFormat: "json", LogLevel: setup.LogLevel(slog.LevelInfo)}.Logger(&b).Info("round committed",
		slog.Duration("duration", 1500*time.Millisecond), slog.Duration("wait_seconds", 2*time.Second))
	if !strings.Contains(b.String(), `"duration_seconds":1.5,`) || !strings.Contains(b.String(), `"wait_seconds":2}`) {
		t.Fatalf("logged %s", b.String())
	}
}

// Every process says which build it runs.
func TestBuildInfoIsExported(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	setup.Mux(reg, nil)
	b := setup.BuildInfo()
	want := `# HELP brp_levering_build_info 1; the labels say which build this process runs.
# TYPE brp_levering_build_info gauge
brp_levering_build_info{goversion="` + b.GoVersion + `",revision="` + b.Revision + `",version="dev"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "brp_levering_build_info"); err != nil {
		t.Fatal(err)
	}
}

// BRP_STOMP_TLS_CERT and BRP_STOMP_TLS_KEY give the broker connection a client certificate
// (mTLS); one without the other, or files that are not a key pair, are a bad setting.
func TestBrokerClientCertificateFromTheEnvironment(t *testing.T) {
	t.Parallel()
	server := brptest.NewPKI(t, "broker CA")
	clients := brptest.NewPKI(t, "client CA")
	cert, key := clients.ClientFiles("mutatielevering")
	common := setup.Common{
		StompAddr:     setup.BrokerAddrs(brptest.TLSFront(t, server, "127.0.0.1", brptest.Broker().Addr, clients.Pool)),
		StompLogin:    brptest.Broker().Login,
		StompPasscode: brptest.Broker().Passcode,
		StompHost:     brptest.Broker().Host,
		StompTLSCA:    server.CAFile,
		StompTLSCert:  cert,
		StompTLSKey:   key,
	}
	cfg, err := common.Broker(broker.Config{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := broker.Dial(context.Background(), cfg)
	if err != nil {
		t.Fatalf("dial with the client certificate: %v", err)
	}
	c.Disconnect()
	for _, bad := range []setup.Common{
		{StompTLSCert: cert},
		{StompTLSKey: key},
		{StompTLSCert: cert, StompTLSKey: cert},
		{StompTLSCert: "/nonexistent.pem", StompTLSKey: key},
	} {
		if _, err := bad.Broker(broker.Config{}); !errors.Is(err, setup.ErrConfig) || !strings.Contains(err.Error(), "BRP_STOMP_TLS_CERT") {
			t.Errorf("%+v: %v, want ErrConfig naming BRP_STOMP_TLS_CERT", bad, err)
		}
	}
}
