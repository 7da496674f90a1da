// Command bench measures the pipeline against the real PostgreSQL and ActiveMQ, in one run:
// throughput of one publicatie and K mutatielevering processes with the default settings,
// chain latency of one person's handelingen, peak RSS and CPU of every process, the
// publisher's round time, two references on the same services (a bare receive-update-send-ack
// loop, once per item and once in batches, and the pipeline in the seed's fixed-delay mode) and
// the publisher's round time as the delivered history grows. It writes a markdown table to
// stdout and to <out>/results.md, <out>/results.json and the chart <out>/throughput.svg.
//
// scripts/bench.sh starts the services, builds the binaries into bin/ and runs it; the real
// publicatie and mutatielevering binaries are found next to this one (or with -bin).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// options are the command's flags.
type options struct {
	n, personen     int
	consumers       []int
	history         []int64
	quick           bool
	out, logs, bin  string
	db              string
	keep            bool
	chain           int
	chainBackground int
	seedN           int
	seedPersonen    int
	seedWindow      time.Duration
	seedConsumers   int
	rawN            int
	rawBatch        int
	backlog         int
	backlogPersonen int
	scaleConsumers  int
	phaseTimeout    time.Duration
	only            []string
	env             []string
	render          string
	pairs           int
	warmup          bool
}

var sections = []string{"pipeline", "chain", "seed", "raw", "pairs", "scale"}

func (o options) runs(section string) bool {
	return len(o.only) == 0 || slices.Contains(o.only, section)
}

type listFlag[T int | int64] struct{ v *[]T }

func (l listFlag[T]) String() string {
	if l.v == nil {
		return ""
	}
	var s []string
	for _, x := range *l.v {
		s = append(s, strconv.FormatInt(int64(x), 10))
	}
	return strings.Join(s, ",")
}

func (l listFlag[T]) Set(v string) error {
	var out []T
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		mult := int64(1)
		switch {
		case strings.HasSuffix(f, "M"), strings.HasSuffix(f, "m"):
			mult, f = 1_000_000, f[:len(f)-1]
		case strings.HasSuffix(f, "k"), strings.HasSuffix(f, "K"):
			mult, f = 1_000, f[:len(f)-1]
		}
		x, err := strconv.ParseInt(f, 10, 64)
		if err != nil || x < 0 {
			return fmt.Errorf("%q is not a non-negative number", f)
		}
		out = append(out, T(x*mult))
	}
	if len(out) == 0 {
		return errors.New("empty list")
	}
	*l.v = out
	return nil
}

type stringsFlag struct{ v *[]string }

func (s stringsFlag) String() string {
	if s.v == nil {
		return ""
	}
	return strings.Join(*s.v, " ")
}
func (s stringsFlag) Set(v string) error { *s.v = append(*s.v, v); return nil }

// parseFlags reads args into options; -quick changes the defaults of the flags not given.
func parseFlags(args []string, stderr io.Writer) (options, error) {
	o := options{
		n: 20000, personen: 5000, consumers: []int{1, 2, 4, 8}, history: []int64{10_000, 1_000_000, 10_000_000},
		out: "docs/bench", logs: ".run/bench", db: "brp_bench", chain: 100, chainBackground: 5000,
		seedN: 4000, seedPersonen: 5000, seedWindow: 15 * time.Second, seedConsumers: 4, rawBatch: 20, backlog: 5000, backlogPersonen: 1000,
		scaleConsumers: 4, phaseTimeout: 5 * time.Minute, pairs: 5, warmup: true,
	}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&o.n, "n", o.n, "handelingen per pipeline run (and messages per raw-ceiling run)")
	fs.IntVar(&o.personen, "personen", o.personen, "distinct persons of the pipeline runs")
	fs.Var(listFlag[int]{&o.consumers}, "consumers", "mutatielevering process counts, comma-separated")
	fs.Var(listFlag[int64]{&o.history}, "history", "delivered history sizes for the scale test, comma-separated (10k, 1M allowed)")
	fs.BoolVar(&o.quick, "quick", false, "smoke run: N=2000, consumers 1,2, history 10k,100k, shorter seed window")
	fs.StringVar(&o.out, "out", o.out, "directory for results.md, results.json and throughput.svg")
	fs.StringVar(&o.logs, "logs", o.logs, "directory for the processes' logs (a subdirectory per run)")
	fs.StringVar(&o.bin, "bin", "", "directory holding publicatie and mutatielevering (default: next to this binary)")
	fs.StringVar(&o.db, "db", o.db, "database created afresh on the configured server (dropped at the end unless -keep)")
	fs.BoolVar(&o.keep, "keep", false, "keep the bench database")
	fs.IntVar(&o.chain, "chain", o.chain, "length of the one-person chain")
	fs.IntVar(&o.chainBackground, "chain-background", o.chainBackground, "background handelingen during the second chain measurement (0: skip it)")
	fs.IntVar(&o.seedN, "seed-n", o.seedN, "handelingen of the seed-mode run (keep the non-excluded ones below LIMIT 5000: see the notes)")
	fs.IntVar(&o.seedPersonen, "seed-personen", o.seedPersonen, "persons of the seed-mode run")
	fs.DurationVar(&o.seedWindow, "seed-window", o.seedWindow, "how long seed mode runs (a multiple of DELAY); its rate is geleverd/window")
	fs.IntVar(&o.seedConsumers, "seed-consumers", o.seedConsumers, "mutatielevering processes in seed mode")
	fs.IntVar(&o.rawN, "raw-n", 0, "messages per raw-ceiling run (default: -n)")
	fs.IntVar(&o.rawBatch, "raw-batch", o.rawBatch, "items per transaction of the batched raw ceiling")
	fs.IntVar(&o.pairs, "pairs", o.pairs, "alternating pipeline / batched raw runs for the headline ratio (section pairs)")
	fs.BoolVar(&o.warmup, "warmup", o.warmup, "first run the pipeline and the raw loop once, unmeasured, so the broker's JIT is warm for both")
	fs.IntVar(&o.backlog, "backlog", o.backlog, "handelingen published at each history size of the scale test")
	fs.IntVar(&o.backlogPersonen, "backlog-personen", o.backlogPersonen, "persons of that backlog")
	fs.IntVar(&o.scaleConsumers, "scale-consumers", o.scaleConsumers, "mutatielevering processes in the scale test")
	fs.DurationVar(&o.phaseTimeout, "phase-timeout", o.phaseTimeout, "give up on one measurement after this long")
	fs.StringVar(&o.render, "render", "", "measure nothing: write results.md and throughput.svg (and stdout) again from this results.json into -out")
	only := ""
	fs.StringVar(&only, "only", "", "run only these sections, comma-separated: "+strings.Join(sections, ","))
	fs.Var(stringsFlag{&o.env}, "env", "KEY=VALUE added to every publicatie and mutatielevering process (repeatable; for experiments, recorded in the results)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if o.quick {
		def := func(name string, apply func()) {
			if !set[name] {
				apply()
			}
		}
		def("n", func() { o.n = 2000 })
		def("personen", func() { o.personen = 500 })
		def("consumers", func() { o.consumers = []int{1, 2} })
		def("history", func() { o.history = []int64{10_000, 100_000} })
		def("chain-background", func() { o.chainBackground = 500 })
		def("seed-window", func() { o.seedWindow = 10 * time.Second })
		def("backlog", func() { o.backlog = 2000 })
		def("backlog-personen", func() { o.backlogPersonen = 400 })
		def("phase-timeout", func() { o.phaseTimeout = 2 * time.Minute })
		def("pairs", func() { o.pairs = 1 })
	}
	if o.rawN == 0 {
		o.rawN = o.n
	}
	if only != "" {
		for _, s := range strings.Split(only, ",") {
			if !slices.Contains(sections, s) {
				return o, fmt.Errorf("-only: unknown section %q (known: %s)", s, strings.Join(sections, ","))
			}
			o.only = append(o.only, s)
		}
	}
	for _, kv := range o.env {
		if !strings.Contains(kv, "=") || !strings.HasPrefix(kv, "BRP_") {
			return o, fmt.Errorf("-env %q: expected BRP_NAME=VALUE", kv)
		}
	}
	switch {
	case o.n <= 0 || o.personen <= 0 || o.seedN <= 0 || o.seedPersonen <= 0 || o.chain < 1 || o.backlog <= 0 || o.backlogPersonen <= 0 || o.rawBatch < 1 || o.pairs < 1:
		return o, errors.New("-n, -personen, -chain, -backlog, -backlog-personen, -raw-batch and -pairs must be positive")
	case slices.ContainsFunc(o.consumers, func(k int) bool { return k < 1 }):
		return o, errors.New("-consumers: every count must be at least 1")
	}
	slices.Sort(o.consumers)
	o.consumers = slices.Compact(o.consumers)
	slices.Sort(o.history)
	o.history = slices.Compact(o.history)
	if o.bin == "" {
		self, err := os.Executable()
		if err != nil {
			return o, err
		}
		o.bin = filepath.Dir(self)
	}
	return o, nil
}

func main() {
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(2)
	}
	if o.render != "" {
		if err := render(o.render, o.out, os.Stdout); err != nil {
			fmt.Fprintf(os.Stderr, "bench: %v\n", err)
			os.Exit(1)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := run(ctx, o, os.Stdout, os.Stderr)
	if err == nil && res != nil && len(res.Errors) > 0 {
		err = fmt.Errorf("%d measurement(s) failed: %s", len(res.Errors), strings.Join(res.Errors, "; "))
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
}

// buildInfo describes the code measured: the VCS revision when the binary carries it.
func buildInfo() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return runtime.Version()
	}
	rev, modified := "", ""
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "+dirty"
			}
		}
	}
	if rev == "" {
		return bi.GoVersion
	}
	return rev[:min(12, len(rev))] + modified + " " + bi.GoVersion
}
