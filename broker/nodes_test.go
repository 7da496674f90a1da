package broker

import (
	"strings"
	"testing"
)

func TestParseAddrs(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // nodes joined by "|", or "error: <part of the message>"
	}{
		{"127.0.0.1:61613", "127.0.0.1:61613"},
		{"a:1,b:2", "a:1|b:2"},
		{" a:1 , b:2 ", "a:1|b:2"},
		{"[::1]:61613,amq-b.example:61613", "[::1]:61613|amq-b.example:61613"},
		{"", "error: entry 1 is empty"},
		{"a:1,,b:2", "error: entry 2 is empty"},
		{"a:1,", "error: entry 2 is empty"},
		{"a:1,b", `error: entry 2 ("b") is not host:port`},
		{":61613", `error: entry 1 (":61613") is not host:port`},
		{"a:0", `error: entry 1 ("a:0") has no port 1-65535`},
		{"a:65536", `error: entry 1 ("a:65536") has no port 1-65535`},
		{"a:x", `error: entry 1 ("a:x") has no port 1-65535`},
		{"a:1, a:1", `error: entry 2 ("a:1") is listed twice`},
	} {
		nodes, err := ParseAddrs(tc.in)
		got := strings.Join(nodes, "|")
		if err != nil {
			got = "error: " + err.Error()
		}
		if got != tc.want {
			t.Errorf("ParseAddrs(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// RandomStart spreads the processes of one command over the nodes; without it every process
// starts at the first.
func TestDialerStart(t *testing.T) {
	cfg := Config{Addr: "a:1,b:2,c:3"}
	seen := map[int64]int{}
	for range 300 {
		d, err := NewDialer(cfg)
		if err != nil {
			t.Fatal(err)
		}
		seen[d.next.Load()]++
	}
	if len(seen) != 1 || seen[0] != 300 {
		t.Fatalf("without RandomStart the dialers started at %v, want always node 0", seen)
	}
	cfg.RandomStart = true
	clear(seen)
	for range 300 {
		d, _ := NewDialer(cfg)
		seen[d.next.Load()]++
	}
	for i := range int64(3) {
		if seen[i] < 50 { // 100 expected each
			t.Fatalf("with RandomStart the dialers started at %v, want all three nodes about equally", seen)
		}
	}
}

func TestLostMovesTheStartOnce(t *testing.T) {
	d, err := NewDialer(Config{Addr: "a:1,b:2,c:3"})
	if err != nil {
		t.Fatal(err)
	}
	onA := &Conn{Node: "a:1", index: 0}
	d.current = "a:1"
	d.Lost(onA)
	d.Lost(onA) // a second connection of the same session: the start moved already
	if n := d.next.Load(); n != 1 {
		t.Fatalf("after losing node a the next Dial starts at %d, want 1", n)
	}
	if c := d.Current(); c != "" {
		t.Fatalf("Current after the loss: %q, want none", c)
	}
	onC := &Conn{Node: "c:3", index: 2}
	d.next.Store(2)
	d.Lost(onC)
	if n := d.next.Load(); n != 0 {
		t.Fatalf("after losing the last node the next Dial starts at %d, want 0 (round the list)", n)
	}
}
