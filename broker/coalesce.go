package broker

import (
	"bytes"
	"net"
	"strconv"
	"time"
)

// coalescingConn writes the frames of a STOMP transaction to the socket in one write.
//
// go-stomp flushes its buffer after every frame, so a transaction of n messages costs n+2
// system calls and TCP segments here and as many reads and wake-ups in the broker. Nothing
// in a transaction takes effect before its COMMIT, so BEGIN and transactional SENDs are held
// back and written together with the next frame that is not one of those (COMMIT, ABORT, an
// ACK, a heart-beat). Frames that may be waited on (anything with a receipt header) and all
// others go out at once, after what is held, so the byte order is never changed. Measured on
// this project's benchmark: about 7 % less CPU per handeling for the whole pipeline.
//
// Only go-stomp's writer goroutine (and, before it starts, the handshake) writes, so Write
// needs no lock. The frames are followed with a small STOMP scanner rather than guessed
// from how go-stomp happens to call Write, because a frame larger than go-stomp's buffer
// arrives in several writes.
type coalescingConn struct {
	net.Conn
	held []byte
	scan frameScanner
	// wait bounds every socket write: go-stomp's one loop both writes and watches the
	// heart-beats, so a write blocked on a peer that reads nothing would stop both.
	wait time.Duration
}

// maxHeld bounds what is held back; a larger transaction is written in parts of this size.
const maxHeld = 64 << 10

func (c *coalescingConn) Write(p []byte) (int, error) {
	urgent := c.scan.feed(p)
	if !urgent && len(c.held)+len(p) <= maxHeld {
		c.held = append(c.held, p...)
		return len(p), nil
	}
	if c.wait > 0 {
		if err := c.Conn.SetWriteDeadline(time.Now().Add(c.wait)); err != nil {
			return 0, err
		}
	}
	if len(c.held) == 0 {
		return c.Conn.Write(p)
	}
	c.held = append(c.held, p...)
	_, err := c.Conn.Write(c.held)
	c.held = c.held[:0]
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

type scanState int

const (
	between  scanState = iota // before a frame's command; an EOL here is a heart-beat
	command                   // in the command line
	headers                   // in the header lines
	body                      // in the body (length bytes, or up to the NUL when length < 0)
	trailing                  // the body is read; the NUL comes next
)

// frameScanner follows the frames of an outgoing STOMP 1.2 byte stream.
type frameScanner struct {
	state   scanState
	line    []byte
	command string
	holds   bool // the frame may wait for the next one: BEGIN, or SEND in a transaction
	receipt bool
	length  int
}

// feed scans p and reports whether it completes a frame or heart-beat that must be written
// now.
func (s *frameScanner) feed(p []byte) (urgent bool) {
	for i := 0; i < len(p); i++ {
		b := p[i]
		switch s.state {
		case between:
			if b == '\n' {
				urgent = true
			} else if b != '\r' {
				s.state, s.line = command, append(s.line[:0], b)
			}
		case command:
			if b != '\n' {
				s.line = append(s.line, b)
				continue
			}
			s.command = string(bytes.TrimSuffix(s.line, []byte{'\r'}))
			s.holds = s.command == "BEGIN"
			s.receipt, s.length, s.line = false, -1, s.line[:0]
			s.state = headers
		case headers:
			if b != '\n' {
				s.line = append(s.line, b)
				continue
			}
			l := bytes.TrimSuffix(s.line, []byte{'\r'})
			s.line = s.line[:0]
			if len(l) == 0 {
				s.state = body
				if s.length == 0 {
					s.state = trailing
				}
				continue
			}
			k, v, _ := bytes.Cut(l, []byte{':'})
			switch string(k) {
			case "transaction":
				s.holds = s.holds || s.command == "SEND"
			case "receipt":
				s.receipt = true
			case "content-length":
				// The first of repeated headers counts (STOMP 1.2).
				if n, err := strconv.Atoi(string(v)); err == nil && n >= 0 && s.length < 0 {
					s.length = n
				}
			}
		case body:
			if s.length < 0 {
				j := bytes.IndexByte(p[i:], 0)
				if j < 0 {
					return urgent
				}
				i += j
				urgent = s.end() || urgent
				continue
			}
			n := min(s.length, len(p)-i)
			s.length -= n
			i += n - 1
			if s.length == 0 {
				s.state = trailing
			}
		case trailing:
			// b is the NUL that ends the frame.
			urgent = s.end() || urgent
		}
	}
	return urgent
}

// end finishes a frame and reports whether it must be written now.
func (s *frameScanner) end() (urgent bool) {
	s.state = between
	return !s.holds || s.receipt
}
