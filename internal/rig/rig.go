// Package rig runs the real commands against the real services for the tests, the benchmark
// and the demo: it builds their environment, starts publicatie and mutatielevering processes
// and watches their logs, waits on their /readyz, scrapes their /metrics, reads CPU and memory
// from /proc, creates fresh migrated databases and reads or drains queues. It returns errors;
// internal/brptest wraps it for tests (failing the test instead).
package rig

import (
	"os"
	"slices"
	"strings"

	"github.com/brp/levering/broker"
)

// Queues are the destinations one run's processes use.
type Queues struct {
	Publicatie, Verzending, DLQ string
}

// QueuesNamed returns the queues under prefix (for example "/queue/test.x"):
// prefix.admhndpublicatie, prefix.verzending and prefix.dlq.
func QueuesNamed(prefix string) Queues {
	return Queues{Publicatie: prefix + ".admhndpublicatie", Verzending: prefix + ".verzending", DLQ: prefix + ".dlq"}
}

// Env is the settings of a publicatie or mutatielevering process that uses the broker of b,
// the database of dbURL and the queues q, then extra (later settings win).
func Env(b broker.Config, dbURL string, q Queues, extra ...string) []string {
	env := []string{
		"BRP_DATABASE_URL=" + dbURL,
		"BRP_STOMP_ADDR=" + b.Addr,
		"BRP_STOMP_LOGIN=" + b.Login,
		"BRP_STOMP_PASSCODE=" + b.Passcode,
		"BRP_STOMP_HOST=" + b.Host,
		"BRP_LEVERING_ADMHNDPUBLICATIE_QUEUE=" + q.Publicatie,
		"BRP_LEVERING_VERZENDING_QUEUE=" + q.Verzending,
		"BRP_LEVERING_MUTATIELEVERING_DLQ=" + q.DLQ,
	}
	return append(env, extra...)
}

// Environ is the complete environment of a process with settings: this process's environment
// without its BRP_ variables (so that a shell's tuning does not leak in), JSON logs, a probe
// listener on a free loopback port, then settings (later ones win).
func Environ(settings ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "BRP_") {
			env = append(env, kv)
		}
	}
	env = append(env, "BRP_LOG_FORMAT=json", "BRP_HTTP_ADDR=127.0.0.1:0")
	return append(env, settings...)
}

// envSet are the variables Env and Environ set.
var envSet = []string{"BRP_LOG_FORMAT", "BRP_HTTP_ADDR", "BRP_DATABASE_URL", "BRP_STOMP_ADDR", "BRP_STOMP_LOGIN",
	"BRP_STOMP_PASSCODE", "BRP_STOMP_HOST", "BRP_LEVERING_ADMHNDPUBLICATIE_QUEUE", "BRP_LEVERING_VERZENDING_QUEUE",
	"BRP_LEVERING_MUTATIELEVERING_DLQ"}

// Inherit returns this process's environment variables whose names start with prefix, except
// those Env and Environ set: settings of the shell to pass on as Env's extra (the broker's TLS, a log level).
func Inherit(prefix string) []string {
	var out []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, prefix) && !slices.Contains(envSet, name) {
			out = append(out, kv)
		}
	}
	return out
}
