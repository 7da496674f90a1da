package broker

import (
	"bytes"
	"net"
	"strconv"
	"testing"

	"github.com/go-stomp/stomp/v3/frame"
)

// recordingConn records each write that reaches the socket.
type recordingConn struct {
	net.Conn
	writes [][]byte
}

func (r *recordingConn) Write(p []byte) (int, error) {
	r.writes = append(r.writes, append([]byte(nil), p...))
	return len(p), nil
}

func (r *recordingConn) all() []byte { return bytes.Join(r.writes, nil) }

func sendFrame(tx string, body []byte, extra ...string) *frame.Frame {
	f := frame.New(frame.SEND, frame.Destination, "/queue/q", frame.ContentLength, strconv.Itoa(len(body)))
	if tx != "" {
		f.Header.Add(frame.Transaction, tx)
	}
	for i := 0; i+1 < len(extra); i += 2 {
		f.Header.Add(extra[i], extra[i+1])
	}
	f.Body = body
	return f
}

// textFrame is sendFrame as the service sends its messages: without content-length (a JMS
// TextMessage), the body ending at the frame's NUL.
func textFrame(tx string, body []byte, extra ...string) *frame.Frame {
	f := sendFrame(tx, body, extra...)
	f.Header.Del(frame.ContentLength)
	return f
}

func TestCoalescingConnWritesATransactionOnce(t *testing.T) {
	t.Parallel()
	// Bodies that look like frames, hold NULs and exceed go-stomp's 4 KiB buffer must not
	// confuse the scanner.
	tricky := []byte("COMMIT\ntransaction:t1\nreceipt:r\n\n\x00SEND\n\n")
	big := bytes.Repeat([]byte("x"), 10_000)
	cases := []struct {
		name   string
		frames []*frame.Frame // nil is a heart-beat
		writes int            // writes that reach the socket
	}{
		{"transaction", []*frame.Frame{
			frame.New(frame.BEGIN, frame.Transaction, "t1"),
			sendFrame("t1", []byte(`{"id":1}`)), sendFrame("t1", tricky), sendFrame("t1", big),
			frame.New(frame.COMMIT, frame.Transaction, "t1", frame.Receipt, "r1"),
		}, 1},
		{"abort flushes", []*frame.Frame{
			frame.New(frame.BEGIN, frame.Transaction, "t2"), sendFrame("t2", []byte("a")),
			frame.New(frame.ABORT, frame.Transaction, "t2"),
		}, 1},
		{"send outside a transaction goes at once", []*frame.Frame{
			sendFrame("", []byte("a")), sendFrame("", []byte("b"), frame.Receipt, "r2"),
		}, 2},
		{"a transactional send with a receipt is waited on", []*frame.Frame{
			frame.New(frame.BEGIN, frame.Transaction, "t3"), sendFrame("t3", []byte("a"), frame.Receipt, "r3"),
		}, 1},
		{"heart-beat and ack flush", []*frame.Frame{
			frame.New(frame.BEGIN, frame.Transaction, "t4"), nil,
			frame.New(frame.BEGIN, frame.Transaction, "t5"), frame.New(frame.ACK, frame.Id, "m1"),
		}, 2},
		{"a large non-transactional send is written whole", []*frame.Frame{sendFrame("", big)}, 1},
		{"text frames without content-length", []*frame.Frame{
			frame.New(frame.BEGIN, frame.Transaction, "t6"),
			textFrame("t6", []byte(`{"id":1,"soort":"Zoë"}`)), textFrame("t6", []byte("COMMIT\ntransaction:t6\nreceipt:r\n\n")),
			textFrame("t6", big), textFrame("t6", nil),
			frame.New(frame.COMMIT, frame.Transaction, "t6", frame.Receipt, "r6"),
			textFrame("", []byte("a"), frame.Receipt, "r7"),
		}, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := &recordingConn{}
			c := &coalescingConn{Conn: rec}
			w := frame.NewWriter(c)
			var want bytes.Buffer
			ref := frame.NewWriter(&want)
			for _, f := range tc.frames {
				if err := w.Write(f); err != nil {
					t.Fatal(err)
				}
				if err := ref.Write(f); err != nil {
					t.Fatal(err)
				}
			}
			if len(c.held) != 0 {
				t.Fatalf("%d bytes still held after a frame that must go out", len(c.held))
			}
			if !bytes.Equal(rec.all(), want.Bytes()) {
				t.Fatalf("the socket got other bytes than go-stomp wrote")
			}
			if len(rec.writes) != tc.writes {
				t.Fatalf("%d writes reached the socket, want %d", len(rec.writes), tc.writes)
			}
		})
	}
}

func TestCoalescingConnBoundsWhatItHolds(t *testing.T) {
	t.Parallel()
	rec := &recordingConn{}
	c := &coalescingConn{Conn: rec}
	w := frame.NewWriter(c)
	if err := w.Write(frame.New(frame.BEGIN, frame.Transaction, "t")); err != nil {
		t.Fatal(err)
	}
	body := bytes.Repeat([]byte("y"), 1000)
	for range 200 {
		if err := w.Write(sendFrame("t", body)); err != nil {
			t.Fatal(err)
		}
		if len(c.held) > maxHeld {
			t.Fatalf("holds %d bytes, more than %d", len(c.held), maxHeld)
		}
	}
	if len(rec.writes) == 0 {
		t.Fatal("a 200 KB transaction was held back whole")
	}
}
