package setup_test

import (
	"strings"
	"testing"

	"github.com/brp/levering/internal/brptest"
)

// Bad values of the settings both commands share.
var commonBad = [][2]string{
	{"BRP_DATABASE_URL", "not a url"},
	{"BRP_DATABASE_URL", "postgres://host:notaport/db"},
	{"BRP_STOMP_ADDR", "localhost"},
	{"BRP_STOMP_ADDR", "localhost:0"},
	{"BRP_STOMP_ADDR", "localhost:99999"},
	{"BRP_STOMP_ADDR", ""},
	{"BRP_STOMP_ADDR", ","},
	{"BRP_STOMP_ADDR", "amq-a:61613,,amq-b:61613"},
	{"BRP_STOMP_ADDR", "amq-a:61613,"},
	{"BRP_STOMP_ADDR", "amq-a:61613,amq-b"},
	{"BRP_STOMP_ADDR", "amq-a:61613,:61613"},
	{"BRP_STOMP_ADDR", "amq-a:61613,amq-b:0"},
	{"BRP_STOMP_ADDR", "amq-a:61613,amq-a:61613"},
	{"BRP_STOMP_RANDOMIZE", "sometimes"},
	{"BRP_STOMP_TLS", "maybe"},
	{"BRP_STOMP_TLS_CA", "/nonexistent/ca.pem"},
	{"BRP_STOMP_HEARTBEAT", "-1s"},
	{"BRP_STOMP_HEARTBEAT", "often"},
	{"BRP_STOMP_HEARTBEAT", "100ms"},
	{"BRP_DATABASE_STATEMENT_TIMEOUT", "long"},
	{"BRP_DATABASE_STATEMENT_TIMEOUT", "-1s"},
	{"BRP_DATABASE_LOCK_TIMEOUT", "5"},
	{"BRP_DATABASE_IDLE_IN_TRANSACTION_TIMEOUT", "-10s"},
	{"BRP_TCP_USER_TIMEOUT", "forever"},
	{"BRP_STOMP_TIMEOUT", "abc"},
	{"BRP_STOMP_TIMEOUT", "1000h"},
	{"BRP_DATABASE_STATEMENT_TIMEOUT", "9223372036s"},
	{"BRP_LOG_FORMAT", "xml"},
	{"BRP_DATABASE_LAYOUT", "kernel"},
	{"BRP_LOG_LEVEL", "loud"},
	{"BRP_HTTP_ADDR", "nowhere"},
	{"BRP_LEVERING_ADMHNDPUBLICATIE_QUEUE", "no-slash"},
	{"BRP_LEVERING_ADMHNDPUBLICATIE_QUEUE", ""},
}

var publicatieBad = [][2]string{
	{"BRP_LEVERING_ADMHNDPUBLICATIE_DELAY", "abc"},
	{"BRP_LEVERING_ADMHNDPUBLICATIE_DELAY", "-5"},
	{"BRP_LEVERING_ADMHNDPUBLICATIE_DELAY", "0"},
	{"BRP_LEVERING_ADMHNDPUBLICATIE_DELAY", "-250ms"},
	{"BRP_LEVERING_ADMHNDPUBLICATIE_LIMIT", "0"},
	{"BRP_LEVERING_ADMHNDPUBLICATIE_LIMIT", "-1"},
	{"BRP_LEVERING_ADMHNDPUBLICATIE_LIMIT", "many"},
	{"BRP_LEVERING_ADMHNDPUBLICATIE_LIMIT", "9223372036854775807"},
	{"BRP_LEVERING_ADMHNDPUBLICATIE_VIEWSIZE", "100000000"},
	{"BRP_LEVERING_ADMHNDPUBLICATIE_VIEWBYTES", "0"},
	{"BRP_LEVERING_ADMHNDPUBLICATIE_VIEWBYTES", "32 MiBs"},
	{"BRP_LEVERING_ADMHNDPUBLICATIE_VIEWBYTES", "-1MiB"},
	{"BRP_LEVERING_ADMHNDPUBLICATIE_VIEWBYTES", "65GiB"},
	{"BRP_LEVERING_ADMHNDPUBLICATIE_VIEWBYTES", "9223372036854775807GiB"},
	{"BRP_LEVERING_ADMHNDPUBLICATIE_PERSONCAP", "0"},
	{"BRP_LEVERING_ADMHNDPUBLICATIE_PERSONCAP", "20000000"},
	{"BRP_LEVERING_ADMHNDPUBLICATIE_MAXINLEVERING", "0"},
	{"BRP_LEVERING_ADMHNDPUBLICATIE_MAXINLEVERING", "1.5"},
	{"BRP_LEVERING_ADMHNDPUBLICATIE_FOUTPOLICY", "lenient"},
	{"BRP_LEVERING_ADMHNDPUBLICATIE_CLUSTER", ""},
	{"BRP_LEVERING_ADMHNDPUBLICATIE_WARTEZEIT", "5"},
	{"BRP_LEVERING_ADMHNDPUBLICATIE_WARTEZEIT", "abc"},
	{"BRP_LEVERING_ADMHNDPUBLICATIE_STANDALONE", "perhaps"},
	{"BRP_LEVERING_ADMHNDPUBLICATIE_REDELIVERYTIMEOUT", "0"},
	{"BRP_LEVERING_ADMHNDPUBLICATIE_REDELIVERYTIMEOUT", "soon"},
	{"BRP_LEVERING_ADMHNDPUBLICATIE_WAKEUP", "sometimes"},
	{"BRP_MIGRATE_WAIT", "soon"},
	{"BRP_MIGRATE_WAIT", "0"},
	{"BRP_MIGRATE_WAIT", "48h"},
	// The operator listener: not on the network without a way to authenticate operators.
	{"BRP_OPERATE_ADDR", "nowhere"},
	{"BRP_OPERATE_ADDR", "0.0.0.0:0"},
	{"BRP_OPERATE_ADDR", ":0"},
	{"BRP_OPERATE_ADDR", "[::]:0"},
	{"BRP_OPERATE_ADDR", "brp.example.invalid:9465"},
	{"BRP_OPERATE_TLS_CERT", "/nonexistent/cert.pem"},
	{"BRP_OPERATE_TLS_KEY", "/nonexistent/key.pem"},
	{"BRP_OPERATE_CLIENT_CA", "/nonexistent/ca.pem"},
	{"BRP_OPERATE_TOKEN_FILE", "/nonexistent/tokens"},
	{"BRP_OPERATE_TOKEN_FILE", "/etc/hostname"},
	{"BRP_OPERATE_USERS_FILE", "/nonexistent/users"},
	{"BRP_OPERATE_USERS_FILE", "/etc/hostname"},
	{"BRP_OPERATE_PROXY_HEADER", "X-Forwarded-Email"},
	{"BRP_OPERATE_PROXY_HEADER", "X Forwarded"},
	{"BRP_OPERATE_PROXY_HEADER", "Authorization"},
	{"BRP_OPERATE_PROXY_ADDRS", "10.0.0.7"},
	{"BRP_OPERATE_PROXY_ADDRS", "proxy.example"},
}

var mutatieleveringBad = [][2]string{
	{"BRP_LEVERING_VERZENDING_QUEUE", "verzending"},
	{"BRP_LEVERING_MUTATIELEVERING_DLQ", "/"},
	{"BRP_LEVERING_MUTATIELEVERING_WORKERS", "0"},
	{"BRP_LEVERING_MUTATIELEVERING_WORKERS", "x"},
	{"BRP_LEVERING_MUTATIELEVERING_PREFETCH", "-1"},
	{"BRP_LEVERING_MUTATIELEVERING_PREFETCH", "9223372036854775807"},
	{"BRP_LEVERING_MUTATIELEVERING_WORKERS", "1000"},
	{"BRP_LEVERING_MUTATIELEVERING_BATCH", "0"},
	{"BRP_LEVERING_MUTATIELEVERING_BATCHTIMEOUT", "0"},
	{"BRP_LEVERING_MUTATIELEVERING_BATCHTIMEOUT", "a while"},
}

func checkBad(t *testing.T, pkg string, cases [][2]string) {
	bin := brptest.Build(t, pkg)
	for _, c := range cases {
		name, value := c[0], c[1]
		t.Run(name+"="+value, func(t *testing.T) {
			t.Parallel()
			code, stderr := brptest.RunBad(t, bin, name, value)
			if code != 2 {
				t.Fatalf("exit code %d, want 2; stderr:\n%s", code, stderr)
			}
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			if len(lines) != 1 || !strings.Contains(lines[0], name) || !strings.Contains(lines[0], "expected") {
				t.Fatalf("want one line naming %s and what is expected, got:\n%s", name, stderr)
			}
		})
	}
}

func TestPublicatieRejectsBadEnvironment(t *testing.T) {
	t.Parallel()
	checkBad(t, "cmd/publicatie", append(append([][2]string{}, commonBad...), publicatieBad...))
}

func TestMutatieleveringRejectsBadEnvironment(t *testing.T) {
	t.Parallel()
	checkBad(t, "cmd/mutatielevering", append(append([][2]string{}, commonBad...), mutatieleveringBad...))
}

func TestUnknownSubcommandExits2(t *testing.T) {
	t.Parallel()
	code, stderr := brptest.RunBad(t, brptest.Build(t, "cmd/publicatie"), "BRP_LOG_LEVEL", "info", "frobnicate")
	if code != 2 || !strings.Contains(stderr, "usage") {
		t.Fatalf("exit %d, stderr %q; want 2 and usage", code, stderr)
	}
}
