package rig

import (
	"math"
	"testing"
)

func TestQuantile(t *testing.T) {
	bs := []Bucket{{0.001, 0}, {0.002, 10}, {0.004, 30}, {0.008, 40}, {math.Inf(1), 40}}
	for _, c := range []struct{ q, want float64 }{{0.25, 0.002}, {0.5, 0.003}, {0.75, 0.004}, {1, 0.008}} {
		if got := Quantile(c.q, bs); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("q%.2f = %v, want %v", c.q, got, c.want)
		}
	}
	m := ParseMetrics("# HELP x\nx_bucket{le=\"0.001\"} 1\nx_bucket{le=\"+Inf\"} 2\nx_sum 0.5\nx_count 2\n")
	if bs, sum, count, ok := m.Histogram("x"); !ok || len(bs) != 2 || sum != 0.5 || count != 2 {
		t.Errorf("histogram: %v %v %v %v", bs, sum, count, ok)
	}
}
