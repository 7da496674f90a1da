// Command bench renders what scenarios.BenchmarkPipeline measured (go test's benchmark
// output, read with golang.org/x/perf/benchfmt) as results.md, the tables that
// docs/performance.md quotes, and throughput.svg, the chart of throughput against consumer
// processes. scripts/bench.sh runs the benchmark and then this:
//
//	go run ./cmd/bench [-out docs/bench] [bench.txt]
//
// It measures nothing: what each figure is, and how it was measured, is said in
// scenarios/pipeline_bench_test.go.
package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/perf/benchfmt"

	"github.com/brp/levering/levering"
)

func main() {
	out := flag.String("out", "docs/bench", "directory for results.md and throughput.svg")
	flag.Parse()
	in, name := io.Reader(os.Stdin), "stdin"
	if flag.NArg() > 0 {
		f, err := os.Open(flag.Arg(0))
		if err != nil {
			fail(err)
		}
		defer f.Close()
		in, name = f, flag.Arg(0)
	}
	r, err := read(in, name)
	if err != nil {
		fail(err)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fail(err)
	}
	svg, err := chart(r)
	if err != nil {
		fail(err)
	}
	for file, text := range map[string]string{"results.md": markdown(r), "throughput.svg": svg} {
		if err := os.WriteFile(filepath.Join(*out, file), []byte(text), 0o644); err != nil {
			fail(err)
		}
	}
}

func fail(err error) {
	slog.Error("bench: cannot render", "error", err)
	os.Exit(1)
}

// results are one run of BenchmarkPipeline: its configuration lines and its measurements in
// the order they ran.
type results struct {
	cfg  map[string]string
	runs []run
}

// run is one measurement: its name below BenchmarkPipeline ("pipeline/consumers=4") and its
// figures by unit.
type run struct {
	name string
	m    map[string]float64
}

func read(in io.Reader, name string) (*results, error) {
	r := &results{cfg: map[string]string{}}
	br := benchfmt.NewReader(in, name)
	for br.Scan() {
		x, ok := br.Result().(*benchfmt.Result)
		if !ok {
			continue
		}
		base, parts := x.Name.Parts()
		if string(base) != "Pipeline" {
			continue
		}
		var sub []string
		for _, p := range parts {
			if s := string(p); strings.HasPrefix(s, "/") { // not the -GOMAXPROCS suffix
				sub = append(sub, s[1:])
			}
		}
		m := map[string]float64{}
		for _, v := range x.Values {
			m[v.Unit] = v.Value
		}
		r.runs = append(r.runs, run{strings.Join(sub, "/"), m})
		for _, c := range x.Config {
			r.cfg[c.Key] = string(c.Value)
		}
	}
	if err := br.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if len(r.runs) == 0 {
		return nil, fmt.Errorf("read %s: no BenchmarkPipeline results", name)
	}
	return r, nil
}

// get is the figures of the measurement called name (nil if there is none).
func (r *results) get(name string) map[string]float64 {
	for _, x := range r.runs {
		if x.name == name {
			return x.m
		}
	}
	return nil
}

// under is the measurements whose names begin with prefix, with the rest of the name.
func (r *results) under(prefix string) []run {
	var out []run
	for _, x := range r.runs {
		if rest, ok := strings.CutPrefix(x.name, prefix); ok {
			out = append(out, run{rest, x.m})
		}
	}
	return out
}

// where is the measurements for which keep is true.
func (r *results) where(keep func(run) bool) []run {
	var out []run
	for _, x := range r.runs {
		if keep(x) {
			out = append(out, x)
		}
	}
	return out
}

// pairs is the pair=I measurements: pipeline, raw and raw_ack each (missing ones nil).
func (r *results) pairs() [][3]map[string]float64 {
	var out [][3]map[string]float64
	for i := 1; r.get(fmt.Sprintf("pair=%d/pipeline", i)) != nil; i++ {
		p := fmt.Sprintf("pair=%d/", i)
		out = append(out, [3]map[string]float64{r.get(p + "pipeline"), r.get(p + "raw"), r.get(p + "raw_ack")})
	}
	return out
}

// median of one figure over the pairs' side i (0 pipeline, 1 raw, 2 raw_ack).
func median(ps [][3]map[string]float64, i int, unit string) float64 {
	var xs []float64
	for _, p := range ps {
		if p[i] != nil && p[i][unit] > 0 {
			xs = append(xs, p[i][unit])
		}
	}
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	return (xs[(len(xs)-1)/2] + xs[len(xs)/2]) / 2
}

// span is "lo-hi" of one figure over the pairs' side i.
func span(ps [][3]map[string]float64, i int, unit, format string) string {
	var xs []float64
	for _, p := range ps {
		if p[i] != nil {
			xs = append(xs, p[i][unit])
		}
	}
	if len(xs) == 0 {
		return ""
	}
	return fmt.Sprintf(format+"-"+format, slices.Min(xs), slices.Max(xs))
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "**not met**"
}

// col is one column of a table: a header, the figure's unit and its format (a measurement
// without that figure leaves its cell empty).
type col struct{ head, unit, format string }

// table writes the measurements rs as a markdown table, the first column their names.
func table(w io.Writer, first string, rs []run, cols ...col) {
	fmt.Fprintf(w, "| %s |", first)
	for _, c := range cols {
		fmt.Fprintf(w, " %s |", c.head)
	}
	fmt.Fprintf(w, "\n|---|%s\n", strings.Repeat("---:|", len(cols)))
	for _, x := range rs {
		fmt.Fprintf(w, "| %s |", strings.ReplaceAll(x.name, "/", ", "))
		for _, c := range cols {
			if v, ok := x.m[c.unit]; ok {
				fmt.Fprintf(w, " "+c.format+" |", v)
			} else {
				fmt.Fprint(w, " |")
			}
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
}

// history is the delivered history of a scale measurement's name ("history=10000000").
func history(name string) string {
	_, v, _ := strings.Cut(name, "=")
	n, _ := strconv.ParseInt(v, 10, 64)
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1_000 && n%1_000 == 0:
		return fmt.Sprintf("%dk", n/1_000)
	}
	return v
}

func markdown(r *results) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	c := r.cfg
	w("# Benchmark results\n\nWritten by `scripts/bench.sh` on %s, code %s; %s CPUs (%s), Linux %s; %s; %s.\n",
		c["date"], c["code"], c["cpus"], c["cpu"], c["kernel"], c["postgres"], c["broker"])
	w("Publisher and consumers with their **default settings** (DELAY 5000 ms, LIMIT 5000, MAXINLEVERING 1000, %d workers per consumer process, batches of up to %d)",
		levering.DefaultWorkers, levering.DefaultBatch)
	if c["extra-env"] != "" {
		w(", except `%s`", c["extra-env"])
	}
	w(". Workload: %s, 30%% multi-person, 5%% excluded. What each measurement does: `BenchmarkPipeline` in ", c["workload"])
	w("scenarios/pipeline_bench_test.go; raw output (go test's benchmark format, for benchstat): bench.txt.\n\n")
	if c["quick"] == "true" {
		w("**Quick (smoke) run: small sizes, not for comparison.**\n\n")
	}

	at, _ := strconv.Atoi(c["pair-consumers"])
	g := at * levering.DefaultWorkers
	ps := r.pairs()
	pipe, raw, rawAck := median(ps, 0, "hps"), median(ps, 1, "hps"), median(ps, 2, "hps")
	w("## Headline\n\n| measure | value | target |\n|---|---:|---|\n")
	if len(ps) > 0 {
		var ratios []string
		for _, p := range ps {
			ratios = append(ratios, fmt.Sprintf("%.2f", p[0]["hps"]/p[1]["hps"]))
		}
		w("| throughput, 1 publicatie + %d mutatielevering, median of %d pairs | %.0f handelingen/s | |\n", at, len(ps), pipe)
		w("| raw ceiling, batches of %s, %d goroutines (the same concurrency), median of the pairs | %.0f /s | |\n", c["raw-batch"], g, raw)
		w("| the same, one ack per batch (as the consumer acks), median of the pairs | %.0f /s | |\n", rawAck)
		w("| pipeline / raw batched, as the issue defines the raw loop (pairs: %s) | **%.2f** | ≥ 0.7: %s |\n",
			strings.Join(ratios, ", "), pipe/raw, verdict(pipe/raw >= 0.7))
		w("| pipeline / raw batched acking once per batch | %.2f | stricter than the issue |\n", pipe/rawAck)
		w("| CPU ms per handeling or item (all measured parts), pipeline / raw batched / raw acking once per batch | %s / %s / %s | |\n",
			span(ps, 0, "cpu_ms", "%.2f"), span(ps, 1, "cpu_ms", "%.2f"), span(ps, 2, "cpu_ms", "%.2f"))
	}
	if x := r.get(fmt.Sprintf("raw/batch=1/goroutines=%d", g)); x != nil && pipe > 0 {
		w("| pipeline / raw 1 item per transaction (%.0f /s) | %.2f | |\n", x["hps"], pipe/x["hps"])
	}
	if x := r.get("seed"); x != nil && pipe > 0 {
		w("| pipeline / seed mode (%.0f handelingen/s) | %.1f | ≥ 10: %s |\n", x["hps"], pipe/x["hps"], verdict(pipe/x["hps"] >= 10))
	}
	if cs := r.under("chain/"); len(cs) > 0 {
		var p50 []string
		ok := true
		for _, x := range cs {
			p50 = append(p50, fmt.Sprintf("%.1f", x.m["link_p50_ms"]))
			ok = ok && x.m["link_p50_ms"] <= 20
		}
		w("| chain of one person, per-link p50 (%s) | %s ms | ≤ 20 ms: %s |\n", strings.Join(names(cs), " / "), strings.Join(p50, " / "), verdict(ok))
	}
	if ss := r.under("scale/"); len(ss) >= 2 {
		first, last := ss[0], ss[len(ss)-1]
		full, inPipe := last.m["full_round_p50_ms"]/first.m["full_round_p50_ms"], last.m["round_p50_ms"]/first.m["round_p50_ms"]
		w("| publisher round time p50, %s / %s history: full rounds; in the pipeline | %.2f; %.2f | ≤ 2: %s |\n",
			history(last.name), history(first.name), full, inPipe, verdict(full <= 2 && inPipe <= 2))
	}
	viol := 0.0
	for _, x := range r.runs {
		viol += x.m["order_violations"]
	}
	w("| per-person order violations, all runs | %.0f | 0: %s |\n\n", viol, verdict(viol == 0))
	var other, avail, worst float64
	where, cpus := "", number(c["cpus"])
	for _, x := range r.runs {
		if a := x.m["wall_s"] * cpus; a > 0 {
			o := max(0, x.m["cpu_machine_s"]-cpuParts(x.m))
			x.m["cpu_other_s"] = o // for the CPU table
			other, avail = other+o, avail+a
			if o/a > worst {
				worst, where = o/a, x.name
			}
		}
	}
	if avail > 0 {
		w("Other processes on the machine used %.0f%% of its CPU on average during the measurements (most: %.0f%% during %s).\n\n",
			100*other/avail, 100*worst, where)
	}

	w("## Throughput\n\nFrom starting the processes to the last tslev; *steady* from the first tslev to the last. ")
	w("Round times from the publisher's debug log, rounds that published something.\n\n")
	table(&b, "mutatielevering", r.under("pipeline/consumers="), col{"handelingen/s", "hps", "**%.0f**"}, col{"steady /s", "steady_hps", "%.0f"},
		col{"first after s", "first_s", "%.2f"}, col{"round p50 ms", "round_p50_ms", "%.1f"}, col{"round p95 ms", "round_p95_ms", "%.1f"},
		col{"rounds", "rounds", "%.0f"}, col{"published per round", "published_per_round", "%.0f"}, col{"max in levering", "max_in_levering", "%.0f"},
		col{"duplicates", "duplicates", "%.0f"}, col{"order violations", "order_violations", "%.0f"},
		col{"peak RSS MB publicatie", "publicatie_peak_MB", "%.0f"}, col{"mutatielevering (max)", "mutatielevering_peak_MB", "%.0f"},
		col{"warnings", "warnings", "%.0f"}, col{"CPU ms per handeling", "cpu_ms", "%.3f"})

	w("## Pairs: the headline ratio, measured in turn\n\n*CPU ms*: the CPU time of the measured parts (the commands, broker, PostgreSQL, ")
	w("bench) per handeling or item; raw / pipeline CPU is what the throughput ratio would be if both kept the machine equally busy.\n\n")
	w("| pair | pipeline /s | raw batched /s | ratio | raw, one ack per batch /s | ratio | CPU ms pipeline / raw / raw one ack per batch | raw CPU / pipeline CPU |\n")
	w("|---:|---:|---:|---:|---:|---:|---|---:|\n")
	for i, p := range ps {
		if p[1] == nil || p[2] == nil {
			continue
		}
		w("| %d | %.0f | %.0f | %.2f | %.0f | %.2f | %.3f / %.3f / %.3f | %.2f |\n", i+1, p[0]["hps"], p[1]["hps"], p[0]["hps"]/p[1]["hps"],
			p[2]["hps"], p[0]["hps"]/p[2]["hps"], p[0]["cpu_ms"], p[1]["cpu_ms"], p[2]["cpu_ms"], p[1]["cpu_ms"]/p[0]["cpu_ms"])
	}

	w("\n## Chain latency\n\n")
	table(&b, "run", r.under("chain/"), col{"p50 ms", "link_p50_ms", "**%.1f**"}, col{"p95 ms", "link_p95_ms", "%.1f"},
		col{"p99 ms", "link_p99_ms", "%.1f"}, col{"max ms", "link_max_ms", "%.1f"}, col{"first link ms", "first_link_ms", "%.1f"},
		col{"whole chain ms", "chain_ms", "%.0f"})

	w("## References on the same services\n\nThe raw loop, and seed mode (geleverd in its window / window).\n\n")
	table(&b, "reference", r.where(func(x run) bool { return strings.HasPrefix(x.name, "raw/") || x.name == "seed" }), col{"items/s", "hps", "**%.0f**"}, col{"CPU ms per item", "cpu_ms", "%.3f"})

	w("## Scale: round time as the delivered history grows\n\n")
	table(&b, "history", r.under("scale/"), col{"admhnd rows", "rows", "%.0f"}, col{"fill s", "fill_s", "%.1f"},
		col{"in the pipeline: rounds", "rounds", "%.0f"}, col{"p50 ms", "round_p50_ms", "**%.1f**"}, col{"p95 ms", "round_p95_ms", "%.1f"},
		col{"backlog /s", "hps", "%.0f"}, col{"warnings", "warnings", "%.0f"}, col{"full rounds: published per round", "full_published_per_round", "%.0f"},
		col{"p50 ms", "full_round_p50_ms", "**%.1f**"}, col{"p95 ms", "full_round_p95_ms", "%.1f"}, col{"order violations", "order_violations", "%.0f"})

	w("## Where the CPU goes\n\nCPU seconds during each measurement (from `/proc`); *postgres* is every backend of the server, ")
	w("*bench* the benchmark's own process (the raw loop runs there), *other* the machine's busy time not accounted to these parts ")
	w("(other processes on the machine), *machine* all CPUs, everything.\n\n")
	table(&b, "run", r.where(func(x run) bool { return x.m["wall_s"] > 0 }), col{"wall s", "wall_s", "%.1f"}, col{"publicatie", "cpu_publicatie_s", "%.1f"},
		col{"mutatielevering (all)", "cpu_mutatielevering_s", "%.1f"}, col{"broker JVM", "cpu_broker_s", "%.1f"},
		col{"postgres", "cpu_postgres_s", "%.1f"}, col{"bench", "cpu_bench_s", "%.1f"}, col{"other", "cpu_other_s", "%.1f"},
		col{"machine busy", "cpu_machine_s", "%.1f"})
	return b.String()
}

// number is the configuration value v as a number (0 if it is none).
func number(v string) float64 {
	x, _ := strconv.ParseFloat(v, 64)
	return x
}

func names(rs []run) []string {
	var out []string
	for _, x := range rs {
		out = append(out, x.name)
	}
	return out
}

// cpuParts is the CPU seconds of the measured parts of a measurement.
func cpuParts(m map[string]float64) float64 {
	return m["cpu_publicatie_s"] + m["cpu_mutatielevering_s"] + m["cpu_broker_s"] + m["cpu_postgres_s"] + m["cpu_bench_s"]
}
