package handeling_test

import (
	"testing"
	"time"

	"github.com/brp/levering/handeling"
)

// TestPlaceCompare: the order the publisher publishes in and the consumer checks, a tsreg
// outside the accepted range at its end of it.
func TestPlaceCompare(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(id int64) handeling.Place {
		return handeling.Place{Tsreg: t0.Add(time.Duration(id) * time.Second), ID: id}
	}
	tests := []struct {
		a, b handeling.Place
		want int
	}{
		{at(1), at(1), 0},
		{at(1), at(2), -1},
		{at(2), at(1), 1},
		{handeling.Place{Tsreg: t0, ID: 2}, handeling.Place{Tsreg: t0, ID: 1}, 1}, // the same tsreg: by id
		{handeling.Place{End: -1, ID: 9}, handeling.Place{Tsreg: time.Time{}, ID: 1}, -1},
		{handeling.Place{End: -1, ID: 9}, handeling.Place{End: -1, ID: 1}, 1}, // the same end: by id
		{handeling.Place{End: 1, ID: 1}, at(1 << 20), 1},
		{handeling.Place{End: 1, ID: 1}, handeling.Place{End: -1, ID: 2}, 1},
	}
	for _, tt := range tests {
		if got := tt.a.Compare(tt.b); got != tt.want || tt.a.Before(tt.b) != (tt.want < 0) {
			t.Errorf("%+v.Compare(%+v) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
		if got := tt.b.Compare(tt.a); got != -tt.want {
			t.Errorf("%+v.Compare(%+v) = %d, want %d", tt.b, tt.a, got, -tt.want)
		}
	}
}
