package levering

import (
	"context"
	"time"

	"github.com/brp/levering/broker"
)

// worker is one of a session's workers: it owns its subscription and the batch it holds, and
// sends over the session's sending connection. It lives as long as the session; the batch
// (for the watchdog, readiness and metrics) outlives it in Consumer.batches.
type worker struct {
	*Consumer
	sub  *broker.Subscription
	send *broker.Conn
	b    *batch
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
			start := time.Now()
			w.b.begin(msgs)
			if err := w.handle(hard, msgs); err != nil {
				w.b.end()
				return err
			}
			w.processing.Observe(time.Since(start).Seconds())
			// Acks are not bound to ctx: what was processed is acknowledged even during shutdown.
			// The subscription is cumulative: the batch's last message acks all of it.
			w.b.at(stepAck)
			err := w.sub.Ack(context.Background(), msgs[len(msgs)-1])
			w.b.end()
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
func (w *worker) fill(m *broker.Delivery, ok bool) (batch []*broker.Delivery, broken error) {
	for {
		if !ok {
			return batch, w.sub.Err()
		}
		batch = append(batch, m)
		if len(batch) >= w.cfg.Batch {
			return batch, nil
		}
		select {
		case m, ok = <-w.sub.C():
		default:
			return batch, nil
		}
	}
}
