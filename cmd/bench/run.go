package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	_ "github.com/lib/pq" // the PostgreSQL driver

	"github.com/brp/levering/broker"
	"github.com/brp/levering/cmd/internal/setup"
	"github.com/brp/levering/internal/load"
	"github.com/brp/levering/internal/rig"
	"github.com/brp/levering/levering"
)

// bench holds what every phase shares.
type bench struct {
	o              options
	stdout, stderr io.Writer
	bcfg           broker.Config
	serverURL      string
	dbURL          string
	db             *sqlx.DB
	runID          string
	logDir         string
	brokerPID      int
	pgPID          int
	res            *Results
	peakPSS        int64
	started        time.Time
}

// workloadSeed makes every pipeline run get the same handelingen.
const workloadSeed = 20260101

func run(ctx context.Context, o options, stdout, stderr io.Writer) (*Results, error) {
	var common setup.Common
	if err := setup.Load(&common); err != nil {
		return nil, err
	}
	bcfg, err := common.Broker()
	if err != nil {
		return nil, err
	}
	b := &bench{o: o, stdout: stdout, stderr: stderr, bcfg: bcfg, serverURL: string(common.DatabaseURL),
		runID: runID(), started: time.Now()}
	b.logDir = filepath.Join(o.logs, b.runID)
	if err := os.MkdirAll(b.logDir, 0o755); err != nil {
		return nil, err
	}
	b.res = &Results{StartedAt: b.started.UTC().Format(time.RFC3339), Settings: Settings{
		N: o.n, Personen: o.personen, Multi: 0.3, Excluded: 0.05, Consumers: o.consumers, Workers: "default",
		Delay: "default", Limit: "default", MaxInLevering: "default", ExtraEnv: o.env, Chain: o.chain,
		ChainBackground: o.chainBackground, SeedN: o.seedN, SeedPersonen: o.seedPersonen, SeedWindow: o.seedWindow.Seconds(), RawN: o.rawN,
		RawBatch: o.rawBatch, History: o.history, Backlog: o.backlog, BacklogPersonen: o.backlogPersonen, ScaleConsumers: o.scaleConsumers, Quick: o.quick,
	}, Errors: []string{}, Notes: []string{}}
	for _, bin := range []string{"publicatie", "mutatielevering"} {
		if _, err := os.Stat(filepath.Join(o.bin, bin)); err != nil {
			return nil, fmt.Errorf("%s not found in %s (build it with scripts/bench.sh, or pass -bin): %w", bin, o.bin, err)
		}
	}
	if err := b.createDatabase(ctx); err != nil {
		return nil, err
	}
	defer b.db.Close()
	defer func() {
		if o.keep {
			b.logf("kept database %s", o.db)
			return
		}
		if err := b.dropDatabase(); err != nil {
			b.logf("could not drop database %s: %v", o.db, err)
		}
	}()
	b.machine(ctx)
	b.logf("run %s: logs in %s, database %s, queues /queue/brp.bench.%s.*", b.runID, b.logDir, o.db, b.runID)

	at := headlineConsumers(o.consumers)
	if o.warmup && (o.runs("pipeline") || o.runs("raw") || o.runs("pairs")) {
		b.warmUp(ctx, at)
	}
	// The pairs come first after the warm-up, on services in the state the pipeline section
	// also sees. After the single-item raw runs (~100,000 transactions through PostgreSQL and
	// the broker) the pipeline was measured 7-24% slower than just before them, the raw loop
	// not slower.
	if o.runs("pairs") && ctx.Err() == nil {
		b.res.Pairs = b.pairsPhase(ctx, at)
	}
	if o.runs("pipeline") && ctx.Err() == nil {
		for _, k := range o.consumers {
			if ctx.Err() != nil {
				break
			}
			p := b.pipelinePhase(ctx, k)
			b.res.Pipeline = append(b.res.Pipeline, p)
		}
	}
	if o.runs("chain") && ctx.Err() == nil {
		b.res.Chain = b.chainPhase(ctx)
	}
	if o.runs("seed") && ctx.Err() == nil {
		p := b.seedPhase(ctx)
		b.res.Seed = &p
	}
	if o.runs("raw") && ctx.Err() == nil {
		b.res.Raw = b.rawPhase(ctx)
	}
	if o.runs("scale") && ctx.Err() == nil {
		b.res.Scale = b.scalePhase(ctx)
	}
	if ctx.Err() != nil {
		b.res.Errors = append(b.res.Errors, "interrupted: "+ctx.Err().Error())
	}
	b.services(ctx)
	b.ratios()
	b.res.DurationSeconds = time.Since(b.started).Seconds()
	if err := write(b.res, o.out, stdout); err != nil {
		return b.res, err
	}
	return b.res, nil
}

// runID names a run's queues and log directory: the time and a little randomness.
func runID() string {
	r := make([]byte, 2)
	_, _ = rand.Read(r)
	return strconv.FormatInt(time.Now().UnixMilli(), 36) + hex.EncodeToString(r)
}

func (b *bench) logf(format string, args ...any) {
	fmt.Fprintf(b.stderr, "bench %6.1fs: %s\n", time.Since(b.started).Seconds(), fmt.Sprintf(format, args...))
}

func (b *bench) fail(what string, err error) string {
	msg := fmt.Sprintf("%s: %v", what, err)
	b.res.Errors = append(b.res.Errors, msg)
	b.logf("ERROR %s", msg)
	return err.Error()
}

// createDatabase (re)creates the bench database on the configured server and migrates it.
func (b *bench) createDatabase(ctx context.Context) error {
	var err error
	if b.db, b.dbURL, err = rig.CreateDB(ctx, b.serverURL, b.o.db); err != nil {
		return fmt.Errorf("-db %s: %w", b.o.db, err)
	}
	b.db.SetMaxOpenConns(80)
	b.db.SetMaxIdleConns(80)
	// The broker must answer too: fail now, not in the middle of the run.
	conn, err := broker.Dial(ctx, b.bcfg)
	if err != nil {
		b.db.Close()
		return fmt.Errorf("broker at %s is not reachable (start it with scripts/services.sh up): %w", b.bcfg.Addr, err)
	}
	b.res.Machine.Broker = conn.Server
	conn.Disconnect()
	return nil
}

func (b *bench) dropDatabase() error {
	b.db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return rig.DropDB(ctx, b.serverURL, b.o.db)
}

// machine records the machine, the services and the code; it finds the broker's and the
// PostgreSQL server's processes (when they run on this machine) for CPU and memory figures.
func (b *bench) machine(ctx context.Context) {
	m := &b.res.Machine
	m.CPUs = runtime.NumCPU()
	if v, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(v))
	}
	_ = b.db.GetContext(ctx, &m.Postgres, `select split_part(version(), ' on ', 1)`)
	m.Bench = buildInfo()
	m.Code = gitRevision()
	b.brokerPID = rig.FindBroker(b.bcfg.Addr)
	var backend int
	if err := b.db.GetContext(ctx, &backend, `select pg_backend_pid()`); err == nil {
		if pp := rig.Parent(backend); isPostgres(pp) {
			b.pgPID = pp
		}
	}
	if b.brokerPID == 0 {
		b.res.Notes = append(b.res.Notes, "broker JVM not found on this machine: no broker CPU/RSS figures")
	}
	if b.pgPID == 0 {
		b.res.Notes = append(b.res.Notes, "PostgreSQL server not found on this machine: no postgres CPU/memory figures")
	}
}

func isPostgres(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && strings.Contains(string(b), "postgres")
}

func gitRevision() string {
	rev, err := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	s := strings.TrimSpace(string(rev))
	if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
		s += " + uncommitted changes"
	}
	return s
}

// ---------------------------------------------------------------- shared steps

func (b *bench) queues(label string) rig.Queues {
	return rig.QueuesNamed("/queue/brp.bench." + b.runID + "." + label)
}

// env is the complete environment of a publicatie or mutatielevering process (rig.Environ): the
// broker connection as given (BRP_STOMP_ settings of this process included), the bench
// database, the run's queues and cluster, the log level, then -env and extra.
func (b *bench) env(q rig.Queues, cluster, level string, extra ...string) []string {
	settings := append(rig.Inherit("BRP_STOMP_"), "BRP_LEVERING_ADMHNDPUBLICATIE_CLUSTER="+cluster, "BRP_LOG_LEVEL="+level)
	settings = append(append(settings, b.o.env...), extra...)
	return rig.Environ(rig.Env(b.dbURL, b.bcfg, q, settings...)...)
}

// truncate empties the contract's tables (and what references them).
func (b *bench) truncate(ctx context.Context) error {
	_, err := b.db.ExecContext(ctx, `truncate admhnd, admhnd_persoon cascade`)
	return err
}

// seed inserts hs as bijhouding would and refreshes the planner's statistics.
func (b *bench) seed(ctx context.Context, hs []load.Handeling) error {
	if err := load.Insert(ctx, b.db, hs); err != nil {
		return err
	}
	_, err := b.db.ExecContext(ctx, `analyze admhnd, admhnd_persoon`)
	return err
}

func workload(n, personen int, firstID int64, start time.Time) []load.Handeling {
	return load.Generate(load.Spec{N: n, Personen: personen, Multi: 0.3, Excluded: 0.05, FirstID: firstID,
		Seed: workloadSeed, Start: start})
}

func expected(hs []load.Handeling) int {
	n := 0
	for _, h := range hs {
		if h.Soort != load.ExcludedSoort && len(h.Personen) > 0 {
			n++
		}
	}
	return n
}

func byID(hs []load.Handeling) map[int64]load.Handeling {
	m := make(map[int64]load.Handeling, len(hs))
	for _, h := range hs {
		m[h.ID] = h
	}
	return m
}

// processes is one publicatie and k mutatielevering processes of one measurement.
type processes struct {
	pub  *rig.Proc
	cons []*rig.Proc
}

func (ps processes) all() []*rig.Proc { return append([]*rig.Proc{ps.pub}, ps.cons...) }

// start starts k consumers and then the publisher (debug logs: one line per round).
func (b *bench) start(label string, k int, q rig.Queues, extra ...string) (processes, error) {
	var ps processes
	dir := filepath.Join(b.logDir, label)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return ps, err
	}
	cluster := "bench-" + b.runID + "-" + label
	launch := func(name, command, level string) (*rig.Proc, error) {
		p, err := rig.Start(rig.Cmd{Name: name, Bin: filepath.Join(b.o.bin, command), Env: b.env(q, cluster, level, extra...),
			LogFile: filepath.Join(dir, name+".log")})
		if err != nil {
			rig.KillAll(ps.cons...)
			return nil, fmt.Errorf("%w (build it with scripts/bench.sh)", err)
		}
		return p, nil
	}
	for i := range k {
		p, err := launch(fmt.Sprintf("mutatielevering-%d", i+1), "mutatielevering", "info")
		if err != nil {
			return ps, err
		}
		ps.cons = append(ps.cons, p)
	}
	p, err := launch("publicatie", "publicatie", "debug")
	ps.pub = p
	return ps, err
}

// ready waits until the publisher leads and every consumer is subscribed (their /readyz).
func (b *bench) ready(ctx context.Context, ps processes) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := ps.pub.WaitLeader(ctx); err != nil {
		return err
	}
	for _, c := range ps.cons {
		if err := c.WaitReady(ctx); err != nil {
			return err
		}
	}
	// The publisher's LISTEN connection is set up beside its first round.
	time.Sleep(300 * time.Millisecond)
	return nil
}

type counts struct{ geleverd, fout, inLevering int }

// countRange counts the statuses of the handelingen with ids in [from, to] (a primary-key
// range scan: cheap however long the history).
func (b *bench) countRange(ctx context.Context, from, to int64) (counts, error) {
	var c counts
	err := b.db.QueryRowxContext(ctx, `select count(*) filter (where statuslev = 'geleverd'),
		count(*) filter (where statuslev = 'fout'), count(*) filter (where statuslev = 'in_levering')
		from admhnd where id between $1 and $2`, from, to).Scan(&c.geleverd, &c.fout, &c.inLevering)
	return c, err
}

// roundLine is one "round committed" line of the publisher's debug log.
type roundLine struct {
	ms        float64
	published int
}

func roundLines(p *rig.Proc) []roundLine {
	var out []roundLine
	for _, l := range p.Lines("round committed") {
		// slog's JSON handler writes a Duration as nanoseconds.
		d, _ := l["duration"].(float64)
		n, _ := l["published"].(float64)
		out = append(out, roundLine{ms: d / 1e6, published: int(n)})
	}
	return out
}

// roundStats reads the publisher's round time from its metrics and its debug log.
func roundStats(m rig.Metrics, lines []roundLine) RoundStats {
	var rs RoundStats
	if bs, sum, count, ok := m.Histogram("brp_levering_publication_round_duration_seconds"); ok && count > 0 {
		rs.Count = int(count)
		rs.MeanMs = 1000 * sum / count
		rs.P50Ms = 1000 * rig.Quantile(0.50, bs)
		rs.P95Ms = 1000 * rig.Quantile(0.95, bs)
	}
	var ms, full []float64
	published := 0
	for _, l := range lines {
		if l.published == 0 {
			continue
		}
		ms = append(ms, l.ms)
		published += l.published
		if l.published >= 500 {
			full = append(full, l.ms)
		}
	}
	rs.LogCount = len(ms)
	if len(ms) > 0 {
		rs.LogP50Ms = percentile(ms, 0.50)
		rs.LogP95Ms = percentile(ms, 0.95)
		rs.LogMaxMs = percentile(ms, 1)
		for _, x := range ms {
			rs.LogSumMs += x
		}
		rs.PublishedAvg = float64(published) / float64(len(ms))
	}
	rs.FullRounds = len(full)
	if len(full) > 0 {
		rs.FullP50Ms = percentile(full, 0.5)
	}
	return rs
}

// drain empties queue, expecting want messages (rig.Drain), and returns their admhnd-ids.
func (b *bench) drain(ctx context.Context, queue string, want int) ([]int64, error) {
	return rig.Drain(ctx, b.bcfg, queue, want)
}

// services records the broker's and PostgreSQL's memory and the bench database's size.
func (b *bench) services(ctx context.Context) {
	s := &b.res.Services
	s.BrokerPID, s.PostgresPID = b.brokerPID, b.pgPID
	if b.brokerPID != 0 {
		s.BrokerRSSMB = rig.RSSMB(b.brokerPID)
		s.BrokerPeakRSSMB = float64(rig.PeakRSSKB(b.brokerPID)) / 1024
	}
	if b.pgPID != 0 {
		s.PostgresPSSMB = float64(rig.TreePSSKB(b.pgPID)) / 1024
		b.samplePSS()
		s.PostgresPeakPSSMB = float64(b.peakPSS) / 1024
	}
	var size int64
	if err := b.db.GetContext(ctx, &size, `select pg_database_size(current_database())`); err == nil {
		s.DatabaseMB = float64(size) / (1 << 20)
	}
}

// cpuMark reads the services' and the machine's CPU counters.
func (b *bench) cpuMark() rig.CPUMark { return rig.MarkCPU(b.brokerPID, b.pgPID) }

// cpuSince splits the CPU time since m0 between the services, the bench and the machine.
func (b *bench) cpuSince(m0 rig.CPUMark) CPUSeconds {
	m := b.cpuMark()
	return CPUSeconds{Wall: m.At.Sub(m0.At).Seconds(), Broker: m.Broker - m0.Broker, Postgres: m.Postgres - m0.Postgres,
		Bench: m.Self - m0.Self, MachineBusy: m.Machine - m0.Machine}
}

func (b *bench) samplePSS() {
	if b.pgPID != 0 {
		b.peakPSS = max(b.peakPSS, rig.TreePSSKB(b.pgPID))
	}
}

// ratios computes the comparisons of the issue at 4 consumers (or the nearest count run).
// headlineConsumers is the consumer count the ratios are taken at: 4, or the nearest run.
func headlineConsumers(ks []int) int {
	at := 4
	for i, k := range ks {
		if i == 0 || abs(k-4) < abs(at-4) {
			at = k
		}
	}
	return at
}

func (b *bench) ratios() {
	r := &b.res.Ratios
	defer b.pairRatios()
	var at *Pipeline
	for i := range b.res.Pipeline {
		p := &b.res.Pipeline[i]
		if p.Error != "" {
			continue
		}
		if at == nil || abs(p.Consumers-4) < abs(at.Consumers-4) {
			at = p
		}
	}
	if at != nil {
		r.At = at.Consumers
		r.RawGoroutines = at.Consumers * levering.DefaultWorkers // the same concurrency
		for _, x := range b.res.Raw {
			if x.Goroutines != r.RawGoroutines || x.Rate == 0 {
				continue
			}
			if x.Batch > 1 {
				r.PipelineVsRawBatch = at.Rate / x.Rate
			} else {
				r.PipelineVsRawSingle = at.Rate / x.Rate
			}
		}
		if b.res.Seed != nil && b.res.Seed.Rate > 0 {
			r.PipelineVsSeed = at.Rate / b.res.Seed.Rate
		}
	}
	var ok []Scale
	for _, s := range b.res.Scale {
		if s.Error == "" && s.Rounds.LogP50Ms > 0 {
			ok = append(ok, s)
		}
	}
	if len(ok) >= 2 {
		first, last := ok[0], ok[len(ok)-1]
		r.ScaleSmallest, r.ScaleLargest = first.History, last.History
		r.ScaleLargestVsFirst = last.Rounds.LogP50Ms / first.Rounds.LogP50Ms
		if first.Isolated.LogP50Ms > 0 && last.Isolated.LogP50Ms > 0 {
			r.ScaleIsolated = last.Isolated.LogP50Ms / first.Isolated.LogP50Ms
		}
	}
}

// pairRatios takes the ratios with the raw ceiling and seed mode from the medians of the
// pairs, when there are any: measured in turn, they are not skewed by drift of the machine.
func (b *bench) pairRatios() {
	r := &b.res.Ratios
	var ps, rs, ras []float64
	for _, p := range b.res.Pairs {
		if p.Error == "" && p.Pipeline > 0 && p.Raw > 0 && p.RawAckPerBatch > 0 {
			ps, rs, ras = append(ps, p.Pipeline), append(rs, p.Raw), append(ras, p.RawAckPerBatch)
		}
	}
	if len(ps) == 0 {
		return
	}
	r.At = headlineConsumers(b.o.consumers)
	r.RawGoroutines = r.At * levering.DefaultWorkers
	r.PairsPipeline, r.PairsRaw = median(ps), median(rs)
	r.PipelineVsRawBatch = r.PairsPipeline / r.PairsRaw
	r.PairsRawAckPerBatch = median(ras)
	r.PipelineVsRawAckPerBatch = r.PairsPipeline / r.PairsRawAckPerBatch
	if b.res.Seed != nil && b.res.Seed.Rate > 0 {
		r.PipelineVsSeed = r.PairsPipeline / b.res.Seed.Rate
	}
	if x := rawAt(b.res, false, r.RawGoroutines); x != nil && x.Rate > 0 {
		r.PipelineVsRawSingle = r.PairsPipeline / x.Rate
	}
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// percentile of xs (not modified) with linear interpolation between closest ranks.
func percentile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), xs...)
	slices.Sort(s)
	pos := q * float64(len(s)-1)
	lo := int(math.Floor(pos))
	hi := int(math.Ceil(pos))
	if lo == hi {
		return s[lo]
	}
	return s[lo] + (s[hi]-s[lo])*(pos-float64(lo))
}
