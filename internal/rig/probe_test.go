package rig

import (
	"bytes"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

// A sample of the text format: HELP and TYPE lines, labels, escaped label values, a histogram
// with and without labels, a summary, an untyped sample, a timestamp, special floats.
const sample = `# HELP brp_levering_delivered_total Handelingen delivered.
# TYPE brp_levering_delivered_total counter
brp_levering_delivered_total 1027
# HELP brp_levering_reconnects_total Reconnects by dependency.
# TYPE brp_levering_reconnects_total counter
brp_levering_reconnects_total{dependency="broker"} 3
brp_levering_reconnects_total{dependency="database"} 0
# HELP brp_levering_broker_node Broker node in use, with an awkward name.
# TYPE brp_levering_broker_node gauge
brp_levering_broker_node{node="a \"quoted\" \\ node\nline two",role="primary"} 1
brp_levering_broker_node{node="b",role="standby"} 0
# TYPE brp_levering_starting gauge
brp_levering_starting 0
# HELP brp_levering_processing_duration_seconds A batch's processing time.
# TYPE brp_levering_processing_duration_seconds histogram
brp_levering_processing_duration_seconds_bucket{le="1e-05"} 0
brp_levering_processing_duration_seconds_bucket{le="0.005"} 7
brp_levering_processing_duration_seconds_bucket{le="0.25"} 9
brp_levering_processing_duration_seconds_bucket{le="+Inf"} 10
brp_levering_processing_duration_seconds_sum 1.5
brp_levering_processing_duration_seconds_count 10
# TYPE brp_levering_round_seconds histogram
brp_levering_round_seconds_bucket{role="leader",le="0.1"} 4
brp_levering_round_seconds_bucket{role="leader",le="+Inf"} 5
brp_levering_round_seconds_sum{role="leader"} 0.75
brp_levering_round_seconds_count{role="leader"} 5
# TYPE rpc_seconds summary
rpc_seconds{service="x",quantile="0.5"} 0.02
rpc_seconds{service="x",quantile="0.99"} NaN
rpc_seconds_sum{service="x"} 8.5
rpc_seconds_count{service="x"} 400
untyped_thing{path="/a b"} -Inf 1700000000000
go_gc_duration_seconds_total 1.25e-05
`

func TestParseMetricsText(t *testing.T) {
	got, err := parseMetrics(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	want := Metrics{
		"brp_levering_delivered_total":                                                   1027,
		`brp_levering_reconnects_total{dependency="broker"}`:                             3,
		`brp_levering_reconnects_total{dependency="database"}`:                           0,
		`brp_levering_broker_node{node="a \"quoted\" \\ node\nline two",role="primary"}`: 1,
		`brp_levering_broker_node{node="b",role="standby"}`:                              0,
		"brp_levering_starting":                                                          0,
		`brp_levering_processing_duration_seconds_bucket{le="1e-05"}`:                    0,
		`brp_levering_processing_duration_seconds_bucket{le="0.005"}`:                    7,
		`brp_levering_processing_duration_seconds_bucket{le="0.25"}`:                     9,
		`brp_levering_processing_duration_seconds_bucket{le="+Inf"}`:                     10,
		"brp_levering_processing_duration_seconds_sum":                                   1.5,
		"brp_levering_processing_duration_seconds_count":                                 10,
		`brp_levering_round_seconds_bucket{role="leader",le="0.1"}`:                      4,
		`brp_levering_round_seconds_bucket{role="leader",le="+Inf"}`:                     5,
		`brp_levering_round_seconds_sum{role="leader"}`:                                  0.75,
		`brp_levering_round_seconds_count{role="leader"}`:                                5,
		`rpc_seconds{service="x",quantile="0.5"}`:                                        0.02,
		`rpc_seconds{service="x",quantile="0.99"}`:                                       math.NaN(),
		`rpc_seconds_sum{service="x"}`:                                                   8.5,
		`rpc_seconds_count{service="x"}`:                                                 400,
		`untyped_thing{path="/a b"}`:                                                     math.Inf(-1), // not the timestamp
		"go_gc_duration_seconds_total":                                                   1.25e-05,
	}
	same := func(a, b float64) bool { return a == b || math.IsNaN(a) && math.IsNaN(b) }
	if !maps.EqualFunc(got, want, same) {
		for _, k := range slices.Sorted(maps.Keys(want)) {
			if v, ok := got[k]; !ok || !same(v, want[k]) {
				t.Errorf("%s = %v (present %v), want %v", k, v, ok, want[k])
			}
		}
		for _, k := range slices.Sorted(maps.Keys(got)) {
			if _, ok := want[k]; !ok {
				t.Errorf("unexpected sample %s = %v", k, got[k])
			}
		}
	}
}

func TestParseMetricsRejectsBrokenText(t *testing.T) {
	for _, s := range []string{
		"brp_levering_delivered_total one\n",
		"# TYPE x histogram\nx_bucket{le=\"a\"} 1\n",
		"x{a=\"unterminated} 1\n",
	} {
		if m, err := parseMetrics(strings.NewReader(s)); err == nil {
			t.Errorf("parseMetrics(%q) = %v, want an error", s, m)
		}
	}
}

// What client_golang writes (as the commands' /metrics does) reads back under the keys the
// tests use: the labels as written, le last, label values escaped.
func TestParseMetricsWhatClientGolangWrites(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "brp_levering_reconnects_total", Help: "h"}, []string{"dependency"})
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "brp_levering_broker_node", Help: "h"}, []string{"role", "node"})
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "brp_levering_processing_duration_seconds", Help: "h", Buckets: []float64{0.001, 0.25},
	}, []string{"worker"})
	reg.MustRegister(c, g, h)
	c.WithLabelValues("broker").Add(2)
	g.WithLabelValues("primary", `tcp://a:61613 "x" \ y`+"\n").Set(1)
	h.WithLabelValues("1").Observe(0.1)
	h.WithLabelValues("1").Observe(0.0005)

	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	for _, mf := range families {
		if _, err := expfmt.MetricFamilyToText(&buf, mf); err != nil {
			t.Fatal(err)
		}
	}
	text := buf.String()
	got, err := parseMetrics(&buf)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]float64{
		`brp_levering_reconnects_total{dependency="broker"}`:                         2,
		`brp_levering_broker_node{node="tcp://a:61613 \"x\" \\ y\n",role="primary"}`: 1,
		`brp_levering_processing_duration_seconds_bucket{worker="1",le="0.001"}`:     1,
		`brp_levering_processing_duration_seconds_bucket{worker="1",le="0.25"}`:      2,
		`brp_levering_processing_duration_seconds_bucket{worker="1",le="+Inf"}`:      2,
		`brp_levering_processing_duration_seconds_sum{worker="1"}`:                   0.1005,
		`brp_levering_processing_duration_seconds_count{worker="1"}`:                 2,
	} {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v; all: %v", k, g, ok, v, got)
		}
	}
	// Every sample line written is a key read back, its name and labels exactly as written.
	n := 0
	for _, line := range strings.Split(text, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		n++
		i := strings.LastIndexByte(line, ' ')
		want, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if g, ok := got[line[:i]]; !ok || g != want {
			t.Errorf("written %q, read %v (present %v)", line, g, ok)
		}
	}
	if n != len(got) {
		t.Errorf("%d samples written, %d read:\n%s", n, len(got), text)
	}
}
