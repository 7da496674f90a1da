package levering

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/brp/levering/broker"
)

// worker is one of a session's workers: it takes batches of publications from its own
// subscription, has its executor handle them, and acknowledges them. It lives as long as the
// session; the batch (for the watchdog, readiness and metrics) outlives it in Consumer.batches.
type worker struct {
	sub        *broker.Subscription
	b          *batch
	maxBatch   int                  // Config.Batch
	processing prometheus.Histogram // a batch's time from receipt to commit
	exec       *executor
}

// worker returns the worker of subscription sub, which sends over send and holds its batch in b.
func (c *Consumer) worker(sub *broker.Subscription, send sender, b *batch) *worker {
	return &worker{sub: sub, b: b, maxBatch: c.cfg.Batch, processing: c.m.processing, exec: &executor{
		sql: statementsFor(c.cfg.Layout), db: c.db, stmts: c.stmts, send: send,
		excluded: c.cfg.Excluded, strict: c.strict(), verzendingQueue: c.cfg.VerzendingQueue,
		deadLetterQueue: c.cfg.DeadLetterQueue, hooks: c.cfg.Hooks,
		log: c.log, m: c.m, b: b,
	}}
}

// run handles batches of publications until ctx ends; hard bounds the batch in hand.
func (w *worker) run(ctx, hard context.Context) error {
	for {
		var m *broker.Delivery
		var ok bool
		select {
		case <-ctx.Done():
			return nil
		case m, ok = <-w.sub.C():
		}
		msgs, broken := w.fill(m, ok)
		if len(msgs) > 0 {
			if err := w.handle(hard, msgs); err != nil {
				return err
			}
		}
		if broken != nil {
			return broken
		}
	}
}

// handle has the executor handle msgs and acknowledges them.
func (w *worker) handle(ctx context.Context, msgs []*broker.Delivery) error {
	start := time.Now()
	w.b.begin(msgs)
	defer w.b.end()
	if err := w.exec.handle(ctx, msgs); err != nil {
		return err
	}
	w.processing.Observe(time.Since(start).Seconds())
	// Acks are not bound to ctx: what was processed is acknowledged even during shutdown.
	// The subscription is cumulative: the batch's last message acks all of it.
	w.b.at(stepAck)
	return w.sub.Ack(context.Background(), msgs[len(msgs)-1])
}

// fill starts a batch with m and adds what is already prefetched, up to Batch, without
// waiting. broken reports a subscription that ended; the batch so far is still handled.
func (w *worker) fill(m *broker.Delivery, ok bool) (batch []*broker.Delivery, broken error) {
	for {
		if !ok {
			return batch, w.sub.Err()
		}
		batch = append(batch, m)
		if len(batch) >= w.maxBatch {
			return batch, nil
		}
		select {
		case m, ok = <-w.sub.C():
		default:
			return batch, nil
		}
	}
}
