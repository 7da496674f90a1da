package broker

import (
	"errors"
	"maps"
	"testing"

	"github.com/go-stomp/stomp/v3"
	"github.com/go-stomp/stomp/v3/frame"
)

func message(headers ...string) *stomp.Message {
	return &stomp.Message{Header: frame.NewHeader(headers...), Body: []byte("{}")}
}

func TestDeliveryHeaders(t *testing.T) {
	s := newSubscription(nil, 4)
	in := make(chan *stomp.Message, 4)
	in <- message("message-id", "ID:1", "admhnd-id", "42", "brp-reason", "first", "brp-reason", "second")
	in <- message("message-id", "ID:2", "admhnd-id", "x7")
	close(in)
	s.pump(in)

	d := <-s.C()
	if d.MessageID != "ID:1" || d.Header("admhnd-id") != "42" || string(d.Body) != "{}" {
		t.Fatalf("got message-id %q admhnd-id %q body %q", d.MessageID, d.Header("admhnd-id"), d.Body)
	}
	if got := d.Header("brp-reason"); got != "first" {
		t.Errorf(`Header("brp-reason") = %q, want the first value`, got)
	}
	want := map[string]string{"message-id": "ID:1", "admhnd-id": "42", "brp-reason": "first"}
	if got := d.Headers(); !maps.Equal(got, want) {
		t.Errorf("Headers() = %v, want %v", got, want)
	}
	d = <-s.C()
	if d.Header("admhnd-id") != "x7" {
		t.Errorf("admhnd-id %q, want the header as sent", d.Header("admhnd-id"))
	}
}

func TestSubscriptionEnds(t *testing.T) {
	t.Run("with an error", func(t *testing.T) {
		s := newSubscription(nil, 4)
		in := make(chan *stomp.Message, 4)
		in <- message("message-id", "ID:1")
		broken := errors.New("connection closed unexpectedly")
		in <- &stomp.Message{Err: broken}
		go s.pump(in)

		if d, ok := <-s.C(); !ok || d.MessageID != "ID:1" {
			t.Fatalf("the message before the error: got %v, %v", d, ok)
		}
		if err := s.Err(); err != nil {
			t.Errorf("Err() = %v while the subscription is open", err)
		}
		close(in)
		if d, ok := <-s.C(); ok {
			t.Fatalf("C delivered %v after the error; want it closed", d)
		}
		if err := s.Err(); err != broken {
			t.Errorf("Err() = %v, want %v", err, broken)
		}
	})
	t.Run("without one", func(t *testing.T) {
		s := newSubscription(nil, 1)
		in := make(chan *stomp.Message)
		close(in)
		s.pump(in)
		if _, ok := <-s.C(); ok {
			t.Fatal("C not closed")
		}
		if err := s.Err(); err == nil || err.Error() != "subscription closed" {
			t.Errorf(`Err() = %v, want "subscription closed"`, err)
		}
	})
}
