// Package levering is mutatielevering, the consumer: it takes publications from the queue and,
// per handeling, in one database transaction, marks it geleverd only where it is not yet
// delivered and, only when that update hit a row, puts the handeling on the verzending queue
// (confirmed by the broker) before the database commit. The publication is acknowledged only
// after the commit, so redeliveries and duplicates are absorbed by the conditional update.
package levering

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/brp/levering/broker"
	"github.com/brp/levering/handeling"
	"github.com/brp/levering/internal/backoff"
	"github.com/brp/levering/internal/dbsession"
	"github.com/brp/levering/internal/prepared"
)

// Config configures a Consumer. Zero fields take the documented defaults.
type Config struct {
	// Queue is the publication queue. Default handeling.PublicationQueue.
	Queue string
	// VerzendingQueue receives delivered handelingen. Default handeling.VerzendingQueue.
	VerzendingQueue string
	// DeadLetterQueue receives publications that cannot be read (bad input), with the reason
	// in a header. Default handeling.DeadLetterQueue.
	DeadLetterQueue string
	// Excluded lists soorten that are never delivered: a publication of one (sent by hand, or
	// by a publisher configured otherwise) is set aside, its handeling untouched. Nil means
	// handeling.DefaultExcluded(); an empty non-nil slice excludes nothing. The same setting
	// as the publisher's (BRP_LEVERING_ADMHNDPUBLICATIE_EXCLUDED).
	Excluded []string
	// Workers is how many batches this process handles at once. Default 2.
	Workers int
	// Batch is the most publications a worker handles in one database transaction and one
	// broker transaction. A worker never waits to fill a batch: it takes what is already
	// prefetched. Default 50.
	Batch int
	// Prefetch is how many unacknowledged publications the broker may push to this process,
	// shared evenly (rounded up) by the workers' subscriptions.
	// Default Workers*Batch, so every worker can fill a batch.
	Prefetch int
	// ShutdownGrace is how long, after ctx ends, a worker may still finish the publication it
	// holds (and ack it) before it is abandoned and goes back to the queue. Default 10s.
	ShutdownGrace time.Duration
	// BatchTimeout is the longest a worker may hold a batch. A batch held longer (the
	// database unreachable from this process only, a dependency that hangs) is logged with
	// the step it is stuck in, makes /readyz answer 503, and is handed back: the process drops
	// its broker connections, so the broker gives the publications to other consumers, and
	// connects again. Default DefaultBatchTimeout.
	BatchTimeout time.Duration
	// Broker says how to reach the broker. With several nodes (a network of brokers) the
	// workers subscribe on the node Broker.RandomStart picks, so that consumers spread, but
	// every consumer sends its verzending messages to the first listed node that answers:
	// one queue in one broker, in the order the consumers' sends were confirmed. Sent to
	// several brokers, they would reach a reader through the brokers' bridges, and a later
	// handeling of a person could overtake an earlier one on the way.
	Broker broker.Config
	// Registerer receives the consumer's metrics; nil keeps them unregistered.
	Registerer prometheus.Registerer
	// Hooks are fault seams for tests; the zero value does nothing.
	Hooks Hooks
}

// Hooks are fault seams: tests use them to fail or kill at a precise step. Nil does nothing.
type Hooks struct {
	// AfterLock runs after a batch's locking statement (the rows are locked and updated, not
	// committed), before the verzending send; an error rolls back and hands the batch back.
	AfterLock func(ctx context.Context, ids []int64) error
	// AfterVerzending runs after a batch's verzending messages were confirmed, before the
	// database commit; an error rolls the transaction back and hands the batch back.
	AfterVerzending func(ctx context.Context, ids []int64) error
	// AfterCommit runs after a batch's database commit, before the acks.
	AfterCommit func(ctx context.Context, ids []int64) error
}

// Defaults of Config.Workers and Config.Batch, chosen with the benchmark (docs/bench).
const (
	DefaultWorkers = 2
	DefaultBatch   = 50
)

// DefaultBatchTimeout is Config.BatchTimeout's default: above what a healthy batch takes by
// orders of magnitude (milliseconds), and short enough that a batch handed back is delivered
// by another consumer within 30 s (measured: 20.7 s with 20, 30.7 s with 30), well below the
// publisher's redelivery timeout.
const DefaultBatchTimeout = 20 * time.Second

// ErrConfig is wrapped by every Config validation error.
var ErrConfig = errors.New("levering: invalid config")

func (c *Config) setDefaults() {
	if c.Queue == "" {
		c.Queue = handeling.PublicationQueue
	}
	if c.VerzendingQueue == "" {
		c.VerzendingQueue = handeling.VerzendingQueue
	}
	if c.DeadLetterQueue == "" {
		c.DeadLetterQueue = handeling.DeadLetterQueue
	}
	if c.Excluded == nil {
		c.Excluded = handeling.DefaultExcluded()
	}
	if c.Workers == 0 {
		c.Workers = DefaultWorkers
	}
	if c.Batch == 0 {
		c.Batch = DefaultBatch
	}
	if c.Prefetch == 0 {
		c.Prefetch = c.Workers * c.Batch
	}
	if c.ShutdownGrace == 0 {
		c.ShutdownGrace = 10 * time.Second
	}
	if c.BatchTimeout == 0 {
		c.BatchTimeout = DefaultBatchTimeout
	}
}

// maxPrefetch bounds Prefetch: the consumer holds a buffer of that many deliveries.
const maxPrefetch = 1 << 20

func (c Config) validate() error {
	switch {
	case c.Workers < 0:
		return fmt.Errorf("%w: Workers %d must be positive", ErrConfig, c.Workers)
	case c.Batch < 0:
		return fmt.Errorf("%w: Batch %d must be positive", ErrConfig, c.Batch)
	case c.Prefetch < 0 || c.Prefetch > maxPrefetch:
		return fmt.Errorf("%w: Prefetch %d must be positive and at most %d", ErrConfig, c.Prefetch, maxPrefetch)
	case c.BatchTimeout < 0:
		return fmt.Errorf("%w: BatchTimeout %v must be positive", ErrConfig, c.BatchTimeout)
	case c.Queue == c.VerzendingQueue || c.Queue == c.DeadLetterQueue:
		return fmt.Errorf("%w: Queue %q must differ from VerzendingQueue and DeadLetterQueue", ErrConfig, c.Queue)
	}
	return nil
}

// Consumer is one mutatielevering process's worth of workers.
type Consumer struct {
	cfg Config
	db  *sqlx.DB
	log *slog.Logger

	delivered, duplicates, fout, parked, stuck atomic.Int64
	connected                                  atomic.Bool
	processing                                 prometheus.Histogram
	reconnects                                 *prometheus.CounterVec

	stmts   *prepared.Cache // deliverSQL
	batches []*batch        // one per worker
	subs    *broker.Dialer  // the workers' subscribing connections
	sends   *broker.Dialer  // the connection for verzending (and dead-letter) sends
}

// New validates cfg and returns a Consumer; call Run to start it.
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
	c := &Consumer{cfg: cfg, db: db, log: log, stmts: prepared.New(db.DB), subs: subs, sends: sends}
	for range cfg.Workers {
		c.batches = append(c.batches, &batch{})
	}
	c.register(cfg.Registerer)
	return c, nil
}

func (c *Consumer) register(reg prometheus.Registerer) {
	counter := func(name, help string, v *atomic.Int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: handeling.MetricsNamespace, Name: name, Help: help},
			func() float64 { return float64(v.Load()) })
	}
	c.processing = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: handeling.MetricsNamespace,
		Name: "processing_duration_seconds", Help: "Time to handle one batch of publications, from receipt to commit.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)})
	c.reconnects = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: handeling.MetricsNamespace, Name: "reconnects_total",
		Help: "Outages of a dependency seen by this process (database or broker)."}, []string{"dependency"})
	for _, d := range []string{"database", "broker"} {
		c.reconnects.WithLabelValues(d) // 0 before the first outage, so queries find it
	}
	if reg == nil {
		return
	}
	reg.MustRegister(
		counter("delivered_total", "Handelingen set geleverd and sent to the verzending queue by this process.", &c.delivered),
		counter("duplicates_total", "Publications absorbed because their handeling was already delivered.", &c.duplicates),
		counter("fout_total", "Handelingen set fout (known errors) by this process.", &c.fout),
		counter("set_aside_total", "Unreadable publications sent to the dead-letter queue.", &c.parked),
		counter("stuck_batches_total", "Batches handed back because a worker held them longer than the batch timeout.", &c.stuck),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: handeling.MetricsNamespace, Name: "batch_age_seconds",
			Help: "How long the oldest batch this process holds has been in hand; 0 while it holds none."},
			func() float64 { return c.oldestBatch().Seconds() }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: handeling.MetricsNamespace, Name: "broker_connected",
			Help: "1 while the consumer is subscribed to the publication queue."}, func() float64 {
			if c.connected.Load() {
				return 1
			}
			return 0
		}),
		c.processing, c.reconnects, broker.NodeCollector(handeling.MetricsNamespace, c.subs, c.sends))
}

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
}

// Counts returns the consumer's counters.
func (c *Consumer) Counts() Counts {
	return Counts{c.delivered.Load(), c.duplicates.Load(), c.fout.Load(), c.parked.Load()}
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
			c.reconnects.WithLabelValues("broker").Inc()
		}
		failing = true
		_ = retry.Wait(ctx) // the loop ends on ctx
	}
	_ = c.stmts.Close()
	c.log.Info("consumer stopped")
	return nil
}

// session runs the workers over broker connections of their own until one fails or ctx ends.
// Each worker receives on a connection of its own, with one cumulative subscription, and
// handles its messages in delivery order, so one ack frame acknowledges a whole batch. Sends go
// over one more connection: a receipt awaited on a subscribing connection can deadlock behind
// prefetched messages (go-stomp reads frames in one loop). The subscribing connections go to one
// node (the Dialer stays with the node that answered) unless it fails meanwhile, and the next
// session after a failure starts at the next node; the sending one always goes to the first
// node that answers (Config.Broker). node names the node the workers subscribed on once they
// did, "" if the session never got that far.
func (c *Consumer) session(ctx context.Context) (node string, err error) {
	var conns []*broker.Conn
	defer func() {
		for i, conn := range conns {
			conn.Close()
			if err != nil && ctx.Err() == nil {
				if i == 0 {
					c.sends.Lost(conn)
				} else {
					c.subs.Lost(conn)
				}
			}
		}
	}()
	send, err := c.sends.Dial(ctx)
	if err != nil {
		return "", err
	}
	conns = append(conns, send)
	subs := make([]*broker.Subscription, c.cfg.Workers)
	perWorker := (c.cfg.Prefetch + c.cfg.Workers - 1) / c.cfg.Workers
	var nodes []string
	var recv *broker.Conn
	for i := range subs {
		if recv, err = c.subs.Dial(ctx); err != nil {
			return "", err
		}
		conns = append(conns, recv)
		if !slices.Contains(nodes, recv.Node) {
			nodes = append(nodes, recv.Node)
		}
		// The subscription is not tied to ctx: on shutdown the workers finish what they hold
		// and then the connection is closed, which hands back what was prefetched.
		if subs[i], err = recv.SubscribeCumulative(context.Background(), c.cfg.Queue, perWorker); err != nil {
			return "", err
		}
	}
	node = strings.Join(nodes, ",")
	c.log.Info("connected to broker", slog.String("addr", node), slog.String("verzending_addr", send.Node),
		slog.String("server", recv.Server), slog.String("heart_beats", recv.HeartBeats))
	c.connected.Store(true)
	defer c.connected.Store(false)

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
	go c.watch(sctx, cancel, func() {
		for _, conn := range conns {
			conn.Close()
		}
	})
	var wg sync.WaitGroup
	for i, sub := range subs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.work(sctx, hard, sub, send, c.batches[i]); err != nil {
				cancel(err)
			}
		}()
	}
	wg.Wait()
	if err := context.Cause(sctx); err != nil && !errors.Is(err, context.Canceled) {
		return node, err
	}
	return node, ctx.Err()
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

// work handles batches of publications until ctx ends; hard bounds the batch in hand.
func (c *Consumer) work(ctx, hard context.Context, sub *broker.Subscription, send *broker.Conn, b *batch) error {
	for {
		var m *broker.Delivery
		var ok bool
		select {
		case <-ctx.Done():
			return nil
		case m, ok = <-sub.C():
		}
		msgs, broken := c.fill(sub, m, ok)
		if len(msgs) > 0 {
			start := time.Now()
			b.begin(msgs)
			if err := c.handle(hard, msgs, send, b); err != nil {
				b.end()
				return err
			}
			c.processing.Observe(time.Since(start).Seconds())
			// Acks are not bound to ctx: what was processed is acknowledged even during shutdown.
			// The subscription is cumulative: the batch's last message acks all of it.
			b.at(stepAck)
			err := sub.Ack(context.Background(), msgs[len(msgs)-1])
			b.end()
			if err != nil {
				return err
			}
		}
		if broken != nil {
			return broken
		}
	}
}

// fill starts a batch with m and adds what is already prefetched, up to Batch, without
// waiting. broken reports a subscription that ended; the batch so far is still handled.
func (c *Consumer) fill(sub *broker.Subscription, m *broker.Delivery, ok bool) (batch []*broker.Delivery, broken error) {
	for {
		if !ok {
			return batch, sub.Err()
		}
		batch = append(batch, m)
		if len(batch) >= c.cfg.Batch {
			return batch, nil
		}
		select {
		case m, ok = <-sub.C():
		default:
			return batch, nil
		}
	}
}

// errBadInput marks a publication that can never be processed; it is set aside.
var errBadInput = errors.New("bad publication")

func parse(m *broker.Delivery) (int64, error) {
	if !broker.IsText(m.Body) {
		// Publications are text (CONTRACT.md section 3); encoding/json would read a string
		// with bytes that are not UTF-8 as if they were replacement characters.
		return 0, fmt.Errorf("%w: body is not text (UTF-8 without NUL)", errBadInput)
	}
	p, err := handeling.DecodePublication(m.Body)
	if errors.Is(err, handeling.ErrNoID) {
		return 0, fmt.Errorf("%w: body has no id", errBadInput)
	}
	if err != nil {
		return 0, fmt.Errorf("%w: body is not a publication: %s", errBadInput, jsonProblem(err))
	}
	if h := m.Header(handeling.IDHeader); h != "" && h != strconv.FormatInt(p.ID, 10) {
		return 0, fmt.Errorf("%w: %s header %q differs from body id %d", errBadInput, handeling.IDHeader, h, p.ID)
	}
	return p.ID, nil
}

// jsonProblem says what is wrong with a body without quoting it: encoding/json's errors quote
// a misfit number, which in "personen" would be a persoon id in the log and the brp-reason.
func jsonProblem(err error) string {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		return fmt.Sprintf("field %s is not %s", te.Field, te.Type)
	case errors.As(err, &se):
		return fmt.Sprintf("not JSON (offset %d)", se.Offset)
	}
	return "not a JSON object"
}

// handle processes a batch until it is done, retrying transient database failures in place
// (the publications stay held, unacknowledged). Unreadable publications and unknown ids are
// set aside. It returns an error only when the broker connection is unusable or ctx ended
// before the work was done; the batch then goes back to the queue.
func (c *Consumer) handle(ctx context.Context, msgs []*broker.Delivery, send *broker.Conn, b *batch) error {
	byID := map[int64][]*broker.Delivery{}
	var ids []int64
	for _, m := range msgs {
		id, err := parse(m)
		if err != nil {
			b.at(stepSetAside)
			if err := c.park(ctx, m, send, err.Error()); err != nil {
				return err
			}
			continue
		}
		if len(byID[id]) == 0 {
			ids = append(ids, id)
		}
		byID[id] = append(byID[id], m)
	}
	if len(ids) == 0 {
		return nil
	}
	slices.Sort(ids)
	b.setIDs(ids)
	retry := backoff.New(100*time.Millisecond, 5*time.Second)
	failing, locked := false, false
	for {
		res, err := c.deliver(ctx, ids, send, b)
		switch {
		case err == nil:
			if failing {
				c.log.Info("database available again")
			}
			if locked {
				c.log.Info("row locks obtained", slog.Any("admhnd_ids", ids))
			}
			return c.record(ctx, res, byID, send, b)
		case errors.Is(err, errBroker), ctx.Err() != nil:
			return err
		case dbsession.IsLockTimeout(err):
			// Another session holds some of these rows: a consumer with a copy of the same
			// publications, or one that froze inside its transaction until the database ends
			// its session (idle_in_transaction_session_timeout). Wait, naming it once.
			if !locked {
				c.log.Warn("rows locked by another session; retrying", slog.Any("admhnd_ids", ids),
					slog.Any("lock_holders", dbsession.Describe(ctx, c.db, "admhnd")))
				locked = true
			}
		case !failing:
			c.log.Warn("database unavailable, retrying", slog.Any("error", err), slog.Any("admhnd_ids", ids))
			c.reconnects.WithLabelValues("database").Inc()
			failing = true
		}
		b.at(stepRetry)
		if err := retry.Wait(ctx); err != nil {
			return err
		}
	}
}

// record counts a committed batch's outcomes, sets unknown ids aside and runs AfterCommit.
func (c *Consumer) record(ctx context.Context, res map[int64]outcome, byID map[int64][]*broker.Delivery, send *broker.Conn, b *batch) error {
	var ids []int64
	for id, o := range res {
		ids = append(ids, id)
		copies := int64(len(byID[id]))
		switch o {
		case delivered:
			c.delivered.Add(1)
			c.duplicates.Add(copies - 1)
		case markedFout:
			c.fout.Add(1)
			c.duplicates.Add(copies - 1)
		case duplicate:
			c.duplicates.Add(copies)
			c.log.Debug("already delivered; publication absorbed", slog.Int64("admhnd_id", id),
				slog.String("message_id", byID[id][0].MessageID))
		case unknown, excluded:
			reason := fmt.Sprintf("handeling %d does not exist", id)
			if o == excluded {
				reason = fmt.Sprintf("handeling %d is of a soort excluded from delivery", id)
			}
			b.at(stepSetAside)
			for _, m := range byID[id] {
				if err := c.park(ctx, m, send, reason); err != nil {
					return err
				}
			}
		}
	}
	return runHook(ctx, c.cfg.Hooks.AfterCommit, ids)
}

// park sets a publication that can never be processed aside on the dead-letter queue, with
// the reason, so that it is acknowledged instead of crash-looping. Its body goes as it came:
// as bytes when it is not text.
func (c *Consumer) park(ctx context.Context, m *broker.Delivery, send *broker.Conn, reason string) error {
	id := m.AdmhndID
	c.log.Error("publication set aside", slog.Int64("admhnd_id", id), slog.String("message_id", m.MessageID),
		slog.String("reason", reason), slog.String("dead_letter_queue", c.cfg.DeadLetterQueue))
	err := send.Send(ctx, broker.Message{
		Destination: c.cfg.DeadLetterQueue,
		AdmhndID:    id,
		Body:        m.Body,
		Binary:      !broker.IsText(m.Body),
		Header: map[string]string{
			"brp-reason":              reason,
			"brp-original-message-id": m.MessageID,
		},
	})
	if err != nil {
		return fmt.Errorf("%w: %w", errBroker, err)
	}
	c.parked.Add(1)
	return nil
}

func runHook(ctx context.Context, h func(context.Context, []int64) error, ids []int64) error {
	if h == nil {
		return nil
	}
	return h(ctx, ids)
}
