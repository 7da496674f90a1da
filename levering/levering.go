// Package levering is mutatielevering, the consumer: it takes publications from the queue and,
// per handeling, in one database transaction, marks it geleverd only where it is not yet
// delivered and, only when that update hit a row, puts the handeling on the verzending queue
// (confirmed by the broker) before the database commit. The publication is acknowledged only
// after the commit, so redeliveries and duplicates are absorbed by the conditional update.
package levering

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/brp/levering/broker"
	"github.com/brp/levering/handeling"
	"github.com/brp/levering/internal/backoff"
	"github.com/brp/levering/internal/prepared"
)

// Consumer is one mutatielevering process's worth of workers.
type Consumer struct {
	cfg Config
	db  *sqlx.DB
	log *slog.Logger

	m         *metrics     // what the workers did
	stuck     atomic.Int64 // batches the watchdog handed back
	connected atomic.Bool

	stmts   *prepared.Cache // batchSQL
	batches []*batch        // one per worker
	subs    *broker.Dialer  // the workers' subscribing connections
	sends   *broker.Dialer  // the connection for verzending (and dead-letter) sends
}

// New validates cfg and returns a Consumer; call Run to start it. It raises db's connection
// limit to at least two a worker plus one.
func New(db *sqlx.DB, cfg Config, log *slog.Logger) (*Consumer, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	subs, err := broker.NewDialer(cfg.Broker)
	if err != nil {
		return nil, fmt.Errorf("%w: Broker: %w", ErrConfig, err)
	}
	sends, _ := broker.NewFirstDialer(cfg.Broker) // the same config, valid
	// Each worker holds its batch's transaction and records what it is about to send on a
	// second connection (markOnderweg): a smaller pool could leave every worker holding one
	// connection and waiting for another.
	if n := db.Stats().MaxOpenConnections; n > 0 && n < 2*cfg.Workers+1 {
		db.SetMaxOpenConns(2*cfg.Workers + 1)
	}
	c := &Consumer{cfg: cfg, db: db, log: log, m: newMetrics(), stmts: prepared.New(db.DB), subs: subs, sends: sends}
	for range cfg.Workers {
		c.batches = append(c.batches, &batch{})
	}
	c.register(cfg.Registerer)
	return c, nil
}

// strict says whether an unreleased fout holds back its persons' later handelingen.
func (c *Consumer) strict() bool { return c.cfg.FoutPolicy == handeling.Strict }

// Connected reports whether the consumer is subscribed to the publication queue now.
func (c *Consumer) Connected() bool { return c.connected.Load() }

// BrokerNodes returns the broker nodes (host:port) the consumer is subscribed on and sends its
// verzending messages to, or "" while it is not connected.
func (c *Consumer) BrokerNodes() (subscribed, verzending string) {
	if !c.connected.Load() {
		return "", ""
	}
	return c.subs.Current(), c.sends.Current()
}

// Stuck returns an error naming the workers that have held their batch for longer than
// BatchTimeout (they are being handed back), or nil: readiness.
func (c *Consumer) Stuck() error {
	var errs []error
	for i, b := range c.batches {
		if age := b.age(); age > c.cfg.BatchTimeout {
			errs = append(errs, fmt.Errorf("worker %d has held a batch of %d publications for %v, stuck in step %q (batch timeout %v)",
				i+1, b.size.Load(), age.Round(time.Second), b.step(), c.cfg.BatchTimeout))
		}
	}
	return errors.Join(errs...)
}

func (c *Consumer) oldestBatch() time.Duration {
	var oldest time.Duration
	for _, b := range c.batches {
		oldest = max(oldest, b.age())
	}
	return oldest
}

// Counts is what a Consumer has done since it started.
type Counts struct {
	Delivered, Duplicates, Fout, Parked int64
	// HeldBack counts handelingen of a publication not delivered now, whatever the reason
	// (brp_levering_held_back_total).
	HeldBack int64
}

// Counts returns the consumer's counters.
func (c *Consumer) Counts() Counts {
	return Counts{Delivered: c.m.delivered.Load(), Duplicates: c.m.duplicates.Load(), Fout: c.m.fout.Load(),
		Parked: c.m.parked.Load(), HeldBack: c.m.heldBack.Load()}
}

// Run consumes until ctx ends. A lost broker connection is logged and redialled; publications
// not yet acknowledged go back to the queue. On return every publication this process held is
// either acknowledged or handed back.
func (c *Consumer) Run(ctx context.Context) error {
	c.log.Info("consumer started", slog.String("queue", c.cfg.Queue), slog.Int("workers", c.cfg.Workers),
		slog.Int("batch", c.cfg.Batch), slog.Int("prefetch", c.cfg.Prefetch))
	retry := backoff.New(100*time.Millisecond, 5*time.Second)
	failing := false
	for ctx.Err() == nil {
		node, err := c.session(ctx)
		if ctx.Err() != nil {
			break
		}
		connected := node != ""
		if connected {
			retry.Reset()
		} else {
			node = c.cfg.Broker.Addr // every node failed; the error says how
		}
		if !failing || connected {
			c.log.Warn("broker connection lost, reconnecting", slog.Any("error", err), slog.String("addr", node))
			c.m.reconnects.WithLabelValues("broker").Inc()
		}
		failing = true
		_ = retry.Wait(ctx) // the loop ends on ctx
	}
	_ = c.stmts.Close()
	c.log.Info("consumer stopped")
	return nil
}

// session runs the workers over broker connections of their own until one fails or ctx ends
// (dial, then serve). node names the node the workers subscribed on once they did, "" if the
// session never got that far.
func (c *Consumer) session(ctx context.Context) (node string, err error) {
	s, err := c.dial(ctx)
	if err != nil {
		return "", err
	}
	defer func() { s.close(err != nil && ctx.Err() == nil) }()
	c.log.Info("connected to broker", slog.String("addr", s.node), slog.String("verzending_addr", s.send.Node),
		slog.String("server", s.recv[0].Server), slog.String("heart_beats", s.recv[0].HeartBeats))
	c.connected.Store(true)
	defer c.connected.Store(false)
	return s.node, c.serve(ctx, s)
}

// conns are a session's broker connections. Each worker receives on a connection of its own,
// with one cumulative subscription, and handles its messages in delivery order, so one ack
// frame acknowledges a whole batch. Sends go over one more connection: a receipt awaited on a
// subscribing connection can deadlock behind prefetched messages (go-stomp reads frames in one
// loop). The subscribing connections go to one node (the Dialer stays with the node that
// answered) unless it fails meanwhile, and the next session after a failure starts at the next
// node; the sending one always goes to the first node that answers (Config.Broker).
type conns struct {
	c    *Consumer
	send *broker.Conn
	recv []*broker.Conn
	subs []*broker.Subscription
	node string // the nodes the workers subscribed on, comma-separated
}

// dial opens a session's connections and subscriptions; on failure it closes what it opened.
func (c *Consumer) dial(ctx context.Context) (_ *conns, err error) {
	s := &conns{c: c}
	defer func() {
		if err != nil {
			s.close(ctx.Err() == nil)
		}
	}()
	if s.send, err = c.sends.Dial(ctx); err != nil {
		return nil, err
	}
	perWorker := (c.cfg.Prefetch + c.cfg.Workers - 1) / c.cfg.Workers
	var nodes []string
	for range c.cfg.Workers {
		recv, err := c.subs.Dial(ctx)
		if err != nil {
			return nil, err
		}
		s.recv = append(s.recv, recv)
		if !slices.Contains(nodes, recv.Node) {
			nodes = append(nodes, recv.Node)
		}
		// The subscription is not tied to ctx: on shutdown the workers finish what they hold
		// and then the connection is closed, which hands back what was prefetched.
		sub, err := recv.SubscribeCumulative(context.Background(), c.cfg.Queue, perWorker)
		if err != nil {
			return nil, err
		}
		s.subs = append(s.subs, sub)
	}
	s.node = strings.Join(nodes, ",")
	return s, nil
}

// close closes the connections, which hands back every publication not acknowledged; failed
// tells their dialers the nodes failed, so that the next session tries the next one.
func (s *conns) close(failed bool) {
	if s.send != nil {
		s.send.Close()
		if failed {
			s.c.sends.Lost(s.send)
		}
	}
	for _, recv := range s.recv {
		recv.Close()
		if failed {
			s.c.subs.Lost(recv)
		}
	}
}

// serve runs a worker per subscription until one fails, the watchdog hands a batch back, or
// ctx ends. On ctx's end the workers take nothing new and finish what they hold within
// ShutdownGrace; a broken connection abandons it at once.
func (c *Consumer) serve(ctx context.Context, s *conns) error {
	// sctx stops the workers taking new publications; hard, ShutdownGrace later, abandons the
	// one in hand. A broken connection cancels both at once.
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	hard, hardCancel := context.WithCancel(context.WithoutCancel(sctx))
	defer hardCancel()
	stopGrace := context.AfterFunc(sctx, func() {
		if context.Cause(sctx) != nil && !errors.Is(context.Cause(sctx), context.Canceled) {
			hardCancel()
			return
		}
		time.AfterFunc(c.cfg.ShutdownGrace, hardCancel)
	})
	defer stopGrace()
	go c.watch(sctx, cancel, func() { s.close(false) })
	var wg sync.WaitGroup
	for i, sub := range s.subs {
		w := c.worker(sub, s.send, c.batches[i])
		wg.Go(func() {
			if err := w.run(sctx, hard); err != nil {
				cancel(err)
			}
		})
	}
	wg.Wait()
	if err := context.Cause(sctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return ctx.Err()
}

// watch hands back the batches of this session that a worker has held for longer than
// BatchTimeout: it ends the session (cancel) and drops its connections (closeAll), which the
// broker answers by giving the publications to other consumers, and which unblocks a worker
// stuck in a broker call. A stuck database call ends by the context or the session's bounds
// (dbsession). One log line per stuck batch says which step it is stuck in.
func (c *Consumer) watch(ctx context.Context, cancel context.CancelCauseFunc, closeAll func()) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for i, b := range c.batches {
			age := b.age()
			if age <= c.cfg.BatchTimeout || !b.reported.CompareAndSwap(false, true) {
				continue
			}
			c.stuck.Add(1)
			err := fmt.Errorf("worker %d stuck in step %q for %v", i+1, b.step(), age.Round(time.Second))
			c.log.Error("batch stuck; handing it back", slog.Int("worker", i+1), slog.String("step", b.step()),
				slog.Duration("held_for", age.Round(time.Millisecond)), slog.Duration("batch_timeout", c.cfg.BatchTimeout),
				slog.Any("admhnd_ids", b.ids()))
			cancel(err)
			closeAll()
		}
	}
}
