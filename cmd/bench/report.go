package main

import (
	"encoding/json"
	"fmt"
	"github.com/brp/levering/levering"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
)

// write puts the markdown table on stdout and results.md, results.json and throughput.svg in
// dir.
func write(r *Results, dir string, stdout io.Writer) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	md := markdown(r)
	fmt.Fprint(stdout, md)
	if err := os.WriteFile(filepath.Join(dir, "results.md"), []byte(md), 0o644); err != nil {
		return err
	}
	js, err := json.MarshalIndent(sanitize(r), "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), append(js, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "throughput.svg"), []byte(chart(r)), 0o644)
}

// render writes the outputs again from an earlier results.json.
func render(from, dir string, stdout io.Writer) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	var r Results
	if err := json.Unmarshal(b, &r); err != nil {
		return fmt.Errorf("%s: %w", from, err)
	}
	return write(&r, dir, stdout)
}

// sanitize replaces NaN and infinities (which JSON cannot carry) by 0, through a round trip of
// the fields that can hold them.
func sanitize(r *Results) *Results {
	fix := func(x *float64) {
		if math.IsNaN(*x) || math.IsInf(*x, 0) {
			*x = 0
		}
	}
	fixRounds := func(rs *RoundStats) {
		for _, x := range []*float64{&rs.MeanMs, &rs.P50Ms, &rs.P95Ms, &rs.LogP50Ms, &rs.LogP95Ms, &rs.LogMaxMs, &rs.FullP50Ms, &rs.PublishedAvg} {
			fix(x)
		}
	}
	for i := range r.Pipeline {
		fixRounds(&r.Pipeline[i].Rounds)
	}
	if r.Seed != nil {
		fixRounds(&r.Seed.Rounds)
	}
	for i := range r.Scale {
		fixRounds(&r.Scale[i].Rounds)
	}
	for i := range r.Chain {
		c := &r.Chain[i]
		for _, x := range []*float64{&c.P50Ms, &c.P95Ms, &c.P99Ms, &c.MaxMs, &c.MeanMs} {
			fix(x)
		}
	}
	return r
}

func f0(x float64) string {
	if math.IsNaN(x) {
		return "–"
	}
	return fmt.Sprintf("%.0f", x)
}

func f1(x float64) string {
	if math.IsNaN(x) {
		return "–"
	}
	return fmt.Sprintf("%.1f", x)
}

func f2(x float64) string {
	if math.IsNaN(x) || x == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", x)
}

func human(n int64) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1_000 && n%1_000 == 0:
		return fmt.Sprintf("%dk", n/1_000)
	}
	return fmt.Sprint(n)
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "**not met**"
}

// headline returns the pipeline run the ratios use (4 consumers, or the nearest).
func headline(r *Results) *Pipeline {
	for i := range r.Pipeline {
		if r.Pipeline[i].Consumers == r.Ratios.At && r.Pipeline[i].Error == "" {
			return &r.Pipeline[i]
		}
	}
	return nil
}

func rawAt(r *Results, batch bool, goroutines int) *Raw {
	for i := range r.Raw {
		x := &r.Raw[i]
		if (x.Batch > 1) == batch && x.Goroutines == goroutines && x.Error == "" && !x.AckPerBatch {
			return x
		}
	}
	return nil
}

// rawAckPerBatch is the batched raw run that acks once per batch at goroutines.
func rawAckPerBatch(r *Results, goroutines int) *Raw {
	for i := range r.Raw {
		if x := &r.Raw[i]; x.AckPerBatch && x.Goroutines == goroutines && x.Error == "" {
			return x
		}
	}
	return nil
}

func markdown(r *Results) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	s := r.Settings
	w("# Benchmark results\n\n")
	w("Run of %s (%.0f s) on %d CPUs, Linux %s; %s; %s; code %s.\n", r.StartedAt, r.DurationSeconds, r.Machine.CPUs,
		r.Machine.Kernel, r.Machine.Postgres, r.Machine.Broker, r.Machine.Code)
	w("Publisher and consumers with their **default settings** (DELAY 5000 ms, LIMIT 5000, MAXINLEVERING 1000, %d workers per consumer process, batches of up to %d)", levering.DefaultWorkers, levering.DefaultBatch)
	if len(s.ExtraEnv) > 0 {
		w(", except `%s`", strings.Join(s.ExtraEnv, "`, `"))
	}
	w(". Workload: %d handelingen over %d persons, 30%% multi-person, 5%% excluded (GBA_INITIELE_VULLING).", s.N, s.Personen)
	if s.Quick {
		w(" **Quick (smoke) run: small sizes, not for comparison.**")
	}
	w("\n\n")

	// Headline.
	w("## Headline\n\n| measure | value | target |\n|---|---:|---|\n")
	if r.Ratios.PairsPipeline > 0 {
		n := 0
		for _, p := range r.Pairs {
			if p.Error == "" {
				n++
			}
		}
		w("| throughput, 1 publicatie + %d mutatielevering, median of %d runs taken in turn with the raw ceiling (*Pairs*) | %s handelingen/s | |\n", r.Ratios.At, n, f0(r.Ratios.PairsPipeline))
		w("| raw ceiling, batches of %d, %d goroutines (the pipeline's concurrency), median of those %d turns | %s /s | |\n", s.RawBatch, r.Ratios.RawGoroutines, n, f0(r.Ratios.PairsRaw))
		if r.Ratios.PairsRawAckPerBatch > 0 {
			w("| raw ceiling as above, but one ack per batch (as the consumer acks), median of those %d turns | %s /s | |\n", n, f0(r.Ratios.PairsRawAckPerBatch))
		}
	}
	if h := headline(r); h != nil {
		w("| throughput, 1 publicatie + %d mutatielevering (*Throughput*, one run) | %s handelingen/s | |\n", h.Consumers, f0(h.Rate))
	}
	if x := rawAt(r, true, r.Ratios.RawGoroutines); x != nil {
		w("| raw ceiling, batches of %d, %d goroutines (*References*, one run) | %s /s | |\n", x.Batch, x.Goroutines, f0(x.Rate))
	}
	if x := rawAt(r, false, r.Ratios.RawGoroutines); x != nil {
		w("| raw ceiling, 1 item per transaction, %d goroutines | %s /s | |\n", x.Goroutines, f0(x.Rate))
	}
	if r.Seed != nil {
		w("| seed mode (no wake-ups), %d consumers | %s handelingen/s | |\n", r.Seed.Consumers, f0(r.Seed.Rate))
	}
	if r.Ratios.PipelineVsRawBatch > 0 {
		from := ""
		if r.Ratios.PairsPipeline > 0 {
			from = " (medians of the pairs)"
		}
		w("| pipeline@%d / raw batched%s | %.2f | ≥ 0.7: %s |\n", r.Ratios.At, from, r.Ratios.PipelineVsRawBatch, verdict(r.Ratios.PipelineVsRawBatch >= 0.7))
	}
	if r.Ratios.PipelineVsRawAckPerBatch > 0 {
		w("| pipeline@%d / raw batched with one ack per batch (medians of the pairs; stricter than the issue's reference) | %.2f | |\n", r.Ratios.At, r.Ratios.PipelineVsRawAckPerBatch)
	}
	if r.Ratios.PipelineVsRawSingle > 0 {
		w("| pipeline@%d / raw 1 item per transaction | %.2f | |\n", r.Ratios.At, r.Ratios.PipelineVsRawSingle)
	}
	if r.Ratios.PipelineVsSeed > 0 {
		w("| pipeline@%d / seed mode | %.1f | ≥ 10: %s |\n", r.Ratios.At, r.Ratios.PipelineVsSeed, verdict(r.Ratios.PipelineVsSeed >= 10))
	}
	for _, c := range r.Chain {
		if c.Label == "idle" && c.Error == "" {
			w("| chain of %d, per-link p50 (idle pipeline) | %s ms | ≤ 20 ms: %s |\n", c.Links, f1(c.P50Ms), verdict(c.P50Ms <= 20))
		}
	}
	if r.Ratios.ScaleIsolated > 0 {
		w("| publisher round time p50, %s / %s history (full rounds, publisher alone) | %.2f | ≤ 2: %s |\n", human(r.Ratios.ScaleLargest), human(r.Ratios.ScaleSmallest),
			r.Ratios.ScaleIsolated, verdict(r.Ratios.ScaleIsolated <= 2))
	}
	if r.Ratios.ScaleLargestVsFirst > 0 {
		w("| publisher round time p50, %s / %s history (rounds while the consumers deliver) | %.2f | ≤ 2: %s |\n", human(r.Ratios.ScaleLargest), human(r.Ratios.ScaleSmallest),
			r.Ratios.ScaleLargestVsFirst, verdict(r.Ratios.ScaleLargestVsFirst <= 2))
	}
	viol := 0
	for _, p := range r.Pipeline {
		viol += p.Verzending.Violations
	}
	w("| per-person order violations, all pipeline runs | %d | 0: %s |\n\n", viol, verdict(viol == 0))
	if avg, worst, where := noise(r); avg > 0 {
		w("Other processes on the machine used %.0f%% of its CPU on average during the measurements (most: %.0f%% during %s); ", avg, worst, where)
		w("the figures are only as steady as the machine was (see *Where the CPU goes*).\n\n")
	}

	// Throughput.
	if len(r.Pipeline) > 0 {
		w("## Throughput\n\nTime from starting the processes until the last handeling is geleverd (`max(tslev)`); ")
		w("*steady* is geleverd / (last − first tslev). Round times from the publisher's `/metrics` histogram ")
		w("(interpolated in its buckets) and, exactly, from its debug log; rounds that published something.\n\n")
		w("| mutatielevering | geleverd | s | handelingen/s | steady /s | first after s | round p50 / p95 ms (metrics) | round p50 / p95 ms (log) | rounds | published per round | max in levering | verzending msgs | duplicates | order violations | peak RSS MB publicatie / mutatielevering (max) | warnings |\n")
		w("|---:|---:|---:|---:|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---|---:|\n")
		for _, p := range r.Pipeline {
			if p.Error != "" {
				w("| %d | error: %s ||||||||||||||| |\n", p.Consumers, oneLine(p.Error))
				continue
			}
			pubRSS, consRSS := rss(p.Processes)
			w("| %d | %d/%d | %.2f | **%s** | %s | %.2f | %s / %s | %s / %s | %d | %s | %d | %d | %d | %d | %s / %s | %d |\n",
				p.Consumers, p.Geleverd, p.Expected, p.Seconds, f0(p.Rate), f0(p.SteadyRate), p.FirstSeconds,
				f1(p.Rounds.P50Ms), f1(p.Rounds.P95Ms), f1(p.Rounds.LogP50Ms), f1(p.Rounds.LogP95Ms), p.Rounds.LogCount,
				f0(p.Rounds.PublishedAvg), p.MaxInLevering, p.Verzending.Messages, p.Verzending.Duplicates, p.Verzending.Violations,
				f0(pubRSS), f0(consRSS), len(p.Warnings))
		}
		w("\n")
		for _, p := range r.Pipeline {
			if len(p.Warnings) > 0 {
				w("- %s: %d warning(s) in the processes' logs, the first: `%s`\n", p.Label, len(p.Warnings), oneLine(p.Warnings[0]))
			}
		}
		if r.Seed != nil && len(r.Seed.Warnings) > 0 {
			w("- %s: %d warning(s) in the processes' logs, the first: `%s`\n", r.Seed.Label, len(r.Seed.Warnings), oneLine(r.Seed.Warnings[0]))
		}
		w("\n")
	}

	// Chain.
	if len(r.Chain) > 0 {
		w("## Chain latency\n\nOne person's chain registered at once, tsreg 1 ms apart, 1 publicatie + 4 mutatielevering. ")
		w("Link i = tslev(hᵢ) − tslev(hᵢ₋₁); the first link = tslev(h₁) − the registration's commit. ")
		w("With background, the background handelingen (other persons) are registered just before the chain, interleaved in tsreg.\n\n")
		w("| run | links | background | p50 ms | p95 ms | p99 ms | max ms | first link ms | whole chain ms |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, c := range r.Chain {
			if c.Error != "" {
				w("| %s | error: %s |||||||| \n", c.Label, oneLine(c.Error))
				continue
			}
			w("| %s | %d | %d | **%s** | %s | %s | %s | %s | %s |\n", c.Label, c.Links, c.Background, f1(c.P50Ms), f1(c.P95Ms), f1(c.P99Ms),
				f1(c.MaxMs), f1(c.FirstMs), f0(c.TotalMs))
		}
		w("\n")
	}

	// References.
	if len(r.Raw) > 0 || r.Seed != nil {
		w("## References on the same services\n\n")
		if len(r.Raw) > 0 {
			w("*Raw ceiling*: a bare loop in the bench, per item: receive a persistent message, ")
			w("one `update … set statuslev='geleverd', tslev=now() … returning` committed (autocommit), one persistent send ")
			w("confirmed by a receipt, ack. Connections as in the consumer processes: every goroutine receives on a connection of its own ")
			w("(STOMP's cumulative `client` ack mode, so a batch is acknowledged with one frame), %d goroutines share a sending connection. ", levering.DefaultWorkers)
			w("Batched: up to %d items per UPDATE, per STOMP transaction (commit with receipt) and per ack. ", s.RawBatch)
			w("Its table has the contract's columns of admhnd but none of the service's indexes and triggers. %d messages per run.\n\n", s.RawN)
			w("| reference | goroutines | items | s | items/s |\n|---|---:|---:|---:|---:|\n")
			for _, x := range r.Raw {
				if x.Error != "" {
					w("| raw, %s | %d | error: %s | | |\n", x.Mode, x.Goroutines, oneLine(x.Error))
					continue
				}
				w("| raw, %s | %d | %d | %.2f | **%s** |\n", x.Mode, x.Goroutines, x.N, x.Seconds, f0(x.Rate))
			}
		}
		if p := r.Seed; p != nil {
			if p.Error != "" {
				w("| seed mode | | error: %s | | |\n", oneLine(p.Error))
			} else {
				w("| seed mode: `BRP_LEVERING_ADMHNDPUBLICATIE_WAKEUP=false`, %d mutatielevering, %d handelingen over %d persons, fixed %.0f s window | | %d of %d | %.0f | **%s** |\n",
					p.Consumers, s.SeedN, s.SeedPersonen, s.SeedWindow, p.Geleverd, p.Expected, p.Seconds, f0(p.Rate))
			}
		}
		if r.Seed != nil {
			w("\n*Seed mode* is the seed's polling: a round every DELAY (5 s), at most MAXINLEVERING (1000) in flight, so at most ")
			w("200 handelingen/s by construction. It runs on a sparse workload (few persons with more than one handeling) whose candidates ")
			w("stay below LIMIT: that is its best case, and a round that reads LIMIT candidates would make the publisher start the next ")
			w("one at once even without wake-ups, which is not the seed's behaviour. Its rate is geleverd within the window / window.\n")
		}
		w("\n")
	}

	// Pairs.
	if len(r.Pairs) > 0 {
		w("## Pairs: the headline ratio, measured in turn\n\n")
		w("The pipeline with %d mutatielevering (as in *Throughput*), then at once the batched raw ceiling at %d goroutines ", r.Ratios.At, r.Ratios.RawGoroutines)
		w("(as in *References*: one ack per item, as the issue defines it, and then with one ack per batch), %d times. The machine's speed drifts during a run (other tenants; see *Where the CPU goes*); ", len(r.Pairs))
		w("measured in turn, drift moves both sides of the ratio alike. The headline ratios use the medians. ")
		w("*CPU ms* is the CPU time of the measured parts (service processes, broker, PostgreSQL, bench) per handeling or item; ")
		w("raw CPU / pipeline CPU is what the throughput ratio would be if both kept the machine equally busy. It drifts with the ")
		w("machine too (a CPU second buys less work on a busy host), but it shows which side a change saves on.\n\n")
		w("| pair | pipeline handelingen/s | raw batched /s | ratio | raw batched, one ack per batch /s | ratio | CPU ms pipeline / raw batched / raw one ack per batch | raw CPU / pipeline CPU |\n|---:|---:|---:|---:|---:|---:|---|---:|\n")
		for i, p := range r.Pairs {
			if p.Error != "" {
				w("| %d | error: %s | | | | | | |\n", i+1, oneLine(p.Error))
				continue
			}
			cpu := " | " // results from before the CPU was recorded
			if p.PipelineCPUms > 0 {
				cpu = fmt.Sprintf("%.3f / %.3f / %.3f | %.2f", p.PipelineCPUms, p.RawCPUms, p.RawAckPerBatchCPUms, p.RawCPUms/p.PipelineCPUms)
			}
			w("| %d | %s | %s | %.2f | %s | %.2f | %s |\n", i+1, f0(p.Pipeline), f0(p.Raw), p.Pipeline/p.Raw, f0(p.RawAckPerBatch), p.Pipeline/p.RawAckPerBatch, cpu)
		}
		w("\n")
	}

	// Scale.
	if len(r.Scale) > 0 {
		w("## Scale: round time as the delivered history grows\n\n")
		w("admhnd filled with delivered handelingen (`insert … select generate_series`, statuslev geleverd, tslev set, ")
		w("1–2 persons each over a million persons, vacuumed and analyzed), then a backlog of %d handelingen over %d persons published ", s.Backlog, s.BacklogPersonen)
		w("with LIMIT 5000 by 1 publicatie + %d mutatielevering (*in pipeline*: every round that published something, most of them small ", s.ScaleConsumers)
		w("because each delivery wakes the publisher). Then *full rounds*: the same backlog again, the publisher alone; after each round the bench ")
		w("sets what it published back to te leveren, so every round reads all candidates and publishes one handeling per free person ")
		w("(%d rounds). Round times from the publisher's debug log (exact); *mean (metrics)* from its histogram.\n\n", isolatedRounds)
		w("| history | admhnd rows | fill s | in pipeline: rounds | p50 ms | p95 ms | mean ms (metrics) | backlog /s | warnings | full rounds: published per round | p50 ms | p95 ms | order violations |\n")
		w("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, x := range r.Scale {
			if x.Error != "" {
				w("| %s | error: %s |||||||||||\n", human(x.History), oneLine(x.Error))
				continue
			}
			w("| %s | %d | %.1f | %d | **%s** | %s | %s | %s | %d | %s | **%s** | %s | %d |\n", human(x.History), x.Rows, x.FillSeconds, x.Rounds.LogCount,
				f1(x.Rounds.LogP50Ms), f1(x.Rounds.LogP95Ms), f1(x.Rounds.MeanMs), f0(x.Rate), len(x.Warnings), f0(x.Isolated.PublishedAvg),
				f1(x.Isolated.LogP50Ms), f1(x.Isolated.LogP95Ms), x.Violations)
		}
		for _, x := range r.Scale {
			if len(x.Warnings) > 0 {
				w("\n- %s history: %d warning(s) in the processes' logs, the first: `%s`", human(x.History), len(x.Warnings), oneLine(x.Warnings[0]))
			}
		}
		w("\n")
		if r.Ratios.ScaleLargestVsFirst > 0 {
			w("\nRound time p50 at %s / at %s history: **%.2f** in pipeline, **%.2f** full rounds.\n", human(r.Ratios.ScaleLargest),
				human(r.Ratios.ScaleSmallest), r.Ratios.ScaleLargestVsFirst, r.Ratios.ScaleIsolated)
		}
		w("\n")
	}

	// CPU.
	w("## Where the CPU goes\n\nCPU seconds during each run (from `/proc`); the machine has %d CPUs, so %d × wall is all there is. ", r.Machine.CPUs, r.Machine.CPUs)
	w("*postgres* is every backend of the server (other databases too); *machine* is everything, other work on the machine included; ")
	w("*other* is the machine's busy time not accounted to these parts (other processes on the machine).\n\n")
	w("| run | wall s | publicatie | mutatielevering (all) | broker JVM | postgres | bench | other | machine busy | of available |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	row := func(label string, c CPUSeconds) {
		if c.Wall == 0 {
			return
		}
		other := c.other()
		w("| %s | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.0f%% |\n", label, c.Wall, c.Publisher, c.Consumers, c.Broker,
			c.Postgres, c.Bench, max(0, other), c.MachineBusy, 100*c.MachineBusy/(c.Wall*float64(r.Machine.CPUs)))
	}
	for _, x := range cpuRuns(r) {
		label := x.label
		if x.raw {
			label += " (loop in bench)"
		}
		row(label, x.cpu)
	}
	w("\n")
	// Services.
	sv := r.Services
	w("## Services\n\n")
	if sv.BrokerPID != 0 {
		w("- ActiveMQ JVM: RSS %.0f MB at the end, peak %.0f MB since the broker started (shared with other users of the broker).\n", sv.BrokerRSSMB, sv.BrokerPeakRSSMB)
	}
	if sv.PostgresPID != 0 {
		w("- PostgreSQL (all server processes, PSS): %.0f MB at the end, highest sample %.0f MB.\n", sv.PostgresPSSMB, sv.PostgresPeakPSSMB)
	}
	w("- Bench database at the end: %.0f MB.\n", sv.DatabaseMB)
	for _, n := range r.Notes {
		w("- %s\n", n)
	}
	if len(r.Errors) > 0 {
		w("\n## Errors\n\n")
		for _, e := range r.Errors {
			w("- %s\n", oneLine(e))
		}
	}
	w("\nReproduce: `scripts/bench.sh%s`. Machine-readable: `results.json`; chart: `throughput.svg`.\n", quickArg(s.Quick))
	return b.String()
}

// cpuRun is one measured run's CPU seconds, for the CPU table and noise.
type cpuRun struct {
	label string
	raw   bool // the raw loop, which runs inside the bench process
	cpu   CPUSeconds
}

// cpuRuns lists the runs whose CPU was measured, in report order.
func cpuRuns(r *Results) []cpuRun {
	var out []cpuRun
	for _, p := range r.Pipeline {
		out = append(out, cpuRun{label: p.Label, cpu: p.CPU})
	}
	if r.Seed != nil {
		out = append(out, cpuRun{label: r.Seed.Label, cpu: r.Seed.CPU})
	}
	for _, x := range r.Raw {
		out = append(out, cpuRun{label: fmt.Sprintf("raw, %s, %d goroutines", x.Mode, x.Goroutines), raw: true, cpu: x.CPU})
	}
	for _, x := range r.Scale {
		out = append(out, cpuRun{label: fmt.Sprintf("scale, %s history", human(x.History)), cpu: x.CPU})
	}
	for i, x := range r.Pairs {
		out = append(out, cpuRun{label: fmt.Sprintf("pair %d, pipeline", i+1), cpu: x.PipelineCPU},
			cpuRun{label: fmt.Sprintf("pair %d, raw batched", i+1), raw: true, cpu: x.RawCPU},
			cpuRun{label: fmt.Sprintf("pair %d, raw batched, one ack per batch", i+1), raw: true, cpu: x.RawAckPerBatchCPU})
	}
	return out
}

// parts is the CPU time of the measured parts: service processes, broker, database, bench.
func (c CPUSeconds) parts() float64 {
	return c.Publisher + c.Consumers + c.Broker + c.Postgres + c.Bench
}

// other is the machine's busy time not accounted to the measured parts.
func (c CPUSeconds) other() float64 {
	return c.MachineBusy - c.parts()
}

// msPer is the measured parts' CPU milliseconds per item of a run of n items (0 without).
func (c CPUSeconds) msPer(n int) float64 {
	if n <= 0 {
		return 0
	}
	return 1000 * c.parts() / float64(n)
}

// noise is the share of the machine's CPU that other processes used during the measurements:
// the average over all of them (weighted by wall time) and the worst one.
func noise(r *Results) (avg, worst float64, where string) {
	var other, avail float64
	add := func(label string, c CPUSeconds) {
		if c.Wall <= 0 || r.Machine.CPUs == 0 {
			return
		}
		o := max(0, c.other())
		a := c.Wall * float64(r.Machine.CPUs)
		other += o
		avail += a
		if 100*o/a > worst {
			worst, where = 100*o/a, label
		}
	}
	for _, x := range cpuRuns(r) {
		add(x.label, x.cpu)
	}
	if avail == 0 {
		return 0, 0, ""
	}
	return 100 * other / avail, worst, where
}

func quickArg(q bool) string {
	if q {
		return " -quick"
	}
	return ""
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	s = strings.ReplaceAll(s, "|", "/")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// rss returns the publisher's peak RSS and the largest of the consumers'.
func rss(ps []ProcStat) (pub, cons float64) {
	for _, p := range ps {
		if p.Name == "publicatie" {
			pub = p.PeakRSSMB
		} else {
			cons = max(cons, p.PeakRSSMB)
		}
	}
	return pub, cons
}

// ---------------------------------------------------------------- chart

// chart draws throughput against the number of consumer processes, with the references as
// horizontal lines.
func chart(r *Results) string {
	const (
		W, H                     = 940, 520
		left, right, top, bottom = 80, 310, 70, 60
		plotW, plotH             = W - left - right, H - top - bottom
		blue, orange, green, red = "#1f5fbf", "#e07b00", "#2a9d3a", "#c0392b"
		grey, light              = "#555", "#ddd"
		fontFamily               = "DejaVu Sans, Helvetica, Arial, sans-serif"
	)
	type ref struct {
		label, color, dash string
		v                  float64
		note               string
	}
	var pts [][2]float64 // consumers, rate
	warned := map[float64]bool{}
	for _, p := range r.Pipeline {
		if p.Error == "" && p.Rate > 0 {
			pts = append(pts, [2]float64{float64(p.Consumers), p.Rate})
			warned[float64(p.Consumers)] = len(p.Warnings) > 0
		}
	}
	var refs []ref
	if x := rawAt(r, true, r.Ratios.RawGoroutines); x != nil {
		refs = append(refs, ref{fmt.Sprintf("raw ceiling, batches of %d", x.Batch), green, "8 5", x.Rate, fmt.Sprintf("%d goroutines", x.Goroutines)})
	}
	if x := rawAt(r, false, r.Ratios.RawGoroutines); x != nil {
		refs = append(refs, ref{"raw ceiling, 1 item per transaction", orange, "8 5", x.Rate, fmt.Sprintf("%d goroutines", x.Goroutines)})
	}
	if r.Seed != nil && r.Seed.Rate > 0 {
		refs = append(refs, ref{"seed mode (rounds every 5 s)", red, "3 4", r.Seed.Rate, fmt.Sprintf("%d mutatielevering", r.Seed.Consumers)})
	}
	// Raw at K×workers goroutines, drawn faintly at the consumers' x positions.
	var rawK [2][][2]float64
	for _, x := range r.Raw {
		if x.Error != "" || x.Goroutines%levering.DefaultWorkers != 0 {
			continue
		}
		i := 0
		if x.Batch > 1 {
			i = 1
		}
		rawK[i] = append(rawK[i], [2]float64{float64(x.Goroutines / levering.DefaultWorkers), x.Rate})
	}
	xs := []float64{}
	for _, k := range r.Settings.Consumers {
		xs = append(xs, float64(k))
	}
	if len(xs) == 0 {
		xs = []float64{1, 2, 4, 8}
	}
	maxY := 0.0
	for _, p := range pts {
		maxY = max(maxY, p[1])
	}
	for _, rf := range refs {
		maxY = max(maxY, rf.v)
	}
	for _, s := range rawK {
		for _, p := range s {
			if contains(xs, p[0]) {
				maxY = max(maxY, p[1])
			}
		}
	}
	step := niceStep(maxY * 1.1 / 6)
	topY := math.Ceil(maxY*1.08/step) * step
	if topY == 0 {
		topY = 1
	}
	// x: evenly spaced categories (1, 2, 4, 8 are powers of two: a log scale).
	xpos := func(k float64) float64 {
		for i, x := range xs {
			if x == k {
				if len(xs) == 1 {
					return left + plotW/2
				}
				return left + 30 + float64(i)*(plotW-60)/float64(len(xs)-1)
			}
		}
		return -1
	}
	ypos := func(v float64) float64 { return top + plotH - v/topY*plotH }

	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="%s">`+"\n", W, H, W, H, fontFamily)
	w(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")
	title := "Throughput: 1 publicatie + K mutatielevering (default settings)"
	w(`<text x="%d" y="30" font-size="18" font-weight="bold" fill="#222">%s</text>`+"\n", left, esc(title))
	sub := fmt.Sprintf("%d handelingen over %d persons, 30%% multi-person · %d CPUs · %s", r.Settings.N, r.Settings.Personen, r.Machine.CPUs, dateOf(r.StartedAt))
	if r.Settings.Quick {
		sub += " · QUICK RUN"
	}
	w(`<text x="%d" y="52" font-size="12.5" fill="%s">%s</text>`+"\n", left, grey, esc(sub))
	// Grid and y axis.
	for v := 0.0; v <= topY+step/2; v += step {
		y := ypos(v)
		w(`<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s" stroke-width="1"/>`+"\n", left, y, left+plotW, y, light)
		w(`<text x="%d" y="%.1f" font-size="12" fill="%s" text-anchor="end">%s</text>`+"\n", left-8, y+4, grey, thousands(v))
	}
	w(`<text transform="translate(22 %d) rotate(-90)" font-size="13" fill="#333" text-anchor="middle">handelingen geleverd per second</text>`+"\n", top+plotH/2)
	// x axis.
	w(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#333" stroke-width="1.2"/>`+"\n", left, top+plotH, left+plotW, top+plotH)
	for _, k := range xs {
		x := xpos(k)
		w(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#333"/>`+"\n", x, top+plotH, x, top+plotH+5)
		w(`<text x="%.1f" y="%d" font-size="13" fill="#333" text-anchor="middle">%g</text>`+"\n", x, top+plotH+20, k)
	}
	w(`<text x="%d" y="%d" font-size="13" fill="#333" text-anchor="middle">mutatielevering processes (%d workers each)</text>`+"\n", left+plotW/2, top+plotH+44, levering.DefaultWorkers)
	// References.
	for _, rf := range refs {
		y := ypos(rf.v)
		w(`<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s" stroke-width="2" stroke-dasharray="%s"/>`+"\n", left, y, left+plotW, y, rf.color, rf.dash)
	}
	// Raw at K×workers goroutines: faint dotted lines with small hollow markers.
	for i, s := range rawK {
		color := orange
		if i == 1 {
			color = green
		}
		var path []string
		for _, p := range s {
			if x := xpos(p[0]); x >= 0 {
				path = append(path, fmt.Sprintf("%.1f,%.1f", x, ypos(p[1])))
			}
		}
		if len(path) > 1 {
			w(`<polyline points="%s" fill="none" stroke="%s" stroke-width="1.2" stroke-dasharray="1 3" opacity="0.8"/>`+"\n", strings.Join(path, " "), color)
		}
		for _, p := range path {
			xy := strings.Split(p, ",")
			w(`<circle cx="%s" cy="%s" r="3.5" fill="white" stroke="%s" stroke-width="1.3"/>`+"\n", xy[0], xy[1], color)
		}
	}
	// The pipeline.
	var path []string
	for _, p := range pts {
		path = append(path, fmt.Sprintf("%.1f,%.1f", xpos(p[0]), ypos(p[1])))
	}
	if len(path) > 1 {
		w(`<polyline points="%s" fill="none" stroke="%s" stroke-width="3"/>`+"\n", strings.Join(path, " "), blue)
	}
	anyWarned := false
	for _, p := range pts {
		x, y := xpos(p[0]), ypos(p[1])
		if warned[p[0]] {
			anyWarned = true
			w(`<circle cx="%.1f" cy="%.1f" r="9" fill="none" stroke="%s" stroke-width="2"/>`+"\n", x, y, red)
		}
		w(`<circle cx="%.1f" cy="%.1f" r="5.5" fill="%s"/>`+"\n", x, y, blue)
		w(`<text x="%.1f" y="%.1f" font-size="12.5" font-weight="bold" fill="%s" text-anchor="middle">%s</text>`+"\n", x, y-12, blue, thousands(p[1]))
	}
	// Legend.
	lx, ly := left+plotW+24, top+10
	item := func(color, dash string, width float64, label, value string, marker bool) {
		w(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="%.1f"`, lx, ly, lx+34, ly, color, width)
		if dash != "" {
			w(` stroke-dasharray="%s"`, dash)
		}
		w("/>\n")
		if marker {
			w(`<circle cx="%d" cy="%d" r="4.5" fill="%s"/>`+"\n", lx+17, ly, color)
		}
		w(`<text x="%d" y="%d" font-size="12.5" fill="#222">%s</text>`+"\n", lx+42, ly+4, esc(label))
		if value != "" {
			w(`<text x="%d" y="%d" font-size="11.5" fill="%s">%s</text>`+"\n", lx+42, ly+19, grey, esc(value))
		}
		ly += 42
	}
	item(blue, "", 3, "pipeline", "", true)
	for _, rf := range refs {
		item(rf.color, rf.dash, 2, rf.label, thousands(rf.v)+"/s, "+rf.note, false)
	}
	if anyWarned {
		w(`<circle cx="%d" cy="%d" r="5.5" fill="%s"/>`+"\n", lx+17, ly, blue)
		w(`<circle cx="%d" cy="%d" r="9" fill="none" stroke="%s" stroke-width="2"/>`+"\n", lx+17, ly, red)
		w(`<text x="%d" y="%d" font-size="12.5" fill="#222">run with WARN lines</text>`+"\n", lx+42, ly+4)
		w(`<text x="%d" y="%d" font-size="11.5" fill="%s">(see the warnings column)</text>`+"\n", lx+42, ly+19, grey)
		ly += 42
	}
	if len(rawK[0]) > 0 || len(rawK[1]) > 0 {
		w(`<circle cx="%d" cy="%d" r="3.5" fill="white" stroke="%s" stroke-width="1.3"/>`+"\n", lx+10, ly, orange)
		w(`<circle cx="%d" cy="%d" r="3.5" fill="white" stroke="%s" stroke-width="1.3"/>`+"\n", lx+24, ly, green)
		w(`<text x="%d" y="%d" font-size="12.5" fill="#222">raw ceiling at</text>`+"\n", lx+42, ly+4)
		w(`<text x="%d" y="%d" font-size="12.5" fill="#222">K×workers goroutines</text>`+"\n", lx+42, ly+19)
	}
	w("</svg>\n")
	return b.String()
}

func contains(xs []float64, x float64) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func niceStep(raw float64) float64 {
	if raw <= 0 {
		return 1
	}
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			return m * mag
		}
	}
	return 10 * mag
}

func thousands(v float64) string {
	n := int64(math.Round(v))
	s := fmt.Sprint(n)
	if n < 10000 && n > -10000 {
		return s
	}
	var out []byte
	for i, c := range []byte(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, c)
	}
	return string(out)
}

func esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}

func dateOf(ts string) string {
	if len(ts) >= 10 {
		return ts[:10]
	}
	return ts
}
