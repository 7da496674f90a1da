// Package backoff is the wait between retries of something that failed: it starts short and
// doubles after every try, up to a cap, so that a dependency that comes back is noticed soon
// and one that stays away is not hammered.
package backoff

import (
	"context"
	"time"
)

// Backoff hands out the waits between tries: Start, then twice the previous wait, at most Max.
// Reset starts over after a success. Not safe for concurrent use.
type Backoff struct {
	start, max, next time.Duration
}

// New returns a Backoff whose first wait is start and whose waits double up to max.
func New(start, max time.Duration) *Backoff {
	return &Backoff{start: start, max: max, next: start}
}

// Next returns the wait before the next try and doubles the one after, up to max.
func (b *Backoff) Next() time.Duration {
	d := b.next
	b.next = min(2*b.next, b.max)
	return d
}

// Reset makes the next wait start again.
func (b *Backoff) Reset() { b.next = b.start }

// Wait waits Next() or until ctx ends, and returns ctx.Err() in the latter case.
func (b *Backoff) Wait(ctx context.Context) error {
	t := time.NewTimer(b.Next())
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
