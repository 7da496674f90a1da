package rig

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain lets the test binary stand in for a child process: started with RIG_TEST_SLEEP set
// (Cmd runs a binary without arguments), it only waits to be killed.
func TestMain(m *testing.M) {
	if os.Getenv("RIG_TEST_SLEEP") != "" {
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// burn uses about d of CPU time in this process.
func burn(d time.Duration) {
	start, x := time.Now(), 1.0
	for time.Since(start) < d {
		for i := 0; i < 1e5; i++ {
			x = math.Sqrt(x + float64(i))
		}
	}
	_ = x
}

// burnCPU keeps this process busy until the kernel has counted d of its CPU time (getrusage,
// which the functions under test do not use), whatever else the machine runs: on a busy
// machine 0.3 s of wall time burning may be 0.1 s of CPU or less. At most a minute.
func burnCPU(t *testing.T, d time.Duration) {
	t.Helper()
	used := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	until, deadline := used()+d, time.Now().Add(time.Minute)
	for used() < until && time.Now().Before(deadline) {
		burn(10 * time.Millisecond)
	}
}

// statusKB reads "key: n kB" of /proc/<pid>/status by hand, to check procfs against.
func statusKB(t *testing.T, pid int, key string) float64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), key+":"); ok {
			var n float64
			if _, err := fmt.Sscan(v, &n); err != nil {
				t.Fatalf("%s: %v", key, err)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", key, pid)
	return 0
}

// The test process's own /proc: memory, CPU time, the machine's busy time.
func TestProcOfThisProcess(t *testing.T) {
	self := os.Getpid()
	if rss := RSSMB(self); rss < 1 || rss > 64<<10 {
		t.Errorf("RSSMB(self) = %v MB, want between 1 MB and 64 GB", rss)
	}
	before, err := ProcessCPU(self)
	if err != nil {
		t.Fatal(err)
	}
	m0 := MarkCPU(0, 0)
	burnCPU(t, 300*time.Millisecond)
	after, err := ProcessCPU(self)
	if err != nil {
		t.Fatal(err)
	}
	m1 := MarkCPU(0, 0)
	if d := after - before; d < 0.1 || d > 60 {
		t.Errorf("ProcessCPU(self) moved by %v s over 0.3 s of this process's CPU, want about 0.3", d)
	}
	if m1.Broker != 0 || m1.Postgres != 0 {
		t.Errorf("MarkCPU(0, 0) = %+v: pid 0 must count nothing", m1)
	}
	if d := m1.Self - m0.Self; d < 0.1 {
		t.Errorf("MarkCPU's Self moved by %v s over 0.3 s of this process's CPU", d)
	}
	if d := m1.Machine - m0.Machine; d < 0.1 || m0.Machine <= 0 {
		t.Errorf("MarkCPU's Machine %v then %v: busy time must grow with this process's", m0.Machine, m1.Machine)
	}
	if tree := treeCPU(self); tree < after {
		t.Errorf("treeCPU(self) = %v, below the process's own %v", tree, after)
	}
	if !slices.Contains(Children(os.Getppid()), self) {
		t.Errorf("Children(%d) = %v, without this process %d", os.Getppid(), Children(os.Getppid()), self)
	}
	if _, err := ProcessCPU(math.MaxInt32); err == nil {
		t.Error("ProcessCPU of a pid that does not exist: no error")
	}
	if rss := RSSMB(math.MaxInt32); rss != 0 {
		t.Errorf("RSSMB of a pid that does not exist = %v, want 0", rss)
	}
}

// A child started with Cmd: its parent, its memory (as /proc/<pid>/status says it), stopped
// and continued.
func TestProcOfAChild(t *testing.T) {
	p, err := Cmd{Name: "sleeper", Bin: os.Args[0], Env: []string{"RIG_TEST_SLEEP=1"}}.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill()
	if !slices.Contains(Children(os.Getpid()), p.PID()) {
		t.Errorf("Children(self) = %v, without the child %d", Children(os.Getpid()), p.PID())
	}
	if p.Frozen() {
		t.Error("a running child is Frozen")
	}
	p.Signal(syscall.SIGSTOP)
	waitFor(t, "child stopped", p.Frozen)
	// Stopped, its memory holds still: procfs reads what the file says.
	if got, want := p.PeakRSSMB(), statusKB(t, p.PID(), "VmHWM")/1024; got != want || got <= 0 {
		t.Errorf("PeakRSSMB = %v, /proc/%d/status VmHWM = %v MB", got, p.PID(), want)
	}
	if got, want := RSSMB(p.PID()), statusKB(t, p.PID(), "VmRSS")/1024; got != want || got <= 0 {
		t.Errorf("RSSMB = %v, /proc/%d/status VmRSS = %v MB", got, p.PID(), want)
	}
	if c := p.CPUSeconds(); c < 0 || c > 60 {
		t.Errorf("CPUSeconds = %v", c)
	}
	p.Signal(syscall.SIGCONT)
	waitFor(t, "child continued", func() bool { return !p.Frozen() })
	p.Kill()
	if p.Frozen() || p.CPUSeconds() != 0 || p.PeakRSSMB() != 0 {
		t.Errorf("a reaped child: Frozen %v, CPUSeconds %v, PeakRSSMB %v; want false, 0, 0", p.Frozen(), p.CPUSeconds(), p.PeakRSSMB())
	}
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !ok(); {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 5s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
