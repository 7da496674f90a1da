package setup

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/lib/pq"

	"github.com/brp/levering/broker"
	"github.com/brp/levering/handeling"
)

// Each type below is an envconfig.Decoder whose error says what is expected; Load adds the
// variable name and the value.

// Millis is a positive duration given as bare milliseconds (the seed's form) or a Go duration.
type Millis time.Duration

// Decode implements envconfig.Decoder.
func (m *Millis) Decode(v string) error {
	d, err := parseDuration(v, time.Millisecond)
	if err != nil || d <= 0 {
		return fmt.Errorf("expected a positive number of milliseconds (5000) or a duration (250ms)")
	}
	*m = Millis(d)
	return nil
}

func (m Millis) String() string { return time.Duration(m).String() }

// Seconds is a positive duration given as bare seconds or a Go duration.
type Seconds time.Duration

// Decode implements envconfig.Decoder.
func (s *Seconds) Decode(v string) error {
	d, err := parseDuration(v, time.Second)
	if err != nil || d <= 0 {
		return fmt.Errorf("expected a positive number of seconds (30) or a duration (30s)")
	}
	*s = Seconds(d)
	return nil
}

func (s Seconds) String() string { return time.Duration(s).String() }

// Duration is a non-negative Go duration (0 allowed).
type Duration time.Duration

// Decode implements envconfig.Decoder.
func (d *Duration) Decode(v string) error {
	x, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil || x < 0 {
		return fmt.Errorf("expected a duration such as 10s (0 for off)")
	}
	*d = Duration(x)
	return nil
}

func (d Duration) String() string { return time.Duration(d).String() }

// heartBeat is a STOMP heart-beat interval: 0 (off) or a duration (package broker bounds it).
type heartBeat time.Duration

// Decode implements envconfig.Decoder.
func (h *heartBeat) Decode(v string) error {
	x, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil || x < 0 {
		return fmt.Errorf("expected 0s (off) or a duration such as 5s")
	}
	if x == 0 {
		x = -1 // package broker's off: its zero is the default
	}
	*h = heartBeat(x)
	return nil
}

func (h heartBeat) String() string { return time.Duration(max(h, 0)).String() }

func parseDuration(v string, unit time.Duration) (time.Duration, error) {
	v = strings.TrimSpace(v)
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return time.Duration(n) * unit, nil
	}
	return time.ParseDuration(v)
}

// Positive is an integer greater than zero.
type Positive int

// Decode implements envconfig.Decoder.
func (p *Positive) Decode(v string) error {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n <= 0 {
		return fmt.Errorf("expected a positive integer")
	}
	*p = Positive(n)
	return nil
}

// Share is a share greater than 0 and at most 1: a fraction (0.99) or a percentage (99%).
type Share float64

// Decode implements envconfig.Decoder.
func (s *Share) Decode(v string) error {
	v = strings.TrimSpace(v)
	div := 1.0
	if t, ok := strings.CutSuffix(v, "%"); ok {
		v, div = strings.TrimSpace(t), 100
	}
	x, err := strconv.ParseFloat(v, 64)
	if x /= div; err != nil || !(x > 0 && x <= 1) {
		return fmt.Errorf("expected a share such as 0.99 or 99%%, at most 1")
	}
	*s = Share(x)
	return nil
}

func (s Share) String() string { return strconv.FormatFloat(float64(s), 'g', -1, 64) }

// Bytes is a positive size: bare bytes, or a number with a binary unit (KiB, MiB, GiB) or a
// decimal one (kB, MB, GB).
type Bytes int

var byteUnits = []struct {
	suffix string
	n      int
}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"kB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1}}

// Decode implements envconfig.Decoder.
func (b *Bytes) Decode(v string) error {
	v, unit := strings.TrimSpace(v), 1
	for _, u := range byteUnits {
		if num, ok := strings.CutSuffix(v, u.suffix); ok {
			v, unit = strings.TrimSpace(num), u.n
			break
		}
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 || n > (1<<62)/unit {
		return fmt.Errorf("expected a positive size in bytes, or with a unit: 64MiB, 1GiB, 500MB")
	}
	*b = Bytes(n * unit)
	return nil
}

func (b Bytes) String() string {
	for _, u := range []int{2, 1, 0} { // GiB, MiB, KiB: the largest that divides
		if b > 0 && int(b)%byteUnits[u].n == 0 {
			return strconv.Itoa(int(b)/byteUnits[u].n) + byteUnits[u].suffix
		}
	}
	return strconv.Itoa(int(b))
}

// Bool is true or false (also 1/0, yes/no).
type Bool bool

// Decode implements envconfig.Decoder.
func (b *Bool) Decode(v string) error {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true", "1", "yes", "on":
		*b = true
	case "false", "0", "no", "off", "":
		*b = false
	default:
		return fmt.Errorf("expected true or false")
	}
	return nil
}

// Not is a Bool stored negated, for a variable that says yes where the Config field says no
// (BRP_LEVERING_ADMHNDPUBLICATIE_WAKEUP=true is publicatie.Config.FixedDelay false).
type Not bool

// Decode implements envconfig.Decoder.
func (n *Not) Decode(v string) error {
	var b Bool
	err := b.Decode(v)
	*n = Not(!b)
	return err
}

func (n Not) String() string { return strconv.FormatBool(!bool(n)) }

// Name is a non-empty name.
type Name string

// Decode implements envconfig.Decoder.
func (n *Name) Decode(v string) error {
	if v = strings.TrimSpace(v); v == "" {
		return fmt.Errorf("expected a non-empty name")
	}
	*n = Name(v)
	return nil
}

// BrokerAddrs is the broker's host:port, or a comma-separated list of them: the nodes of a
// master/slave pair or a network of brokers (broker.ParseAddrs).
type BrokerAddrs string

// Decode implements envconfig.Decoder.
func (b *BrokerAddrs) Decode(v string) error {
	nodes, err := broker.ParseAddrs(v)
	if err != nil {
		return fmt.Errorf("expected host:port or a comma-separated list of host:port: %v", err)
	}
	*b = BrokerAddrs(strings.Join(nodes, ","))
	return nil
}

// ListenAddr is a host:port to listen on (port 0 picks a free one), or "off".
type ListenAddr string

// Decode implements envconfig.Decoder.
func (l *ListenAddr) Decode(v string) error {
	v = strings.TrimSpace(v)
	if v == "off" {
		*l = ListenAddr(v)
		return nil
	}
	_, port, err := net.SplitHostPort(v)
	if n, perr := strconv.Atoi(port); err != nil || perr != nil || n < 0 || n > 65535 {
		return fmt.Errorf("expected host:port to listen on (port 0 for any) or off")
	}
	*l = ListenAddr(v)
	return nil
}

// Queue is a STOMP destination such as /queue/name.
type Queue string

// Decode implements envconfig.Decoder.
func (q *Queue) Decode(v string) error {
	v = strings.TrimSpace(v)
	if !strings.HasPrefix(v, "/") || len(v) < 2 || strings.ContainsAny(v, " \t\r\n:") {
		return fmt.Errorf("expected a STOMP destination such as /queue/name")
	}
	*q = Queue(v)
	return nil
}

// List is a comma-separated list of names; empty means none.
type List []string

// Decode implements envconfig.Decoder.
func (l *List) Decode(v string) error {
	out := List{}
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	*l = out
	return nil
}

func (l List) String() string { return strings.Join(l, ",") }

// LogFormat is json, text or auto (text on a terminal, else json).
type LogFormat string

// Layout is BRP_DATABASE_LAYOUT: contract or kern (handeling.Layout).
type Layout handeling.Layout

// Decode implements envconfig.Decoder.
func (l *Layout) Decode(v string) error {
	parsed, err := handeling.ParseLayout(strings.TrimSpace(v))
	if err != nil {
		return errors.New("expected contract or kern")
	}
	*l = Layout(parsed)
	return nil
}

// Decode implements envconfig.Decoder.
func (f *LogFormat) Decode(v string) error {
	switch v = strings.ToLower(strings.TrimSpace(v)); v {
	case "json", "text", "auto":
		*f = LogFormat(v)
		return nil
	}
	return fmt.Errorf("expected json, text or auto")
}

// LogLevel is debug, info, warn or error.
type LogLevel slog.Level

// Decode implements envconfig.Decoder.
func (l *LogLevel) Decode(v string) error {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(strings.TrimSpace(v))); err != nil {
		return fmt.Errorf("expected debug, info, warn or error")
	}
	*l = LogLevel(lv)
	return nil
}

// DatabaseURL is a PostgreSQL URL (postgres://...) or key=value connection string.
type DatabaseURL string

// Decode implements envconfig.Decoder.
func (d *DatabaseURL) Decode(v string) error {
	v = strings.TrimSpace(v)
	if strings.HasPrefix(v, "postgres://") || strings.HasPrefix(v, "postgresql://") {
		if _, err := pq.ParseURL(v); err != nil {
			return fmt.Errorf("expected a PostgreSQL URL such as postgres://user@host:5432/db?sslmode=verify-full")
		}
	} else if !strings.Contains(v, "=") {
		return fmt.Errorf("expected a PostgreSQL URL such as postgres://user@host:5432/db?sslmode=verify-full")
	}
	*d = DatabaseURL(v)
	return nil
}
