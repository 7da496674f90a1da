package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/brp/levering/broker"
	"github.com/brp/levering/handeling"
	"github.com/brp/levering/internal/brptest"
)

// TestAcksDoNotWaitBehindPrefetchedMessages: a consumer takes a batch, then acks it without
// reading further while the broker pushes the rest of its prefetch. go-stomp's single I/O loop
// must not block delivering those (its own channel holds 16), or the acks are never written.
func TestAcksDoNotWaitBehindPrefetchedMessages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := "/queue/test." + brptest.Name(t)
	msgs := make([]broker.Message, 100)
	for i := range msgs {
		msgs[i] = broker.Message{Header: handeling.IDHeaders(int64(i + 1)), Body: []byte(`{}`)}
	}
	brptest.Publish(t, q, msgs...)
	cfg := brptest.Broker()
	cfg.OpTimeout = 5 * time.Second
	conn, err := broker.Dial(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sub, err := conn.Subscribe(ctx, q, 100)
	if err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		var held []*broker.Delivery
		for range 30 {
			select {
			case m, ok := <-sub.C():
				if !ok {
					t.Fatal(sub.Err())
				}
				held = append(held, m)
			case <-time.After(5 * time.Second):
				t.Fatalf("round %d: only %d messages arrived", round, len(held))
			}
		}
		time.Sleep(200 * time.Millisecond) // the broker pushes the rest of the prefetch meanwhile
		for i, m := range held {
			if err := sub.Ack(ctx, m); err != nil {
				t.Fatalf("round %d: ack %d of 30: %v", round, i+1, err)
			}
		}
	}
}
