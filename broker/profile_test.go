package broker

import (
	"context"
	"testing"
)

// For the conformance suite in package broker_test (which imports internal/brptest, which
// imports this package, so it cannot live in package broker).
var ProfileFor = profileFor

func SendEach(ctx context.Context, c *Conn, msgs ...Message) error { return c.sendEach(ctx, msgs) }

// QuietLogger is the logger Dial gives go-stomp, for the suite's plain go-stomp connections.
var QuietLogger = quietLogger{}

func TestProfileFor(t *testing.T) {
	for _, tc := range []struct {
		server        string
		name          string
		durableCommit bool
	}{
		{"ActiveMQ/5.17.2", "ActiveMQ", true},
		{"ActiveMQ/6.1.0", "ActiveMQ", true},
		{"RabbitMQ/3.10.8", "RabbitMQ", false},
		{"RabbitMQ/4.0.5", "RabbitMQ", false},
		// Not measured: the careful profile.
		{"ActiveMQ-Artemis/2.31.2 ActiveMQ Artemis Messaging Engine", "unknown", false},
		{"Apache/1.0", "unknown", false},
		{"", "unknown", false},
		{"activemq/5.17.2", "unknown", false},
	} {
		p := profileFor(tc.server)
		if p.Name != tc.name || p.DurableCommit != tc.durableCommit {
			t.Errorf("profileFor(%q) = %+v, want Name %q DurableCommit %v", tc.server, p, tc.name, tc.durableCommit)
		}
	}
}

func TestSendEachEmpty(t *testing.T) {
	// No message: no broker call, so a Conn without a connection will do.
	if err := (&Conn{}).sendEach(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
}
