package rig

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/brp/levering/broker"
	"github.com/brp/levering/handeling"
)

// Received is one message read back from a queue.
type Received struct {
	AdmhndID  int64
	MessageID string
	Header    map[string]string
	Body      []byte
	At        time.Time // when the reader received it
}

// Reader reads a queue back in order, as an afnemer would, acknowledging what it read. It
// redials when the broker goes away (a restart scenario); a message whose ack was lost comes
// again later, which only adds a duplicate after its first occurrence.
type Reader struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	got     []Received
	arrived chan struct{} // closed, and replaced, when a message arrives (Await)
}

// Read subscribes to queue on the broker of cfg and collects its messages until Close.
func Read(cfg broker.Config, queue string) (*Reader, error) {
	return ReadAhead(cfg, queue, 1)
}

// ReadAhead is Read with the broker pushing up to prefetch messages ahead of the reader's
// acks, as a JMS client does (ActiveMQ's default for a queue is 1,000). With prefetch 1 each
// message waits for the ack of the one before, a round trip that on a busy machine makes the
// reader the slowest part of a pipeline it measures. The read order is still the queue's: one
// exclusive subscription receives in dispatch order.
func ReadAhead(cfg broker.Config, queue string, prefetch int) (*Reader, error) {
	conn, sub, err := subscribe(cfg, queue, prefetch)
	if err != nil {
		return nil, fmt.Errorf("rig: broker at %s is not reachable (start it with scripts/services.sh up): %w", cfg.Addr, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &Reader{cancel: cancel, done: make(chan struct{}), arrived: make(chan struct{})}
	go func() {
		defer close(r.done)
		for ctx.Err() == nil {
			r.drain(ctx, sub)
			conn.Close()
			conn = nil
			for ctx.Err() == nil {
				if conn, sub, err = subscribe(cfg, queue, prefetch); err == nil {
					break
				}
				time.Sleep(200 * time.Millisecond)
			}
		}
		if conn != nil {
			conn.Close()
		}
	}()
	return r, nil
}

// Close stops reading.
func (r *Reader) Close() { r.cancel(); <-r.done }

func subscribe(cfg broker.Config, queue string, prefetch int) (*broker.Conn, *broker.Subscription, error) {
	conn, err := broker.Dial(context.Background(), cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("rig: %w", err)
	}
	// One subscription with an immediate ack reads in the queue's order; exclusive keeps
	// it across a reconnect (broker.Conn.SubscribeExclusive): without it, after a broker pause
	// the new subscription got the messages after the one the dead one held unacknowledged,
	// before that one came back, and the reader saw a person's handelingen out of order.
	sub, err := conn.SubscribeExclusive(context.Background(), queue, prefetch)
	if err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("rig: %w", err)
	}
	return conn, sub, nil
}

// drain reads until the subscription breaks or ctx ends.
func (r *Reader) drain(ctx context.Context, sub *broker.Subscription) {
	for {
		select {
		case <-ctx.Done():
			return
		case m, ok := <-sub.C():
			if !ok {
				return
			}
			rec := Received{AdmhndID: handeling.ParseID(m.Header(handeling.IDHeader)), MessageID: m.MessageID, Header: m.Headers(),
				Body: m.Body, At: time.Now()}
			r.mu.Lock()
			r.got = append(r.got, rec)
			close(r.arrived)
			r.arrived = make(chan struct{})
			r.mu.Unlock()
			if err := sub.Ack(context.Background(), m); err != nil {
				return
			}
		}
	}
}

// Messages returns what was read so far.
func (r *Reader) Messages() []Received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Received(nil), r.got...)
}

// Await calls cond with what was read so far, at once and again as each message arrives,
// until cond returns true (Await returns true) or timeout passes (false). A test waits on the
// message rather than polling: a round's messages arrive within milliseconds of its commit,
// and a poll adds its interval whenever it looks too early.
func (r *Reader) Await(timeout time.Duration, cond func([]Received) bool) bool {
	return r.await(timeout, false, cond)
}

// AwaitFlow is Await with a timeout that starts again as each message arrives: it gives up
// once quiet passes without a new one. For a reader that trails the messages it waits for on
// a busy machine, where a timeout in all would fail on slowness instead of on a stop.
func (r *Reader) AwaitFlow(quiet time.Duration, cond func([]Received) bool) bool {
	return r.await(quiet, true, cond)
}

// await is Await; with restart, the timeout starts again at each message (AwaitFlow).
func (r *Reader) await(timeout time.Duration, restart bool, cond func([]Received) bool) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		got, arrived := r.got[:len(r.got):len(r.got)], r.arrived
		r.mu.Unlock()
		if cond(got) {
			return true
		}
		select {
		case <-arrived:
			if restart {
				deadline.Reset(timeout)
			}
		case <-deadline.C:
			return cond(r.Messages())
		}
	}
}

// Count is how many messages were read so far.
func (r *Reader) Count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}

// IDs returns the admhnd-id headers read so far, in queue order.
func (r *Reader) IDs() []int64 {
	var ids []int64
	for _, m := range r.Messages() {
		ids = append(ids, m.AdmhndID)
	}
	return ids
}

// Drain reads queue until it has want messages and then nothing more arrives for 300 ms (or,
// short of want, nothing arrives for 10 s), acknowledging everything, and returns the
// admhnd-ids in queue order: it empties a queue after a measurement. One subscriber reads a
// queue in order, whatever its prefetch.
func Drain(ctx context.Context, cfg broker.Config, queue string, want int) ([]int64, error) {
	conn, err := broker.Dial(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("rig: drain %s: %w", queue, err)
	}
	defer conn.Disconnect()
	const prefetch = 1000
	sub, err := conn.Subscribe(ctx, queue, prefetch)
	if err != nil {
		return nil, fmt.Errorf("rig: drain %s: %w", queue, err)
	}
	msgs := Pump(sub, prefetch)
	var ids []int64
	idle := func() time.Duration {
		if len(ids) >= want {
			return 300 * time.Millisecond
		}
		return 10 * time.Second
	}
	timer := time.NewTimer(idle())
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return ids, ctx.Err()
		case <-timer.C:
			return ids, nil
		case m, ok := <-msgs:
			if !ok {
				return ids, sub.Err()
			}
			ids = append(ids, handeling.ParseID(m.Header(handeling.IDHeader)))
			if err := sub.Ack(ctx, m); err != nil {
				return ids, fmt.Errorf("rig: drain %s: %w", queue, err)
			}
			timer.Reset(idle())
		}
	}
}

// Pump moves a subscription's messages into a channel that holds prefetch of them, so that
// the broker connection's single reading loop never blocks handing a message over. Without it,
// workers that acknowledge on the subscribing connection can deadlock: the loop waits for a
// worker to take a message, the workers wait in Ack for the loop to write.
func Pump(sub *broker.Subscription, prefetch int) <-chan *broker.Delivery {
	out := make(chan *broker.Delivery, 2*prefetch+16)
	go func() {
		defer close(out)
		for m := range sub.C() {
			out <- m
		}
	}()
	return out
}
