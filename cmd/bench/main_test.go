package main

import (
	"encoding/xml"
	"os"
	"strings"
	"testing"
)

// TestCommittedResults renders the committed raw output again: docs/bench/results.md must be
// what this renderer makes of docs/bench/bench.txt, and the chart an SVG document with the
// series and labels in it.
func TestCommittedResults(t *testing.T) {
	f, err := os.Open("../../docs/bench/bench.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := read(f, "bench.txt")
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("../../docs/bench/results.md")
	if err != nil {
		t.Fatal(err)
	}
	if got := markdown(r); got != string(want) {
		t.Errorf("docs/bench/results.md is not what bench.txt renders to (scripts/bench.sh --render writes it again); rendered:\n%s", got)
	}
	svg, err := chart(r)
	if err != nil {
		t.Fatal(err)
	}
	if err := xml.Unmarshal([]byte(svg), new(struct {
		XMLName xml.Name `xml:"svg"`
	})); err != nil {
		t.Errorf("throughput.svg is no SVG document: %v", err)
	}
	// The series, their values, the axes and the title, as text a reader sees.
	for _, want := range []string{">pipeline<", ">raw loop, batches of 20<", ">raw loop, 1 item per transaction<",
		">seed mode (a round every 5 s)<", ">Throughput: 1 publicatie + K mutatielevering (default settings)<",
		">20000 handelingen over 5000 persons · 2 CPUs · 2026-11-23<", ">handelingen (items) per second<",
		">mutatielevering processes (2 workers each; the raw loop at as many goroutines)<", ">4714<", ">5001<", ">8<"} {
		if !strings.Contains(svg, want) {
			t.Errorf("throughput.svg shows no %s", want)
		}
	}
	if _, err := read(strings.NewReader("goos: linux\nBenchmarkOther-2 1 5 ns/op\n"), "other"); err == nil {
		t.Error("output without BenchmarkPipeline results was accepted")
	}
}
