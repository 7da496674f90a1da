package broker_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/brp/levering/broker"
	"github.com/brp/levering/handeling"
	"github.com/brp/levering/internal/brptest"
)

// deadNode returns a loopback host:port on which nothing listens: connections are refused.
func deadNode(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// A list whose first node is down: Dial goes on to the next, says which node it reached, and
// names every node in its error when none answers.
func TestDialGoesRoundTheList(t *testing.T) {
	t.Parallel()
	brptest.NeedsServices(t)
	live := brptest.Broker()
	dead := deadNode(t)
	cfg := live
	cfg.Addr = dead + "," + live.Addr
	d, err := broker.NewDialer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, err := d.Dial(context.Background())
	if err != nil {
		t.Fatalf("dial %s: %v", cfg.Addr, err)
	}
	defer c.Close()
	if c.Node != live.Addr || d.Current() != live.Addr {
		t.Fatalf("connected to node %q (current %q), want %s", c.Node, d.Current(), live.Addr)
	}

	cfg.Addr = dead + "," + deadNode(t)
	_, err = broker.Dial(context.Background(), cfg)
	if err == nil {
		t.Fatal("dial of two dead nodes succeeded")
	}
	for _, n := range strings.Split(cfg.Addr, ",") {
		if !strings.Contains(err.Error(), n) {
			t.Fatalf("the error does not name node %s: %v", n, err)
		}
	}
}

// Two nodes (fault proxies in front of the test broker); the first stops answering without
// closing anything (a partition). A fresh Dialer tries it first and waits OpTimeout for it; a
// Dialer told that its connection there was lost goes to the second node at once.
func TestLostNodeIsTriedLast(t *testing.T) {
	t.Parallel()
	live := brptest.Broker()
	a, b := brptest.NewProxy(t, live.Addr), brptest.NewProxy(t, live.Addr)
	cfg := live
	cfg.Addr, cfg.OpTimeout = a.Addr()+","+b.Addr(), 2*time.Second
	d, err := broker.NewDialer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c, err := d.Dial(ctx)
	if err != nil || c.Node != a.Addr() {
		t.Fatalf("first dial: node %v, %v; want %s", c, err, a.Addr())
	}
	a.Cut()
	defer a.Heal()
	if err := c.Send(ctx, broker.Message{Destination: "/queue/test." + brptest.Name(t), Header: handeling.IDHeaders(1), Body: []byte(`{}`)}); err == nil {
		t.Fatal("send through the cut node succeeded")
	}
	d.Lost(c)
	if cur := d.Current(); cur != "" {
		t.Fatalf("current node %q after the loss, want none", cur)
	}
	start := time.Now()
	c2, err := d.Dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if took := time.Since(start); c2.Node != b.Addr() || took > time.Second {
		t.Fatalf("after the loss: node %s in %v, want %s at once", c2.Node, took, b.Addr())
	}

	fresh, err := broker.NewDialer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	c3, err := fresh.Dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	took := time.Since(start)
	t.Logf("a fresh dialer reached %s after %v (the cut first node cost OpTimeout %v)", c3.Node, took.Round(time.Millisecond), cfg.OpTimeout)
	if c3.Node != b.Addr() || took < cfg.OpTimeout {
		t.Fatalf("fresh dialer: node %s in %v, want %s after waiting OpTimeout on the first", c3.Node, took, b.Addr())
	}
}

// A first Dialer goes back to the first node whenever it answers: after a lost connection, and
// whatever RandomStart says; an ordinary one moves on.
func TestFirstDialerReturnsToTheFirstNode(t *testing.T) {
	t.Parallel()
	live := brptest.Broker()
	cfg := live
	cfg.Addr = brptest.NewProxy(t, live.Addr).Addr() + "," + brptest.NewProxy(t, live.Addr).Addr()
	cfg.RandomStart = true
	first, err := broker.NewFirstDialer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.RandomStart = false
	ordinary, err := broker.NewDialer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	nodes := first.Nodes()
	for _, tc := range []struct {
		name      string
		d         *broker.Dialer
		afterLoss string
	}{{"first", first, nodes[0]}, {"ordinary", ordinary, nodes[1]}} {
		c, err := tc.d.Dial(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if c.Node != nodes[0] {
			t.Fatalf("%s dialer: node %s, want the first, %s", tc.name, c.Node, nodes[0])
		}
		c.Close()
		tc.d.Lost(c)
		c, err = tc.d.Dial(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		if c.Node != tc.afterLoss {
			t.Fatalf("%s dialer after a loss: node %s, want %s", tc.name, c.Node, tc.afterLoss)
		}
	}
}

// A broker that takes longer to confirm a transaction than the heart-beat write interval (a
// busy machine storing it) is slow, not gone: the send succeeds and the connection stays
// usable. go-stomp v3.1.5 gave up on the receipt after that interval and reported the
// connection closed (third_party/go-stomp/README.md).
func TestSlowReceiptKeepsTheConnection(t *testing.T) {
	t.Parallel()
	live := brptest.Broker()
	p := brptest.NewProxy(t, live.Addr)
	cfg := live
	// Heart-beats every 2 s: go-stomp writes its own after 1 s without other writes, and
	// waited for a receipt no longer than that.
	cfg.Addr, cfg.HeartBeat = p.Addr(), 2*time.Second
	ctx := context.Background()
	c, err := broker.Dial(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !c.Profile.DurableCommit {
		t.Fatalf("broker %s: want one with transactions confirmed by a receipt (ActiveMQ)", c.Server)
	}
	p.Delay(1500 * time.Millisecond)
	queue := "/queue/test." + brptest.Name(t)
	for i := range 2 {
		start := time.Now()
		err := c.Send(ctx,
			broker.Message{Destination: queue, Header: handeling.IDHeaders(int64(2*i + 1)), Body: []byte(`{}`)},
			broker.Message{Destination: queue, Header: handeling.IDHeaders(int64(2*i + 2)), Body: []byte(`{}`)})
		if err != nil {
			t.Fatalf("transaction %d, confirmed 1.5 s late: %v after %v", i+1, err, time.Since(start).Round(time.Millisecond))
		}
	}
}
