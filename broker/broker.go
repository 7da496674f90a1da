// Package broker is the service's only door to the JMS broker: STOMP 1.2 connections that
// confirm every send with a broker receipt, bound every wait, and can be dropped and redialled
// when the broker goes away, to the same node or, with a list of nodes (a master/slave pair, a
// network of brokers), to another one (Dialer). go-stomp has no reconnect and can hang on a
// dead socket; this package owns the socket so that a deadline can always close it.
package broker

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/go-stomp/stomp/v3"
	"github.com/go-stomp/stomp/v3/frame"

	"github.com/brp/levering/internal/tcp"
)

// ErrRefused marks a CONNECT the broker answered with an ERROR frame instead of CONNECTED:
// a login, passcode or virtual host it does not accept. Unlike a broker that does not
// answer, waiting does not help.
var ErrRefused = errors.New("the broker refused the connection")

// ErrNotText is returned by Send for a Message whose Body is not text (see IsText) and that
// is not marked Binary: nothing of that Send reaches the broker. The service's messages are
// text (docs/contract.md section 3); sending such a body anyway would reach a JMS afnemer as a
// BytesMessage, or be cut at its first NUL.
var ErrNotText = errors.New("broker: message body is not text (valid UTF-8 without NUL)")

// IsText reports whether body can travel as a STOMP text message: valid UTF-8 without NUL.
// Without a content-length header a STOMP body ends at its first NUL, and a JMS client reads
// the body as a String.
func IsText(body []byte) bool {
	return utf8.Valid(body) && !bytes.Contains(body, []byte{0})
}

// Message is one outgoing persistent message.
//
// It is sent without a content-length header, which is what makes ActiveMQ (Artemis
// documents the same rule) hand it to a JMS client as a TextMessage, with its headers string
// properties; with content-length it delivers a BytesMessage (scenarios/jms_test.go). Its Body
// must therefore be text (IsText), unless Binary.
type Message struct {
	Destination string
	Body        []byte
	// Header holds the message's headers (the handeling's id, the reason a message was set
	// aside); persistent is always sent.
	Header map[string]string
	// Binary sends Body with a content-length header, as bytes (a JMS BytesMessage): only
	// for a body that is not text, such as an unreadable publication set aside as it came.
	Binary bool
}

// checkText returns ErrNotText, naming the first message whose body is not text.
func checkText(msgs []Message) error {
	for i, m := range msgs {
		if !m.Binary && !IsText(m.Body) {
			return fmt.Errorf("%w: message %d of %d to %s", ErrNotText, i+1, len(msgs), m.Destination)
		}
	}
	return nil
}

// Conn is one STOMP connection. It is safe for concurrent use; once any operation fails the
// connection is closed and the caller dials a new one.
type Conn struct {
	cfg  Config
	nc   net.Conn
	sc   *stomp.Conn
	once sync.Once
	// Server is the broker's server header from CONNECTED (for example "ActiveMQ/5.17.2").
	Server string
	// Profile is what this broker needs done differently, chosen from Server.
	Profile Profile
	// HeartBeats says which heart-beats run on this connection, for logs: "5s both ways",
	// "off", or "5s from this side only" for a broker that sends none.
	HeartBeats string
	// Node is the host:port of the broker node this connection went to (one of Config.Addr).
	Node string

	index       int  // Node's place in the Dialer's list
	serverSends bool // the broker's CONNECTED promised heart-beats
}

// Dial connects to the first node of cfg.Addr that answers (see Dialer; a Dialer kept by the
// caller also remembers which node answered) and completes the STOMP handshake, each node
// within OpTimeout.
func Dial(ctx context.Context, cfg Config) (*Conn, error) {
	d, err := NewDialer(cfg)
	if err != nil {
		return nil, err
	}
	return d.Dial(ctx)
}

// dialNode connects to one node: with heart-beats both ways, or from this side only when
// the broker sends none.
func dialNode(ctx context.Context, cfg Config, node string) (*Conn, error) {
	if cfg.HeartBeat < 0 {
		return dial(ctx, cfg, node, 0, 0)
	}
	c, err := dial(ctx, cfg, node, cfg.HeartBeat, cfg.HeartBeat)
	if err != nil || c.serverSends {
		return c, err
	}
	// go-stomp would expect the heart-beats this broker said it does not send, and drop every
	// quiet connection: ask for none.
	c.Close()
	return dial(ctx, cfg, node, cfg.HeartBeat, 0)
}

// dial connects to node with heart-beats sent every send and expected every recv (0: none).
//
// go-stomp reads the broker's heart-beats with a deadline of (interval + HeartBeatError) x
// HeartBeatGracePeriodMultiplier and writes its own after interval - HeartBeatError without
// other writes. ActiveMQ sends a heart-beat only when it has written nothing during a whole
// check period, so two of its heart-beats can be two intervals apart; go-stomp's defaults
// (+5 s, x1) then drop healthy connections at any interval above 5 s. An error of interval/2
// and a multiplier of 2 read for 3 intervals and write every half interval, which both
// brokers' checks accept (broker's conformance tests).
func dial(ctx context.Context, cfg Config, node string, send, recv time.Duration) (*Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.OpTimeout)
	defer cancel()
	nc, err := tcp.Dialer(cfg.TCPUserTimeout).DialContext(ctx, "tcp", node)
	if err != nil {
		return nil, fmt.Errorf("broker: dial %s: %w", node, err)
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	if cfg.TLS != nil {
		tc := cfg.TLS
		if tc.ServerName == "" {
			// crypto/tls checks the certificate against ServerName only: each node its own.
			tc = tc.Clone()
			tc.ServerName, _, _ = net.SplitHostPort(node)
		}
		tlsConn := tls.Client(nc, tc)
		if err := tlsConn.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, fmt.Errorf("broker: tls handshake with %s: %w", node, err)
		}
		nc = tlsConn
	}
	var serverHeartBeat string
	opts := []func(*stomp.Conn) error{
		stomp.ConnOpt.AcceptVersion(stomp.V12),
		stomp.ConnOpt.HeartBeat(send, recv),
		stomp.ConnOpt.HeartBeatError(send / 2),
		stomp.ConnOpt.HeartBeatGracePeriodMultiplier(2),
		stomp.ConnOpt.RcvReceiptTimeout(cfg.OpTimeout),
		stomp.ConnOpt.MsgSendTimeout(cfg.OpTimeout),
		stomp.ConnOpt.DisconnectReceiptTimeout(5 * time.Second),
		stomp.ConnOpt.Logger(quietLogger{}),
		stomp.ConnOpt.ResponseHeaders(func(h *frame.Header) { serverHeartBeat = h.Get(frame.HeartBeat) }),
	}
	if cfg.Login != "" || cfg.Passcode != "" {
		opts = append(opts, stomp.ConnOpt.Login(cfg.Login, cfg.Passcode))
	}
	if cfg.Host != "" {
		opts = append(opts, stomp.ConnOpt.Host(cfg.Host))
	}
	sc, err := stomp.ConnectWithContext(ctx, &coalescingConn{Conn: nc, wait: cfg.OpTimeout}, opts...)
	if err != nil {
		nc.Close()
		var refused stomp.Error
		if errors.As(err, &refused) {
			return nil, fmt.Errorf("broker: stomp connect to %s: %w: %w", node, ErrRefused, err)
		}
		return nil, fmt.Errorf("broker: stomp connect to %s: %w", node, err)
	}
	c := &Conn{cfg: cfg, nc: nc, sc: sc, Server: sc.Server(), Profile: profileFor(sc.Server()), Node: node}
	sx, _, _ := frame.ParseHeartBeat(serverHeartBeat)
	c.serverSends = sx > 0
	switch {
	case send == 0:
		c.HeartBeats = "off"
	case recv == 0:
		c.HeartBeats = send.String() + " from this side only (the broker sends none)"
	default:
		c.HeartBeats = send.String() + " both ways"
	}
	return c, nil
}

// Close drops the connection without waiting for the broker. Unacknowledged messages go back
// to their queue; an open transaction is rolled back by the broker.
func (c *Conn) Close() {
	c.once.Do(func() { c.nc.Close() })
}

// Disconnect says goodbye to the broker (bounded) and closes the socket.
func (c *Conn) Disconnect() {
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = c.sc.Disconnect()
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
	c.Close()
}

// guard runs fn and returns when it does, when OpTimeout passes or when ctx ends, whichever
// comes first; on failure it closes the connection. go-stomp can block inside on a dead
// connection (a channel send that closing the socket does not release), so fn runs in a
// goroutine of its own that go-stomp's own timeouts end later. A send reported failed here
// that still reaches the broker is only a duplicate, which the consumers absorb.
func (c *Conn) guard(ctx context.Context, what string, fn func() error) error {
	done := make(chan error, 1)
	go func() { done <- fn() }()
	timer := time.NewTimer(c.cfg.OpTimeout)
	defer timer.Stop()
	var err error
	select {
	case err = <-done:
	case <-timer.C:
		err = fmt.Errorf("no answer within %v", c.cfg.OpTimeout)
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		c.Close()
		return fmt.Errorf("broker: %s: %w", what, err)
	}
	return nil
}

func sendOpts(m Message) []func(*frame.Frame) error {
	opts := []func(*frame.Frame) error{
		stomp.SendOpt.Header("persistent", "true"),
	}
	for k, v := range m.Header {
		opts = append(opts, stomp.SendOpt.Header(k, v))
	}
	if !m.Binary {
		opts = append(opts, stomp.SendOpt.NoContentLength)
	}
	return opts
}

// Send sends the messages persistently and returns only when the broker has confirmed all of
// them. One message is sent with a receipt; several go in one STOMP transaction committed with
// a receipt, so the broker takes all of them or none, where that receipt means the messages
// are stored (Profile.DurableCommit: ActiveMQ). Elsewhere (RabbitMQ, unknown brokers) they go
// one by one, each with its own receipt; after an error a prefix may then be on the queue,
// which the service treats like a crash after a broker commit (absorbed duplicates).
//
// A body that is not text fails the whole Send with ErrNotText before anything is sent; the
// connection stays usable.
func (c *Conn) Send(ctx context.Context, msgs ...Message) error {
	if err := checkText(msgs); err != nil {
		return err
	}
	switch len(msgs) {
	case 0:
		return nil
	case 1:
		m := msgs[0]
		return c.guard(ctx, "send", func() error {
			return c.sc.Send(m.Destination, "application/json", m.Body, append(sendOpts(m), stomp.SendOpt.Receipt)...)
		})
	}
	if !c.Profile.DurableCommit {
		return c.sendEach(ctx, msgs)
	}
	return c.guard(ctx, "send transaction", func() error {
		tx, err := c.sc.BeginWithError()
		if err != nil {
			return err
		}
		for _, m := range msgs {
			if err := tx.Send(m.Destination, "application/json", m.Body, sendOpts(m)...); err != nil {
				return err
			}
		}
		return tx.CommitWithReceipt()
	})
}

// Subscription delivers messages of one queue.
type Subscription struct {
	conn *Conn
	c    chan *Delivery
	done chan struct{} // closed with c, once err is set
	err  error
}

// Delivery is one message received on a Subscription: what consumers read of a STOMP MESSAGE
// frame, and what Subscription.Ack needs to acknowledge it. It keeps the STOMP library inside
// this package.
type Delivery struct {
	// MessageID is the broker's message-id header.
	MessageID string
	// Body is the message body.
	Body []byte

	msg *stomp.Message
}

// Header returns the value of header key, "" when the message has none. A header repeated in
// the frame gives its first value, as STOMP 1.2 says.
func (d *Delivery) Header(key string) string { return d.msg.Header.Get(key) }

// Headers returns a copy of all the message's headers; a repeated header keeps its first value.
func (d *Delivery) Headers() map[string]string {
	h := make(map[string]string, d.msg.Header.Len())
	for i := range d.msg.Header.Len() {
		k, v := d.msg.Header.GetAt(i)
		if _, seen := h[k]; !seen {
			h[k] = v
		}
	}
	return h
}

// Subscribe subscribes to destination with client-individual ack and at most prefetch
// unacknowledged messages in flight to this connection. The prefetch header is sent in both
// the ActiveMQ and the RabbitMQ spelling; each broker ignores the other's.
func (c *Conn) Subscribe(ctx context.Context, destination string, prefetch int) (*Subscription, error) {
	return c.subscribe(ctx, destination, prefetch, stomp.AckClientIndividual)
}

// SubscribeExclusive is Subscribe as ActiveMQ's exclusive consumer: the broker dispatches to
// one exclusive subscription of the destination at a time. A reader that reconnects after its
// connection died (a paused or restarted broker) then receives nothing until the broker has
// let go of the old subscription, and first what that one held unacknowledged: it reads the
// queue in its order. A second subscriber of the same destination could otherwise receive the
// messages after the one the dead subscription held, before that one is redelivered. RabbitMQ
// ignores the header.
func (c *Conn) SubscribeExclusive(ctx context.Context, destination string, prefetch int) (*Subscription, error) {
	return c.subscribe(ctx, destination, prefetch, stomp.AckClientIndividual, stomp.SubscribeOpt.Header("activemq.exclusive", "true"))
}

// SubscribeCumulative is Subscribe with STOMP's "client" ack mode: an ack acknowledges its
// message and every message delivered before it on this subscription, so a batch handled in
// delivery order is acknowledged with one frame instead of one per message. The caller must
// handle the messages in delivery order, and keep this the only subscription of the
// connection: a broker may count "before" per connection (RabbitMQ acks per channel).
func (c *Conn) SubscribeCumulative(ctx context.Context, destination string, prefetch int) (*Subscription, error) {
	return c.subscribe(ctx, destination, prefetch, stomp.AckClient)
}

// errSubscriptionClosed is Subscription.Err for a subscription that ended without an error.
var errSubscriptionClosed = errors.New("subscription closed")

func (c *Conn) subscribe(ctx context.Context, destination string, prefetch int, mode stomp.AckMode, extra ...func(*frame.Frame) error) (*Subscription, error) {
	var sub *stomp.Subscription
	err := c.guard(ctx, "subscribe", func() error {
		var err error
		opts := append([]func(*frame.Frame) error{
			stomp.SubscribeOpt.Header("activemq.prefetchSize", strconv.Itoa(prefetch)),
			stomp.SubscribeOpt.Header("prefetch-count", strconv.Itoa(prefetch)),
		}, extra...)
		sub, err = c.sc.Subscribe(destination, mode, opts...)
		return err
	})
	if err != nil {
		return nil, err
	}
	// go-stomp's one I/O loop both hands MESSAGE frames to the subscription (a channel of 16)
	// and writes outgoing frames. With more than 16 prefetched, a full channel blocks the loop,
	// acks queue up unwritten, and the workers that should drain the channel wait for their
	// acks: a deadlock. The pump keeps the loop free: its buffer holds everything the broker
	// may push (prefetch) and more.
	s := newSubscription(c, prefetch+16)
	go s.pump(sub.C)
	return s, nil
}

func newSubscription(c *Conn, buffer int) *Subscription {
	return &Subscription{conn: c, c: make(chan *Delivery, buffer), done: make(chan struct{})}
}

// pump turns go-stomp's messages into Deliveries until in is closed. go-stomp reports a
// failed connection as a message with Err set and then closes in; Err keeps that error.
func (s *Subscription) pump(in <-chan *stomp.Message) {
	var err error
	for m := range in {
		switch {
		case err != nil:
			// Nothing follows an error; should anything, it is not delivered.
		case m.Err != nil:
			err = m.Err
		default:
			s.c <- &Delivery{MessageID: m.Header.Get(frame.MessageId), Body: m.Body, msg: m}
		}
	}
	if err == nil {
		err = errSubscriptionClosed
	}
	s.err = err
	close(s.done)
	close(s.c)
}

// C delivers the subscription's messages in the order the broker sent them. It is closed when
// the subscription ends, which means the connection is gone; Err then says why.
func (s *Subscription) C() <-chan *Delivery { return s.c }

// Err returns why the subscription ended (the connection's error, or "subscription closed"),
// or nil while it runs. Once C is closed, Err is not nil.
func (s *Subscription) Err() error {
	select {
	case <-s.done:
		return s.err
	default:
		return nil
	}
}

// Ack acknowledges d (and, on a cumulative subscription, every message before it). It does
// not wait for the broker: a lost ack only causes a redelivery, which the consumer absorbs.
func (s *Subscription) Ack(ctx context.Context, d *Delivery) error {
	return s.conn.guard(ctx, "ack", func() error { return s.conn.sc.Ack(d.msg) })
}

// quietLogger keeps go-stomp's own logging out of the service's structured logs; every error
// it would log also reaches the caller as a returned error.
type quietLogger struct{}

func (quietLogger) Debugf(string, ...interface{})   {}
func (quietLogger) Infof(string, ...interface{})    {}
func (quietLogger) Warningf(string, ...interface{}) {}
func (quietLogger) Errorf(string, ...interface{})   {}
func (quietLogger) Debug(string)                    {}
func (quietLogger) Info(string)                     {}
func (quietLogger) Warning(string)                  {}
func (quietLogger) Error(string)                    {}
