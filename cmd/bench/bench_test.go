package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestQuick runs the whole bench in -quick mode against the services of scripts/services.sh
// (it fails, not skips, when they are missing) and checks that every section of results.json
// holds positive figures and that the per-person order held.
func TestQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the real processes for about a minute")
	}
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin+string(filepath.Separator), "./cmd/publicatie", "./cmd/mutatielevering")
	build.Dir = filepath.Join("..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the commands: %v\n%s", err, out)
	}
	out := t.TempDir()
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	o, err := parseFlags([]string{"-quick", "-out", out, "-logs", filepath.Join(out, "logs"), "-bin", bin,
		"-db", "brp_bench_test_" + hex.EncodeToString(suffix)}, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	start := time.Now()
	_, err = run(ctx, o, &stdout, &stderr)
	t.Logf("bench took %v; progress:\n%s", time.Since(start).Round(time.Second), stderr.String())
	if err != nil {
		t.Fatalf("bench: %v", err)
	}
	if !strings.Contains(stdout.String(), "| measure | value | target |") {
		t.Errorf("no markdown table on stdout:\n%s", stdout.String())
	}
	for _, f := range []string{"results.md", "results.json", "throughput.svg"} {
		if fi, err := os.Stat(filepath.Join(out, f)); err != nil || fi.Size() == 0 {
			t.Errorf("%s missing or empty: %v", f, err)
		}
	}
	svg, _ := os.ReadFile(filepath.Join(out, "throughput.svg"))
	if !bytes.HasPrefix(svg, []byte("<svg")) || !bytes.Contains(svg, []byte("</svg>")) {
		t.Errorf("throughput.svg is not an SVG document")
	}

	b, err := os.ReadFile(filepath.Join(out, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r Results
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("results.json: %v", err)
	}
	if len(r.Errors) > 0 {
		t.Errorf("errors: %q", r.Errors)
	}
	positive := func(what string, v float64) {
		t.Helper()
		if !(v > 0) {
			t.Errorf("%s = %v, want > 0", what, v)
		}
	}

	if len(r.Pipeline) != 2 {
		t.Fatalf("pipeline runs: %d, want 2 (consumers 1,2)", len(r.Pipeline))
	}
	for _, p := range r.Pipeline {
		positive(p.Label+" rate", p.Rate)
		positive(p.Label+" rounds (metrics)", float64(p.Rounds.Count))
		positive(p.Label+" round p50 (metrics)", p.Rounds.P50Ms)
		positive(p.Label+" round p50 (log)", p.Rounds.LogP50Ms)
		if !p.Complete || p.Geleverd != p.Expected {
			t.Errorf("%s: geleverd %d of %d", p.Label, p.Geleverd, p.Expected)
		}
		if p.Verzending.Violations != 0 || p.Verzending.Distinct != p.Expected {
			t.Errorf("%s: verzending %+v, want %d distinct and no violations", p.Label, p.Verzending, p.Expected)
		}
		if p.ExcludedTouched != 0 {
			t.Errorf("%s: %d excluded handelingen touched", p.Label, p.ExcludedTouched)
		}
		if len(p.Processes) != 1+p.Consumers {
			t.Errorf("%s: %d processes", p.Label, len(p.Processes))
		}
		for _, ps := range p.Processes {
			positive(p.Label+" "+ps.Name+" peak RSS", ps.PeakRSSMB)
			if !ps.ExitOK {
				t.Errorf("%s: %s did not exit 0 on SIGTERM", p.Label, ps.Name)
			}
		}
	}

	if len(r.Chain) < 1 {
		t.Fatal("no chain measurement")
	}
	for _, c := range r.Chain {
		positive("chain "+c.Label+" p50", c.P50Ms)
		positive("chain "+c.Label+" p99", c.P99Ms)
	}

	if r.Seed == nil {
		t.Fatal("no seed-mode measurement")
	}
	positive("seed mode rate", r.Seed.Rate)
	if r.Seed.Verzending.Violations != 0 {
		t.Errorf("seed mode: %d order violations", r.Seed.Verzending.Violations)
	}

	var single, batched bool
	for _, x := range r.Raw {
		positive(x.Mode+" rate", x.Rate)
		single = single || x.Batch == 1
		batched = batched || x.Batch > 1
	}
	if !single || !batched {
		t.Errorf("raw ceiling: want runs with 1 item and with batches, got %+v", r.Raw)
	}

	if len(r.Scale) != 2 {
		t.Fatalf("scale: %d history sizes, want 2 (10k, 100k)", len(r.Scale))
	}
	for _, s := range r.Scale {
		positive("scale rows", float64(s.Rows))
		positive("scale round p50 (log)", s.Rounds.LogP50Ms)
		positive("scale round p95 (log)", s.Rounds.LogP95Ms)
		if s.Rows < s.History || s.Violations != 0 {
			t.Errorf("scale %d: %d rows, %d violations", s.History, s.Rows, s.Violations)
		}
	}

	positive("ratio pipeline/raw batched", r.Ratios.PipelineVsRawBatch)
	positive("ratio pipeline/raw single", r.Ratios.PipelineVsRawSingle)
	positive("ratio pipeline/seed", r.Ratios.PipelineVsSeed)
	positive("ratio scale", r.Ratios.ScaleLargestVsFirst)
}

func TestPercentile(t *testing.T) {
	xs := []float64{5, 1, 3, 2, 4}
	if p := percentile(xs, 0.5); p != 3 {
		t.Errorf("p50 = %v", p)
	}
	if p := percentile(xs, 1); p != 5 {
		t.Errorf("p100 = %v", p)
	}
	if p := percentile(xs, 0.95); abs64(p-4.8) > 1e-9 {
		t.Errorf("p95 = %v", p)
	}
}

func TestFlags(t *testing.T) {
	o, err := parseFlags([]string{"-quick", "-history", "10k,1M", "-consumers", "4,1,4"}, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	if o.n != 2000 || len(o.history) != 2 || o.history[1] != 1_000_000 || len(o.consumers) != 2 || o.consumers[0] != 1 {
		t.Errorf("options: %+v", o)
	}
	if _, err := parseFlags([]string{"-only", "nope"}, os.Stderr); err == nil {
		t.Error("-only nope accepted")
	}
	if _, err := parseFlags([]string{"-env", "DELAY=1"}, os.Stderr); err == nil {
		t.Error("-env without BRP_ accepted")
	}
}

func abs64(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
