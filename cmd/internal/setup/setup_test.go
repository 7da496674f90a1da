package setup

import (
	"testing"
	"time"
)

func TestDurationsAcceptSeedAndGoForms(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]time.Duration{"5000": 5 * time.Second, "250ms": 250 * time.Millisecond, " 1s ": time.Second} {
		var m Millis
		if err := m.Decode(v); err != nil || time.Duration(m) != want {
			t.Errorf("Millis(%q) = %v, %v; want %v", v, time.Duration(m), err, want)
		}
	}
	for _, v := range []string{"0", "-1", "abc", "", "-5ms"} {
		var m Millis
		if err := m.Decode(v); err == nil {
			t.Errorf("Millis(%q) accepted", v)
		}
	}
	var s Seconds
	if err := s.Decode("30"); err != nil || time.Duration(s) != 30*time.Second {
		t.Errorf("Seconds(30) = %v, %v", time.Duration(s), err)
	}
}

func TestListEmptyMeansNone(t *testing.T) {
	t.Parallel()
	var l List
	if err := l.Decode(" A, B ,,"); err != nil || len(l) != 2 || l[0] != "A" || l[1] != "B" {
		t.Fatalf("List = %q, %v", l, err)
	}
	if err := l.Decode(""); err != nil || l == nil || len(l) != 0 {
		t.Fatalf("empty List = %#v, %v; want empty non-nil", l, err)
	}
}

func TestBytesAcceptUnits(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]int{"33554432": 32 << 20, "32MiB": 32 << 20, " 64 KiB ": 64 << 10, "1GiB": 1 << 30,
		"500MB": 500e6, "2kB": 2000, "10B": 10} {
		var b Bytes
		if err := b.Decode(v); err != nil || int(b) != want {
			t.Errorf("Bytes(%q) = %d, %v; want %d", v, int(b), err, want)
		}
	}
	for _, v := range []string{"0", "-1", "", "MiB", "1.5MiB", "32 MiBs", "9223372036854775807GiB", "4611686018427387905"} {
		var b Bytes
		if err := b.Decode(v); err == nil {
			t.Errorf("Bytes(%q) accepted: %d", v, int(b))
		}
	}
}

func TestShareAcceptsFractionsAndPercentages(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]float64{"0.99": 0.99, "99%": 0.99, " 1 ": 1, "100 %": 1, "0.5": 0.5, "12.5%": 0.125} {
		var s Share
		if err := s.Decode(v); err != nil || float64(s) != want {
			t.Errorf("Share(%q) = %v, %v; want %v", v, float64(s), err, want)
		}
	}
	for _, v := range []string{"0", "0%", "-0.5", "1.01", "101%", "", "%", "half", "NaN", "Inf"} {
		var s Share
		if err := s.Decode(v); err == nil {
			t.Errorf("Share(%q) accepted: %v", v, float64(s))
		}
	}
}
