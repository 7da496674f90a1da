package main

import (
	"os"
	"strings"
	"testing"
)

// TestCommittedResults renders the committed raw output again: docs/bench/results.md must be
// what this renderer makes of docs/bench/bench.txt, and the chart an SVG document with the
// pipeline in it.
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
	if svg := chart(r); !strings.HasPrefix(svg, "<svg") || !strings.HasSuffix(svg, "</svg>\n") || !strings.Contains(svg, ">pipeline<") {
		t.Errorf("throughput.svg:\n%s", svg)
	}
	if _, err := read(strings.NewReader("goos: linux\nBenchmarkOther-2 1 5 ns/op\n"), "other"); err == nil {
		t.Error("output without BenchmarkPipeline results was accepted")
	}
}
