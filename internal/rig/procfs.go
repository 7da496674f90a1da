package rig

import (
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/prometheus/procfs"
)

// What /proc says about processes (Linux): CPU time, memory, the machine's busy time, read
// with github.com/prometheus/procfs (which converts clock ticks at USER_HZ = 100, as Linux
// reports them, and kB to bytes).

// procFS is /proc, opened once.
var procFS = sync.OnceValues(procfs.NewDefaultFS)

const mb = 1 << 20

// stat reads /proc/<pid>/stat.
func stat(pid int) (procfs.ProcStat, error) {
	fs, err := procFS()
	if err != nil {
		return procfs.ProcStat{}, fmt.Errorf("rig: %w", err)
	}
	p, err := fs.Proc(pid)
	if err != nil {
		return procfs.ProcStat{}, fmt.Errorf("rig: %w", err)
	}
	s, err := p.Stat()
	if err != nil {
		return procfs.ProcStat{}, fmt.Errorf("rig: %w", err)
	}
	return s, nil
}

// status reads /proc/<pid>/status; the zero value when it cannot (the process is gone).
func status(pid int) procfs.ProcStatus {
	fs, err := procFS()
	if err != nil {
		return procfs.ProcStatus{}
	}
	p, err := fs.Proc(pid)
	if err != nil {
		return procfs.ProcStatus{}
	}
	s, _ := p.NewStatus()
	return s
}

// PeakRSSMB is the process's peak resident memory so far (VmHWM), in MB.
func (p *Proc) PeakRSSMB() float64 { return float64(status(p.PID()).VmHWM) / mb }

// RSSMB is the process's resident memory now (VmRSS), in MB.
func RSSMB(pid int) float64 { return float64(status(pid).VmRSS) / mb }

// CPUSeconds is the process's CPU time so far (user and system).
func (p *Proc) CPUSeconds() float64 {
	s, err := stat(p.PID())
	if err != nil {
		return 0
	}
	return s.CPUTime()
}

// ProcessCPU is the CPU seconds pid itself has used (user and system; to the clock tick).
func ProcessCPU(pid int) (float64, error) {
	s, err := stat(pid)
	if err != nil {
		return 0, err
	}
	return s.CPUTime(), nil
}

// Children lists the pids whose parent is pid.
func Children(pid int) []int {
	fs, err := procFS()
	if err != nil {
		return nil
	}
	all, _ := fs.AllProcs()
	var out []int
	for _, p := range all {
		if s, err := p.Stat(); err == nil && s.PPID == pid {
			out = append(out, p.PID)
		}
	}
	return out
}

// treeCPU is the CPU seconds of pid, its reaped children and its live children (0: none).
func treeCPU(pid int) float64 {
	if pid == 0 {
		return 0
	}
	s, err := stat(pid)
	if err != nil {
		return 0
	}
	// CPUTime is utime and stime; the reaped children's cutime and cstime are in ticks.
	total := s.CPUTime() + float64(s.CUTime+s.CSTime)/userHZ
	for _, ch := range Children(pid) {
		if cs, err := stat(ch); err == nil {
			total += cs.CPUTime()
		}
	}
	return total
}

// userHZ is the clock tick of /proc/<pid>/stat's times on Linux (procfs divides by it too).
const userHZ = 100.0

// machineBusy is the busy CPU time of all CPUs in seconds since boot (/proc/stat): user, nice,
// system, irq, softirq and steal (guest time is counted in user already; idle and iowait are
// not busy).
func machineBusy() float64 {
	fs, err := procFS()
	if err != nil {
		return 0
	}
	st, err := fs.Stat()
	if err != nil {
		return 0
	}
	c := st.CPUTotal // in seconds
	return c.User + c.Nice + c.System + c.IRQ + c.SoftIRQ + c.Steal
}

// CPUMark is a snapshot of the services' and the machine's CPU counters.
type CPUMark struct {
	At                        time.Time
	Broker, Postgres, Machine float64
	Self                      float64 // this process
}

// MarkCPU reads the counters of the broker's and the PostgreSQL server's process trees (pid 0:
// not on this machine), the machine's and this process's.
func MarkCPU(brokerPID, pgPID int) CPUMark {
	m := CPUMark{At: time.Now(), Broker: treeCPU(brokerPID), Postgres: treeCPU(pgPID), Machine: machineBusy()}
	if s, err := stat(os.Getpid()); err == nil {
		m.Self = s.CPUTime()
	}
	return m
}

// Frozen reports whether the process is stopped (SIGSTOP): state T in /proc/<pid>/stat.
func (p *Proc) Frozen() bool {
	s, err := stat(p.PID())
	return err == nil && s.State == "T"
}
