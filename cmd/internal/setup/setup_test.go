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
