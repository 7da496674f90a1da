package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is one publicatie or mutatielevering process: its JSON log goes to a file and is
// scanned for the few lines the bench needs (readiness, the HTTP address, round times).
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error

	mu       sync.Mutex
	seen     map[string]int
	httpAddr string
	rounds   []roundLine
	tail     []string
	warnings []string // WARN and ERROR lines
}

type roundLine struct {
	ms        float64
	published int
}

// startProc runs bin with env (complete), its output to logFile.
func startProc(name, bin string, env []string, logFile string) (*proc, error) {
	f, err := os.Create(logFile)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin)
	cmd.Env = env
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s (build it with scripts/bench.sh): %w", bin, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{}), seen: map[string]int{}}
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			f.Write(line)
			f.Write([]byte{'\n'})
			p.add(line)
		}
		io.Copy(io.Discard, pr)
	}()
	go func() {
		p.err = cmd.Wait()
		pw.Close()
		<-scanned
		f.Close()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) add(line []byte) {
	var m struct {
		Level     string  `json:"level"`
		Error     string  `json:"error"`
		Msg       string  `json:"msg"`
		HTTPAddr  string  `json:"http_addr"`
		Duration  float64 `json:"duration"`
		Published int     `json:"published"`
	}
	_ = json.Unmarshal(line, &m)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tail = append(p.tail, string(line))
	if len(p.tail) > 30 {
		p.tail = p.tail[1:]
	}
	if m.Msg == "" {
		return
	}
	p.seen[m.Msg]++
	if m.Level == "WARN" || m.Level == "ERROR" {
		w := m.Level + " " + m.Msg
		if m.Error != "" {
			w += ": " + m.Error
		}
		p.warnings = append(p.warnings, w)
	}
	switch m.Msg {
	case "http listening":
		p.httpAddr = m.HTTPAddr
	case "round committed":
		// slog's JSON handler writes a Duration as nanoseconds.
		p.rounds = append(p.rounds, roundLine{ms: m.Duration / 1e6, published: m.Published})
	}
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// waitLog waits until the process has logged msg; it fails early when the process ended.
func (p *proc) waitLog(ctx context.Context, msg string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		p.mu.Lock()
		n := p.seen[msg]
		p.mu.Unlock()
		switch {
		case n > 0:
			return nil
		case p.exited():
			return fmt.Errorf("%s exited (%v) before logging %q:\n%s", p.name, p.err, msg, p.lastLines())
		case time.Now().After(deadline):
			return fmt.Errorf("%s has not logged %q after %v", p.name, msg, timeout)
		case ctx.Err() != nil:
			return ctx.Err()
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (p *proc) lastLines() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.tail, "\n")
}

func (p *proc) warningLines() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.warnings)
}

func (p *proc) addr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.httpAddr
}

func (p *proc) roundLines() []roundLine {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.rounds)
}

// metrics scrapes the process's /metrics.
func (p *proc) metrics(ctx context.Context) (promText, error) {
	a := p.addr()
	if a == "" {
		return nil, fmt.Errorf("%s: no http listener seen in its log", p.name)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+a+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return parseProm(string(b)), nil
}

// stat reads the process's peak RSS and CPU time so far; call it right before stopping it.
func (p *proc) stat() ProcStat {
	st := ProcStat{Name: p.name, PID: p.pid()}
	st.PeakRSSMB = float64(statusKB(p.pid(), "VmHWM")) / 1024
	if c, err := cpuOf(p.pid()); err == nil {
		st.CPUSeconds = c.self()
	}
	return st
}

// stopAll sends SIGTERM to every process and waits (bounded) for each; it reports whether all
// exited 0.
func stopAll(procs []*proc) error {
	for _, p := range procs {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	var errs []error
	for _, p := range procs {
		select {
		case <-p.done:
			if p.err != nil {
				errs = append(errs, fmt.Errorf("%s ended: %v", p.name, p.err))
			}
		case <-time.After(20 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
			errs = append(errs, fmt.Errorf("%s did not stop within 20s after SIGTERM; killed", p.name))
		}
	}
	return errors.Join(errs...)
}

// killAll is the emergency stop (bench interrupted or failed).
func killAll(procs []*proc) {
	for _, p := range procs {
		if !p.exited() {
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
}

// ---------------------------------------------------------------- Prometheus text

// promText maps a sample's name with labels (as written, e.g. `x_bucket{le="0.001"}`) to its
// value.
type promText map[string]float64

func parseProm(s string) promText {
	out := promText{}
	for _, line := range strings.Split(s, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] = v
	}
	return out
}

type bucket struct{ le, count float64 }

// histogram returns the cumulative buckets (ascending, +Inf last), sum and count of name.
func (t promText) histogram(name string) (bs []bucket, sum, count float64, ok bool) {
	prefix := name + `_bucket{le="`
	for k, v := range t {
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		le, err := strconv.ParseFloat(strings.TrimSuffix(k[len(prefix):], `"}`), 64)
		if err != nil {
			continue
		}
		bs = append(bs, bucket{le, v})
	}
	slices.SortFunc(bs, func(a, b bucket) int {
		switch {
		case a.le < b.le:
			return -1
		case a.le > b.le:
			return 1
		}
		return 0
	})
	sum, okS := t[name+"_sum"]
	count, okC := t[name+"_count"]
	return bs, sum, count, okS && okC && len(bs) > 0
}

// bucketQuantile is Prometheus's histogram_quantile: linear interpolation inside the bucket
// that holds the q-th observation; the highest finite bound when it falls in +Inf.
func bucketQuantile(q float64, bs []bucket) float64 {
	if len(bs) == 0 {
		return math.NaN()
	}
	total := bs[len(bs)-1].count
	if total == 0 {
		return math.NaN()
	}
	rank := q * total
	prevLe, prevCount := 0.0, 0.0
	for _, b := range bs {
		if b.count >= rank {
			if math.IsInf(b.le, 1) {
				return prevLe
			}
			if b.count == prevCount {
				return b.le
			}
			return prevLe + (b.le-prevLe)*(rank-prevCount)/(b.count-prevCount)
		}
		prevLe, prevCount = b.le, b.count
	}
	return prevLe
}

// ---------------------------------------------------------------- /proc

const clockTick = 100.0 // USER_HZ on Linux

// statusKB reads a "Name:   123 kB" line of /proc/<pid>/status.
func statusKB(pid int, key string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n
			}
		}
	}
	return 0
}

// pssKB reads the proportional set size of a process (shared pages divided among sharers).
func pssKB(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Pss:"); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n
			}
		}
	}
	return 0
}

type procCPU struct {
	utime, stime, cutime, cstime float64 // seconds
	ppid                         int
}

func (c procCPU) self() float64     { return c.utime + c.stime }
func (c procCPU) withDead() float64 { return c.utime + c.stime + c.cutime + c.cstime }

func cpuOf(pid int) (procCPU, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procCPU{}, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procCPU{}, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state)
	if len(f) < 15 {
		return procCPU{}, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	num := func(j int) float64 { v, _ := strconv.ParseFloat(f[j], 64); return v / clockTick }
	ppid, _ := strconv.Atoi(f[1])
	return procCPU{utime: num(11), stime: num(12), cutime: num(13), cstime: num(14), ppid: ppid}, nil
}

// children lists the pids whose parent is pid.
func children(pid int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if c, err := cpuOf(n); err == nil && c.ppid == pid {
			out = append(out, n)
		}
	}
	return out
}

// treeCPU is the CPU time of pid, its reaped children, and its live children.
func treeCPU(pid int) float64 {
	if pid == 0 {
		return 0
	}
	c, err := cpuOf(pid)
	if err != nil {
		return 0
	}
	total := c.withDead()
	for _, ch := range children(pid) {
		if cc, err := cpuOf(ch); err == nil {
			total += cc.self()
		}
	}
	return total
}

// treePSS is the PSS of pid and its live children in kB.
func treePSS(pid int) int64 {
	if pid == 0 {
		return 0
	}
	total := pssKB(pid)
	for _, ch := range children(pid) {
		total += pssKB(ch)
	}
	return total
}

// machineBusy is the busy CPU time of all CPUs in seconds since boot (/proc/stat).
func machineBusy() float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return 0
	}
	var total, idle float64
	for i, v := range f[1:] {
		x, _ := strconv.ParseFloat(v, 64)
		if i < 8 { // user nice system idle iowait irq softirq steal (guest is in user already)
			total += x
		}
		if i == 3 || i == 4 {
			idle += x
		}
	}
	return (total - idle) / clockTick
}

// cpuMark is a snapshot of the shared services' and the machine's CPU counters.
type cpuMark struct {
	at                        time.Time
	broker, postgres, machine float64
	self                      float64
}

func markCPU(brokerPID, pgPID int) cpuMark {
	m := cpuMark{at: time.Now(), broker: treeCPU(brokerPID), postgres: treeCPU(pgPID), machine: machineBusy()}
	if c, err := cpuOf(os.Getpid()); err == nil {
		m.self = c.self()
	}
	return m
}

// since fills the shares of the services, the bench and the machine between m0 and m.
func (m cpuMark) since(m0 cpuMark) CPUSeconds {
	return CPUSeconds{Wall: m.at.Sub(m0.at).Seconds(), Broker: m.broker - m0.broker, Postgres: m.postgres - m0.postgres,
		Bench: m.self - m0.self, MachineBusy: m.machine - m0.machine}
}

// findBroker finds the ActiveMQ JVM started by scripts/services.sh for the STOMP port.
func findBroker(stompAddr string) int {
	_, port, _ := strings.Cut(stompAddr, ":")
	want := "-Dbrp.stomp.port=" + port
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		for _, arg := range strings.Split(string(b), "\x00") {
			if arg == want {
				return pid
			}
		}
	}
	return 0
}
