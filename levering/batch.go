package levering

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/brp/levering/broker"
	"github.com/brp/levering/handeling"
)

// The steps of a batch, as logs and readiness name them.
const (
	stepLock       = "locking and updating the rows"
	stepVerzending = "sending to the verzending queue"
	stepCommit     = "committing"
	stepAck        = "acknowledging"
	stepSetAside   = "setting aside"
	stepRetry      = "waiting to retry the database"
)

// batch is what one worker holds now, for the watchdog (Consumer.watch), readiness and the
// batch age metric. The worker writes it; others read it.
type batch struct {
	since    atomic.Int64 // when the batch was taken (unix ns); 0 while the worker holds none
	size     atomic.Int64
	current  atomic.Pointer[string]
	reported atomic.Bool // the watchdog has handed this batch back

	mu     sync.Mutex
	admhnd []int64
}

func (b *batch) begin(msgs []*broker.Delivery) {
	b.mu.Lock()
	b.admhnd = b.admhnd[:0]
	for _, m := range msgs {
		b.admhnd = append(b.admhnd, handeling.ParseID(m.Header(handeling.IDHeader)))
	}
	b.mu.Unlock()
	b.size.Store(int64(len(msgs)))
	b.reported.Store(false)
	b.since.Store(time.Now().UnixNano())
}

func (b *batch) setIDs(ids []int64) {
	b.mu.Lock()
	b.admhnd = append(b.admhnd[:0], ids...)
	b.mu.Unlock()
}

func (b *batch) end() { b.since.Store(0) }

func (b *batch) at(step string) { b.current.Store(&step) }

func (b *batch) step() string {
	if s := b.current.Load(); s != nil {
		return *s
	}
	return ""
}

func (b *batch) ids() []int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]int64(nil), b.admhnd...)
}

// age is how long the batch in hand has been held, 0 if none.
func (b *batch) age() time.Duration {
	if since := b.since.Load(); since != 0 {
		return time.Since(time.Unix(0, since))
	}
	return 0
}
