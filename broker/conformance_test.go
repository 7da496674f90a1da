package broker_test

// The broker conformance suite: what the service relies on from a STOMP broker, run against
// every broker reachable here (the idea of Watermill's pub/sub test suite: one suite every
// broker must pass).
//
//   - ActiveMQ, BRP_STOMP_ADDR (default 127.0.0.1:61613), always: the suite fails when it is
//     not reachable (scripts/services.sh up).
//   - RabbitMQ, BRP_RABBITMQ_STOMP_ADDR with BRP_RABBITMQ_STOMP_LOGIN/_PASSCODE/_HOST (HOST
//     default "/", RabbitMQ's virtual host; go-stomp's default host header is the address,
//     which RabbitMQ refuses), when set: scripts/services.sh up-rabbitmq and
//     eval "$(scripts/services.sh env)". Unset, that half is skipped.
//
// Messages are told apart by body and admhnd-id, never by message-id: RabbitMQ gives every
// delivery a new one. Every case uses queues of its own, so the cases run in parallel and
// next to the other packages' tests on the same broker.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-stomp/stomp/v3"

	"github.com/brp/levering/broker"
	"github.com/brp/levering/handeling"
	"github.com/brp/levering/internal/brptest"
)

const (
	// waitMsg bounds the wait for a message that must come.
	waitMsg = 15 * time.Second
	// quiet is how long a subscription is watched for a message that must not come. The
	// sentinel checks below make the verdict exact; this only catches late arrivals.
	quiet = 500 * time.Millisecond
)

// target is one broker under test.
type target struct {
	name string
	cfg  broker.Config
	// product, when set, is the profile the broker's CONNECTED server header must give.
	product string
	skip    string
}

func targets() []target {
	amq := target{name: "ActiveMQ", cfg: brptest.Broker()}
	rmq := target{name: "RabbitMQ", product: "RabbitMQ"}
	if addr := os.Getenv("BRP_RABBITMQ_STOMP_ADDR"); addr != "" {
		host := os.Getenv("BRP_RABBITMQ_STOMP_HOST")
		if host == "" {
			host = "/"
		}
		rmq.cfg = broker.Config{Addr: addr, Login: os.Getenv("BRP_RABBITMQ_STOMP_LOGIN"),
			Passcode: os.Getenv("BRP_RABBITMQ_STOMP_PASSCODE"), Host: host, OpTimeout: 20 * time.Second}
	} else {
		rmq.skip = `BRP_RABBITMQ_STOMP_ADDR is not set, RabbitMQ not tested: scripts/services.sh up-rabbitmq && eval "$(scripts/services.sh env)"`
	}
	return []target{amq, rmq}
}

type conformanceCase struct {
	name string
	run  func(t *testing.T, tg target)
}

var conformanceCases = []conformanceCase{
	{"Connected", testConnected},
	{"PersistentSendWithReceipt", testPersistentSend},
	{"TransactionArrivesCompleteInOrder", testTransactionInOrder},
	{"SendEachArrivesCompleteInOrder", testSendEachInOrder},
	{"TransactionDroppedBeforeCommitDeliversNothing", testTransactionDropped},
	{"ClientIndividualAckRedeliversOnlyUnacked", testClientIndividualAck},
	{"CumulativeAckCoversEarlierMessagesOnly", testCumulativeAck},
	{"DroppedConnectionRedeliversToOtherSubscriber", testRedeliveryToOther},
	{"HeartBeatGapsFitTheReadTolerance", testHeartBeatGaps},
	{"HeartBeatsKeepIdleConnectionOpen", testHeartBeatsKeepIdleConnection},
	{"SilentClientIsDroppedAndItsMessageRedelivered", testSilentClientDropped},
	{"SilentBrokerIsNoticed", testSilentBrokerNoticed},
	{"PrefetchOneHoldsOneMessage", testPrefetchOne},
	{"DeadLetterQueueSendThenAck", testDeadLetter},
	{"TextAndBinaryBodiesArriveIntact", testTextAndBinary},
}

func TestConformance(t *testing.T) {
	t.Parallel()
	brptest.NeedsServices(t)
	for _, tg := range targets() {
		t.Run(tg.name, func(t *testing.T) {
			if tg.skip != "" {
				t.Skip(tg.skip)
			}
			t.Parallel()
			// Fail once, clearly, when the broker is not there, instead of once per case.
			c, err := broker.Dial(context.Background(), tg.cfg)
			if err != nil {
				t.Fatalf("%s at %s is not reachable (start it with scripts/services.sh): %v", tg.name, tg.cfg.Addr, err)
			}
			c.Close()
			for _, cc := range conformanceCases {
				t.Run(cc.name, func(t *testing.T) {
					t.Parallel()
					cc.run(t, tg)
				})
			}
		})
	}
}

// ---------------------------------------------------------------- helpers

func dial(t *testing.T, tg target) *broker.Conn {
	t.Helper()
	c, err := broker.Dial(context.Background(), tg.cfg)
	if err != nil {
		t.Fatalf("dial %s at %s: %v", tg.name, tg.cfg.Addr, err)
	}
	t.Cleanup(c.Close)
	return c
}

func newQueue(t *testing.T) string { return "/queue/conformance." + brptest.Name(t) }

func msg(q string, id int64) broker.Message {
	return broker.Message{Destination: q, Header: handeling.IDHeaders(id), Body: body(id)}
}

func body(id int64) []byte { return fmt.Appendf(nil, `{"admhnd":%d,"naam":"Zoë"}`, id) }

func msgs(q string, ids ...int64) []broker.Message {
	out := make([]broker.Message, len(ids))
	for i, id := range ids {
		out[i] = msg(q, id)
	}
	return out
}

func seq(from, to int64) []int64 {
	var ids []int64
	for id := from; id <= to; id++ {
		ids = append(ids, id)
	}
	return ids
}

func send(t *testing.T, c *broker.Conn, ms ...broker.Message) {
	t.Helper()
	if err := c.Send(context.Background(), ms...); err != nil {
		t.Fatalf("send: %v", err)
	}
}

func subscribe(t *testing.T, c *broker.Conn, q string, prefetch int) *broker.Subscription {
	t.Helper()
	s, err := c.Subscribe(context.Background(), q, prefetch)
	if err != nil {
		t.Fatalf("subscribe %s: %v", q, err)
	}
	return s
}

// next returns the subscription's next message; it fails t when none comes within waitMsg.
func next(t *testing.T, s *broker.Subscription, what string) *broker.Delivery {
	t.Helper()
	select {
	case m, ok := <-s.C():
		if !ok {
			t.Fatalf("%s: subscription failed: %v", what, s.Err())
		}
		return m
	case <-time.After(waitMsg):
		t.Fatalf("%s: no message within %v", what, waitMsg)
	}
	return nil
}

// expect reads len(ids) messages and checks their admhnd-ids and bodies, in order.
func expect(t *testing.T, s *broker.Subscription, what string, ids ...int64) []*broker.Delivery {
	t.Helper()
	var got []*broker.Delivery
	for i, id := range ids {
		m := next(t, s, fmt.Sprintf("%s: message %d of %d (admhnd-id %d)", what, i+1, len(ids), id))
		if g := admhnd(m); g != id || string(m.Body) != string(body(id)) {
			t.Fatalf("%s: message %d of %d is admhnd-id %d body %q, want admhnd-id %d body %q (got so far %v)",
				what, i+1, len(ids), g, m.Body, id, body(id), admhnds(got))
		}
		got = append(got, m)
	}
	return got
}

// expectAcking is expect for a subscription with a small prefetch: it acknowledges each
// message before reading the next.
func expectAcking(t *testing.T, s *broker.Subscription, what string, ids ...int64) {
	t.Helper()
	for _, id := range ids {
		ack(t, s, expect(t, s, what, id)[0])
	}
}

// nothing fails t when a message arrives within d.
func nothing(t *testing.T, s *broker.Subscription, d time.Duration, what string) {
	t.Helper()
	select {
	case m, ok := <-s.C():
		if !ok {
			t.Fatalf("%s: subscription failed: %v", what, s.Err())
		}
		t.Fatalf("%s: unexpected message admhnd-id %d body %q redelivered %q", what, admhnd(m), m.Body, m.Header("redelivered"))
	case <-time.After(d):
	}
}

// onlySentinel proves that queue q holds nothing (more) for a subscriber: it sends a sentinel
// message and requires it to be the next message, then waits a quiet spell. Queues are FIFO,
// so anything still on q would come first. The sentinel is acknowledged, leaving q empty.
func onlySentinel(t *testing.T, tg target, s *broker.Subscription, q string, what string) {
	t.Helper()
	const sentinel = 999999
	send(t, dial(t, tg), msg(q, sentinel))
	m := expect(t, s, what+": sentinel first", sentinel)[0]
	ack(t, s, m)
	nothing(t, s, quiet, what+": after the sentinel")
}

func ack(t *testing.T, s *broker.Subscription, m *broker.Delivery) {
	t.Helper()
	if err := s.Ack(context.Background(), m); err != nil {
		t.Fatalf("ack admhnd-id %d: %v", admhnd(m), err)
	}
}

func admhnd(m *broker.Delivery) int64 { return handeling.ParseID(m.Header(handeling.IDHeader)) }

func admhnds(ms []*broker.Delivery) []int64 {
	var ids []int64
	for _, m := range ms {
		ids = append(ids, admhnd(m))
	}
	return ids
}

func header(t *testing.T, m *broker.Delivery, key, want string) {
	t.Helper()
	got, ok := m.Headers()[key]
	if !ok || got != want {
		t.Errorf("header %s = %q (present %v), want %q", key, got, ok, want)
	}
}

// ---------------------------------------------------------------- cases

// The CONNECTED frame names the broker, which picks the broker profile.
func testConnected(t *testing.T, tg target) {
	c := dial(t, tg)
	p := broker.ProfileFor(c.Server)
	t.Logf("server %q: profile %+v", c.Server, p)
	if c.Server == "" {
		t.Errorf("CONNECTED has no server header")
	}
	if tg.product != "" && p.Name != tg.product {
		t.Errorf("server %q gives profile %q, want %q", c.Server, p.Name, tg.product)
	}
}

// One persistent message sent with a receipt arrives with body and headers intact,
// including header values that STOMP 1.2 must escape (':', '\\', newline) and UTF-8.
func testPersistentSend(t *testing.T, tg target) {
	q := newQueue(t)
	c := dial(t, tg)
	custom := "reden: ongeldige JSON\\n op regel 1\nen 2, ë"
	m := msg(q, 1)
	m.Header["brp-test"] = custom
	send(t, c, m)

	s := subscribe(t, dial(t, tg), q, 1)
	got := expect(t, s, "persistent send", 1)[0]
	header(t, got, "persistent", "true")
	header(t, got, "content-type", "application/json")
	header(t, got, "admhnd-id", "1")
	header(t, got, "brp-test", custom)
	header(t, got, "destination", q)
	// Sent without content-length (a JMS TextMessage): ActiveMQ delivers it without one,
	// RabbitMQ adds one, which must then be the body's length.
	if n := got.Header("content-length"); n != "" {
		header(t, got, "content-length", strconv.Itoa(len(body(1))))
	}
	if got.MessageID == "" {
		t.Errorf("no message-id header")
	}
	ack(t, s, got)
	onlySentinel(t, tg, s, q, "after the persistent send")
}

// Several messages in one Send (one transaction committed with a receipt) all arrive, in order.
func testTransactionInOrder(t *testing.T, tg target) {
	q := newQueue(t)
	ids := seq(1, 25)
	send(t, dial(t, tg), msgs(q, ids...)...)
	s := subscribe(t, dial(t, tg), q, 1)
	expectAcking(t, s, "transaction", ids...)
	onlySentinel(t, tg, s, q, "after the transaction")
}

// The broker-profile path for brokers whose COMMIT receipt is not durable: one receipt per
// message, in order.
func testSendEachInOrder(t *testing.T, tg target) {
	q := newQueue(t)
	ids := seq(1, 25)
	if err := broker.SendEach(context.Background(), dial(t, tg), msgs(q, ids...)...); err != nil {
		t.Fatalf("send each: %v", err)
	}
	s := subscribe(t, dial(t, tg), q, 1)
	expectAcking(t, s, "send each", ids...)
	onlySentinel(t, tg, s, q, "after send each")
}

// A transaction whose connection drops before COMMIT delivers nothing. broker.Conn has no
// way to leave a transaction open, so this uses go-stomp on a socket of its own.
func testTransactionDropped(t *testing.T, tg target) {
	q := newQueue(t)
	nc, err := net.DialTimeout("tcp", tg.cfg.Addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	opts := []func(*stomp.Conn) error{
		stomp.ConnOpt.AcceptVersion(stomp.V12),
		stomp.ConnOpt.UnsubscribeReceiptTimeout(10 * time.Second),
		stomp.ConnOpt.Logger(broker.QuietLogger),
	}
	if tg.cfg.Login != "" || tg.cfg.Passcode != "" {
		opts = append(opts, stomp.ConnOpt.Login(tg.cfg.Login, tg.cfg.Passcode))
	}
	if tg.cfg.Host != "" {
		opts = append(opts, stomp.ConnOpt.Host(tg.cfg.Host))
	}
	sc, err := stomp.Connect(nc, opts...)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	// A subscription whose UNSUBSCRIBE receipt, after the transaction's frames, proves that
	// the broker has read them all (it handles a connection's frames in order).
	sync, err := sc.Subscribe(q+".sync", stomp.AckAuto)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := sc.BeginWithError()
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range seq(1, 3) {
		if err := tx.Send(q, "application/json", body(id), stomp.SendOpt.Header("persistent", "true"),
			stomp.SendOpt.Header("admhnd-id", strconv.FormatInt(id, 10))); err != nil {
			t.Fatalf("transaction send: %v", err)
		}
	}
	if err := sync.Unsubscribe(); err != nil {
		t.Fatalf("unsubscribe (sync): %v", err)
	}
	nc.Close() // dropped, not DISCONNECTed, before COMMIT

	s := subscribe(t, dial(t, tg), q, 1)
	onlySentinel(t, tg, s, q, "dropped transaction")
}

// Client-individual ack: of three messages only the second is acknowledged; after the
// connection closes, the first and the third come back (redelivered) and the second does not.
func testClientIndividualAck(t *testing.T, tg target) {
	q := newQueue(t)
	send(t, dial(t, tg), msgs(q, 1, 2, 3)...)

	a := dial(t, tg)
	sa := subscribe(t, a, q, 10)
	got := expect(t, sa, "first delivery", 1, 2, 3)
	ack(t, sa, got[1])
	// DISCONNECT waits for the broker's receipt, so the ACK before it has been handled.
	a.Disconnect()

	sb := subscribe(t, dial(t, tg), q, 10)
	again := expect(t, sb, "after reconnecting", 1, 3)
	for i, m := range again {
		header(t, m, "redelivered", "true")
		t.Logf("admhnd-id %d: message-id first %q, redelivered %q", admhnd(m), got[2*i].MessageID, m.MessageID)
		ack(t, sb, m)
	}
	onlySentinel(t, tg, sb, q, "acknowledged message 2")
}

// On a cumulative subscription one ack covers its message and the earlier ones, and nothing
// after it: the consumer acks a batch with the ack of its last message.
func testCumulativeAck(t *testing.T, tg target) {
	q := newQueue(t)
	send(t, dial(t, tg), msgs(q, 1, 2, 3, 4, 5)...)

	a := dial(t, tg)
	sa, err := a.SubscribeCumulative(context.Background(), q, 10)
	if err != nil {
		t.Fatalf("subscribe cumulative: %v", err)
	}
	got := expect(t, sa, "first delivery", 1, 2, 3, 4, 5)
	ack(t, sa, got[2])
	a.Disconnect() // waits for the broker's receipt, so the ack has been handled

	sb := subscribe(t, dial(t, tg), q, 10)
	for _, m := range expect(t, sb, "after reconnecting: only what came after the acked one", 4, 5) {
		header(t, m, "redelivered", "true")
		ack(t, sb, m)
	}
	onlySentinel(t, tg, sb, q, "acknowledged messages 1 to 3")
}

// A message held unacknowledged by a connection that drops goes to another subscriber.
func testRedeliveryToOther(t *testing.T, tg target) {
	q := newQueue(t)
	send(t, dial(t, tg), msg(q, 1))

	a := dial(t, tg)
	sa := subscribe(t, a, q, 1)
	expect(t, sa, "first subscriber", 1)
	sb := subscribe(t, dial(t, tg), q, 1)
	nothing(t, sb, quiet, "second subscriber while the first holds the message")

	start := time.Now()
	a.Close() // dropped socket, as when the process dies
	m := expect(t, sb, "second subscriber after the first dropped", 1)[0]
	t.Logf("redelivered to the other subscriber %v after the drop", time.Since(start).Round(time.Millisecond))
	header(t, m, "redelivered", "true")
	ack(t, sb, m)
	onlySentinel(t, tg, sb, q, "after the redelivery")
}

// hb is the heart-beat interval of the heart-beat cases: short, so that several intervals pass
// quickly. broker.Config.HeartBeat's rules are independent of its length.
const hb = time.Second

// rawConnect opens a STOMP connection by hand, with heart-beat header heartBeat, and reads the
// CONNECTED frame: the cases that watch the broker's own timing use it, so that go-stomp's
// handling is not part of what they measure.
func rawConnect(t *testing.T, tg target, heartBeat string) (net.Conn, *bufio.Reader) {
	t.Helper()
	nc, err := net.Dial("tcp", tg.cfg.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	host := tg.cfg.Host
	if host == "" {
		host = "localhost"
	}
	fmt.Fprintf(nc, "CONNECT\naccept-version:1.2\nhost:%s\nheart-beat:%s\n", host, heartBeat)
	if tg.cfg.Login != "" {
		fmt.Fprintf(nc, "login:%s\npasscode:%s\n", tg.cfg.Login, tg.cfg.Passcode)
	}
	fmt.Fprint(nc, "\n\x00")
	r := bufio.NewReader(nc)
	_ = nc.SetReadDeadline(time.Now().Add(waitMsg))
	frame, err := r.ReadString(0)
	if err != nil || !strings.HasPrefix(strings.TrimLeft(frame, "\n"), "CONNECTED") {
		t.Fatalf("raw CONNECT: %q, %v", frame, err)
	}
	return nc, r
}

// The broker's heart-beats, while the client sends its own every half interval as the service
// does, are never further apart than the service's read tolerance of 3 intervals (broker.Dial).
// ActiveMQ's are up to 2 intervals apart (it sends only after a whole silent check period);
// go-stomp's default tolerance (interval + 5 s) is too short from 5 s up, which is why
// heart-beats used to be off.
func testHeartBeatGaps(t *testing.T, tg target) {
	nc, r := rawConnect(t, tg, fmt.Sprintf("%d,%d", hb.Milliseconds(), hb.Milliseconds()))
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(hb / 2):
				if _, err := nc.Write([]byte("\n")); err != nil {
					return
				}
			}
		}
	}()
	var gaps []time.Duration
	last := time.Now()
	for end := time.Now().Add(8 * hb); time.Now().Before(end); {
		_ = nc.SetReadDeadline(time.Now().Add(3 * hb))
		if _, err := r.ReadByte(); err != nil {
			t.Fatalf("after %d heart-beats: %v (no byte within 3 intervals, or the broker closed)", len(gaps), err)
		}
		gaps = append(gaps, time.Since(last))
		last = time.Now()
	}
	t.Logf("gaps between the broker's heart-beats at %v: max %v (%d)", hb, slices.Max(gaps).Round(time.Millisecond), len(gaps))
}

// A connection that stays idle for many intervals, with heart-beats both ways, is still usable.
func testHeartBeatsKeepIdleConnection(t *testing.T, tg target) {
	cfg := tg.cfg
	cfg.HeartBeat = hb
	c, err := broker.Dial(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.HeartBeats != hb.String()+" both ways" {
		t.Fatalf("heart-beats %q", c.HeartBeats)
	}
	q := newQueue(t)
	s := subscribe(t, c, q, 1)
	time.Sleep(6 * hb)
	send(t, c, msg(q, 1))
	ack(t, s, expect(t, s, "after an idle stretch of 6 heart-beat intervals", 1)[0])
}

// A client that holds an unacknowledged message and then sends nothing (frozen, or cut off
// without its socket closing) is dropped by the broker after about 3 of its intervals, and the
// message goes to another subscriber: how the broker learns that a consumer is gone.
func testSilentClientDropped(t *testing.T, tg target) {
	q := newQueue(t)
	send(t, dial(t, tg), msg(q, 1))
	nc, r := rawConnect(t, tg, fmt.Sprintf("%d,0", hb.Milliseconds()))
	fmt.Fprintf(nc, "SUBSCRIBE\nid:0\ndestination:%s\nack:client-individual\nactivemq.prefetchSize:1\nprefetch-count:1\n\n\x00", q)
	_ = nc.SetReadDeadline(time.Now().Add(waitMsg))
	if frame, err := r.ReadString(0); err != nil || !strings.Contains(frame, "MESSAGE") {
		t.Fatalf("the silent client did not get the message: %q, %v", frame, err)
	}
	silent := time.Now()
	other := subscribe(t, dial(t, tg), q, 1)
	// The broker closes the silent client's socket: reading ends.
	_ = nc.SetReadDeadline(time.Now().Add(waitMsg))
	for {
		if _, err := r.ReadByte(); err != nil {
			break
		}
	}
	dropped := time.Since(silent)
	m := expect(t, other, "the other subscriber", 1)[0]
	t.Logf("silent client dropped %v after its last byte (%v interval); message redelivered %v after it",
		dropped.Round(time.Millisecond), hb, time.Since(silent).Round(time.Millisecond))
	if limit := 3*hb + 2*time.Second; dropped > limit {
		t.Fatalf("the broker dropped the silent client after %v, beyond the bound the service documents (3 x %v, plus slack)", dropped, hb)
	}
	ack(t, other, m)
}

// A broker that stops sending (frozen, or cut off without the socket closing) is noticed by the
// service's connection after about 3 intervals: the subscription ends with an error.
func testSilentBrokerNoticed(t *testing.T, tg target) {
	p := brptest.NewProxy(t, tg.cfg.Addr)
	cfg := tg.cfg
	cfg.Addr, cfg.HeartBeat = p.Addr(), hb
	c, err := broker.Dial(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s := subscribe(t, c, newQueue(t), 1)
	p.Cut()
	cut := time.Now()
	select {
	case m, ok := <-s.C():
		if ok {
			t.Fatalf("a message through a cut proxy: %s", m.Body)
		}
		t.Logf("silent broker noticed %v after the cut (%v interval): %v", time.Since(cut).Round(time.Millisecond), hb, s.Err())
	case <-time.After(waitMsg):
		t.Fatalf("silent broker not noticed within %v", waitMsg)
	}
	if d := time.Since(cut); d > 3*hb+2*time.Second {
		t.Fatalf("silent broker noticed after %v, beyond 3 x %v plus slack", d, hb)
	}
}

// With prefetch 1 and no ack a subscriber holds one message; a second subscriber on the same
// queue gets the next one; an ack lets the first have another.
func testPrefetchOne(t *testing.T, tg target) {
	q := newQueue(t)
	send(t, dial(t, tg), msgs(q, 1, 2, 3)...)

	sa := subscribe(t, dial(t, tg), q, 1)
	m1 := expect(t, sa, "first subscriber", 1)[0]
	nothing(t, sa, quiet, "first subscriber holding one unacknowledged message")

	b := dial(t, tg)
	sb := subscribe(t, b, q, 1)
	m2 := expect(t, sb, "second subscriber", 2)[0]
	nothing(t, sb, quiet, "second subscriber holding one unacknowledged message")

	ack(t, sa, m1)
	m3 := expect(t, sa, "first subscriber after its ack", 3)[0]
	ack(t, sa, m3)
	ack(t, sb, m2)
	// The sentinel must go to the first subscriber: the second one leaves (after its ACK).
	b.Disconnect()
	onlySentinel(t, tg, sa, q, "after prefetch")
}

// The service sets bad input aside by sending it to a queue of its own, <queue>.dlq, with
// brp-reason and brp-original-message-id, over a separate sending connection, and then
// acknowledging it (never NACK: ActiveMQ would move it to ActiveMQ.DLQ, RabbitMQ would
// requeue it forever). Afterwards the queue is empty and the DLQ holds the message.
func testDeadLetter(t *testing.T, tg target) {
	q := newQueue(t)
	dlq := q + ".dlq"
	bad := broker.Message{Destination: q, Header: handeling.IDHeaders(7), Body: []byte("geen JSON")}
	send(t, dial(t, tg), bad)

	recv := dial(t, tg)
	sendConn := dial(t, tg)
	s := subscribe(t, recv, q, 1)
	m := next(t, s, "bad message")
	if admhnd(m) != 7 || string(m.Body) != "geen JSON" {
		t.Fatalf("got admhnd-id %d body %q, want the bad message", admhnd(m), m.Body)
	}
	reason := "invalid publication: invalid character 'g' looking for beginning of value"
	origID := m.MessageID
	if err := sendConn.Send(context.Background(), broker.Message{Destination: dlq, Body: m.Body,
		Header: map[string]string{handeling.IDHeader: m.Header(handeling.IDHeader), "brp-reason": reason, "brp-original-message-id": origID}}); err != nil {
		t.Fatalf("send to the DLQ: %v", err)
	}
	ack(t, s, m)
	recv.Disconnect() // waits for the broker's receipt: the ACK has been handled

	sq := subscribe(t, dial(t, tg), q, 1)
	onlySentinel(t, tg, sq, q, "original queue after send to DLQ + ack")

	sd := subscribe(t, dial(t, tg), dlq, 1)
	d := next(t, sd, "dead-letter queue")
	if admhnd(d) != 7 || string(d.Body) != "geen JSON" {
		t.Fatalf("DLQ holds admhnd-id %d body %q, want admhnd-id 7 body %q", admhnd(d), d.Body, "geen JSON")
	}
	header(t, d, "brp-reason", reason)
	header(t, d, "brp-original-message-id", origID)
	header(t, d, "persistent", "true")
	header(t, d, "content-type", "application/json")
	if strings.Contains(origID, ":") {
		t.Logf("brp-original-message-id %q (with ':', escaped in transit) came through", origID)
	}
	ack(t, sd, d)
	onlySentinel(t, tg, sd, dlq, "dead-letter queue")
}

// testTextAndBinary: messages go without content-length so that JMS clients get a
// TextMessage (scenarios/jms_test.go); the broker must still deliver such a body whole, with
// its multi-byte characters, and a Binary one (an unreadable publication set aside as it came)
// whole with its NUL and non-UTF-8 bytes. A body that is not text, not marked Binary, is
// refused before anything is sent, and the connection stays usable.
func testTextAndBinary(t *testing.T, tg target) {
	q := newQueue(t)
	c := dial(t, tg)
	raw := []byte("{\"id\": 3, \"x\": \"\xff\x00\xfe\"}\x00tail")
	err := c.Send(context.Background(), msg(q, 1), broker.Message{Destination: q, Header: handeling.IDHeaders(2), Body: raw})
	if !errors.Is(err, broker.ErrNotText) {
		t.Fatalf("send of a body that is not text: %v, want ErrNotText", err)
	}
	send(t, c, msg(q, 1), broker.Message{Destination: q, Header: handeling.IDHeaders(2), Body: raw, Binary: true}, msg(q, 3))

	s := subscribe(t, dial(t, tg), q, 10)
	text := next(t, s, "text message")
	if admhnd(text) != 1 || string(text.Body) != string(body(1)) {
		t.Fatalf("first message admhnd-id %d body %q, want the text message %q", admhnd(text), text.Body, body(1))
	}
	header(t, text, "content-type", "application/json")
	t.Logf("%s delivers a text message with content-length %q", tg.name, text.Header("content-length"))
	bin := next(t, s, "binary message")
	if admhnd(bin) != 2 || string(bin.Body) != string(raw) {
		t.Fatalf("second message admhnd-id %d body %q, want the binary message %q", admhnd(bin), bin.Body, raw)
	}
	last := next(t, s, "text message after the binary one")
	if admhnd(last) != 3 || string(last.Body) != string(body(3)) {
		t.Fatalf("third message admhnd-id %d body %q, want %q", admhnd(last), last.Body, body(3))
	}
	for _, m := range []*broker.Delivery{text, bin, last} {
		ack(t, s, m)
	}
	onlySentinel(t, tg, s, q, "after the text and binary messages")
}
