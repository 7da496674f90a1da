package scenarios

// High availability: the service on an ActiveMQ master/slave pair (the master killed mid-run),
// on a network of two ActiveMQ brokers (publisher on one, consumers on both, the verzending
// queue read from either), and on a PostgreSQL primary with a streaming standby behind one
// endpoint (the primary killed, the standby promoted, the endpoint switched).

import (
	"context"
	"fmt"

	"testing"
	"time"

	"github.com/brp/levering/broker"
	"github.com/brp/levering/internal/brptest"
	"github.com/brp/levering/internal/load"
)

// connectedTo returns the nodes of p's "connected to broker" lines logged after from.
func connectedTo(p *brptest.Proc, from time.Time) []string {
	var nodes []string
	for _, l := range p.Lines("connected to broker") {
		if lineTime(l).After(from) {
			nodes = append(nodes, fmt.Sprint(l["addr"]))
		}
	}
	return nodes
}

// waitInFlight waits until the world's pipeline is busy: some handelingen delivered, some in
// levering, and more than half still to come.
func (w *world) waitInFlight(t testing.TB, delivered int) {
	t.Helper()
	brptest.Eventually(t, 2*time.Minute, func() error {
		st := brptest.Statuses(t, w.db)
		if st["geleverd"] < delivered || st["in_levering"] == 0 {
			return errorf("statuses %v: waiting for %d delivered and some in levering", st, delivered)
		}
		return nil
	})
	if st := brptest.Statuses(t, w.db); st["geleverd"] > len(w.hs)/2 {
		t.Fatalf("statuses %v: the run is too far along to fail over mid-run", st)
	}
}

// nodeMetric returns p's brp_levering_broker_node sample for node.
func nodeMetric(t testing.TB, p *brptest.Proc, node string) float64 {
	t.Helper()
	v, ok := scrape(t, p)[`brp_levering_broker_node{node="`+node+`"}`]
	if !ok {
		t.Fatalf("%s exposes no brp_levering_broker_node for %s", p.Name, node)
	}
	return v
}

// The master of an ActiveMQ master/slave pair (one KahaDB store, two ports) is killed with -9
// mid-run. The slave takes the store's lock and opens its port; the publisher and the consumers,
// which name both nodes in BRP_STOMP_ADDR, go round the list to it. Nothing is lost (the store
// holds every confirmed message; no publication had to be published again), per-person order
// holds, and the processes say which node they use.
func TestActiveMQMasterSlaveFailover(t *testing.T) {
	// Not parallel with the other scenarios: two servers of its own, and failover times to measure.
	pair := brptest.PrivateBrokerPair(t)
	w := newWorldBroker(t, pair.Broker(), load.Spec{N: 12000, Personen: 1200, Multi: 0.3, Excluded: 0.05, Seed: 80})
	pub := w.publisherProc(t, "publicatie", brptest.Build(t, "cmd/publicatie"))
	var consumers []*brptest.Proc
	for i := range 3 {
		consumers = append(consumers, w.consumerProc(t, fmt.Sprintf("mutatielevering-%d", i+1), brptest.Build(t, "cmd/mutatielevering")))
	}
	w.waitInFlight(t, 1000)
	for _, c := range consumers {
		if _, body := readyz(t, c); body["broker_node"] != pair.A {
			t.Fatalf("%s readyz before the failover: %v, want broker_node %s", c.Name, body, pair.A)
		}
	}

	before := w.delivered(t)
	pair.Kill("a")
	killed := time.Now()
	slaveUp := waitBroker(t, pair.Broker(pair.B), time.Minute).Sub(killed)
	brptest.Eventually(t, time.Minute, func() error {
		if d := w.delivered(t); d < before+100 {
			return errorf("%d delivered, %d at the kill: deliveries have not resumed", d, before)
		}
		return nil
	})
	resumed := time.Since(killed)
	rep := w.verify(t)

	var reconnected time.Duration
	for _, p := range append([]*brptest.Proc{pub}, consumers...) {
		nodes := connectedTo(p, killed)
		if len(nodes) == 0 || nodes[len(nodes)-1] != pair.B {
			t.Fatalf("%s connected to %v after the kill, want %s", p.Name, nodes, pair.B)
		}
		for _, l := range p.Lines("connected to broker") {
			if lineTime(l).After(killed) {
				reconnected = max(reconnected, lineTime(l).Sub(killed))
				break
			}
		}
	}
	for _, c := range consumers {
		if _, body := readyz(t, c); body["broker_node"] != pair.B {
			t.Errorf("%s readyz after the failover: %v, want broker_node %s", c.Name, body, pair.B)
		}
		if a, b := nodeMetric(t, c, pair.A), nodeMetric(t, c, pair.B); a != 0 || b != 1 {
			t.Errorf("%s brp_levering_broker_node: %s=%v %s=%v, want 0 and 1", c.Name, pair.A, a, pair.B, b)
		}
	}
	if n := scrape(t, pub)["brp_levering_republished_total"]; n != 0 {
		t.Fatalf("%v publications had to be published again: the failover lost messages", n)
	}
	t.Logf("master killed with %d of %d delivered: slave serving STOMP after %v, every process reconnected to it within %v, "+
		"deliveries resumed after %v; %d verzending messages, %d duplicates",
		before, rep.Distinct, slaveUp.Round(time.Millisecond), reconnected.Round(time.Millisecond), resumed.Round(time.Millisecond),
		rep.Messages, rep.Duplicates)
}

// waitBroker waits until the broker of cfg answers a STOMP CONNECT and returns when it did.
func waitBroker(t testing.TB, cfg broker.Config, timeout time.Duration) time.Time {
	t.Helper()
	cfg.OpTimeout = time.Second
	var at time.Time
	brptest.Eventually(t, timeout, func() error {
		c, err := broker.Dial(context.Background(), cfg)
		if err != nil {
			return err
		}
		at = time.Now()
		c.Close()
		return nil
	})
	return at
}

// A network of two ActiveMQ brokers, a and b, each with a store of its own and a network
// connector to the other. Every process lists both (a first). The publisher sends to a; the
// consumers subscribe on a node picked at random (more are started until both brokers have
// some), so those on b get their publications across the bridge; all send their verzending
// messages to a, the first node. The verzending queue is read on a in one run and on b in the
// other. Nothing is lost and per-person order holds, although the brokers' queues are not one
// FIFO: only persons' oldest open handelingen are ever in flight.
func TestNetworkOfBrokers(t *testing.T) {
	// Not parallel with the other scenarios: two servers of its own, and failover times to measure.
	nw := brptest.PrivateBrokerNetwork(t)
	for _, reader := range []string{"a", "b"} {
		t.Run("verzending_read_on_"+reader, func(t *testing.T) {
			t.Parallel()
			node := map[string]string{"a": nw.A, "b": nw.B}[reader]
			w := newWorldBroker(t, nw.Broker(node), load.Spec{N: 6000, Personen: 600, Multi: 0.3, Excluded: 0.05, Seed: 81})
			both := "BRP_STOMP_ADDR=" + nw.A + "," + nw.B
			perNode := map[string][]*brptest.Proc{}
			for i := 0; len(perNode[nw.A]) == 0 || len(perNode[nw.B]) == 0 || i < 4; i++ {
				if i == 16 {
					t.Fatalf("16 consumers with a random start, none on one of the brokers: %v", perNode)
				}
				c := w.consumerProc(t, fmt.Sprintf("mutatielevering-%d", i+1), brptest.Build(t, "cmd/mutatielevering"), both)
				c.WaitReady(30 * time.Second)
				r, err := c.Readiness(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				if r.Body["verzending_node"] != nw.A {
					t.Fatalf("%s sends its verzending messages to %v, want %s (the first node)", c.Name, r.Body["verzending_node"], nw.A)
				}
				n := fmt.Sprint(r.Body["broker_node"])
				perNode[n] = append(perNode[n], c)
			}
			pub := w.publisherProc(t, "publicatie", brptest.Build(t, "cmd/publicatie"), both)
			rep := w.verify(t)
			delivered := map[string]int{}
			for n, cs := range perNode {
				for _, c := range cs {
					delivered[n] += deliveredBy(c, time.Time{})
				}
			}
			if nodes := connectedTo(pub, time.Time{}); len(nodes) == 0 || nodes[0] != nw.A {
				t.Fatalf("publisher connected to %v, want %s", nodes, nw.A)
			}
			t.Logf("verzending read on %s: %d messages, %d duplicates; consumers subscribed on a: %d, on b: %d; "+
				"delivered by those on a: %d, on b: %d", reader, rep.Messages, rep.Duplicates,
				len(perNode[nw.A]), len(perNode[nw.B]), delivered[nw.A], delivered[nw.B])
			if delivered[nw.A] == 0 || delivered[nw.B] == 0 {
				t.Fatalf("the consumers of one broker delivered nothing: %v", delivered)
			}
			if n := scrape(t, pub)["brp_levering_republished_total"]; n != 0 {
				t.Fatalf("%v publications had to be published again", n)
			}
		})
	}
}
