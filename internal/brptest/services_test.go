package brptest

import "testing"

func TestFreePortStaysOutOfTheEphemeralRange(t *testing.T) {
	lo := ephemeralLow()
	if lo <= minPort+1000 {
		t.Skipf("ephemeral range starts at %d: freePort cannot stay below it here", lo)
	}
	seen := map[int]bool{}
	for range 50 {
		p := freePort(t)
		if p < minPort || p >= lo {
			t.Fatalf("port %d outside [%d, %d)", p, minPort, lo)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
	}
}
