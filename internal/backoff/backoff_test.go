package backoff

import (
	"context"
	"slices"
	"testing"
	"time"
)

func TestNextDoublesUpToMax(t *testing.T) {
	const ms = time.Millisecond
	b := New(100*ms, 1000*ms)
	var got []time.Duration
	for range 7 {
		got = append(got, b.Next())
	}
	want := []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1000 * ms, 1000 * ms, 1000 * ms}
	if !slices.Equal(got, want) {
		t.Fatalf("waits %v, want %v", got, want)
	}
	b.Reset()
	if d := b.Next(); d != 100*ms {
		t.Fatalf("after Reset the wait is %v, want 100ms", d)
	}
	if d := b.Next(); d != 200*ms {
		t.Fatalf("the wait after that is %v, want 200ms", d)
	}
}

func TestWait(t *testing.T) {
	b := New(20*time.Millisecond, time.Hour)
	start := time.Now()
	if err := b.Wait(context.Background()); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Fatalf("Wait returned after %v, want at least 20ms", d)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start = time.Now()
	if err := b.Wait(ctx); err != context.Canceled {
		t.Fatalf("Wait on an ended context: %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Wait on an ended context took %v", d)
	}
	if d := b.Next(); d != 80*time.Millisecond {
		t.Fatalf("after two Waits the next wait is %v, want 80ms: an ended Wait counts as a try", d)
	}
}
