package rig

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// What /proc says about processes (Linux): CPU time, memory, the machine's busy time.

const clockTick = 100.0 // USER_HZ on Linux

// PeakRSSMB is the process's peak resident memory so far (VmHWM), in MB.
func (p *Proc) PeakRSSMB() float64 { return float64(statusKB(p.PID(), "VmHWM")) / 1024 }

// RSSMB is the process's resident memory now (VmRSS), in MB.
func RSSMB(pid int) float64 { return float64(statusKB(pid, "VmRSS")) / 1024 }

// CPUSeconds is the process's CPU time so far (user and system).
func (p *Proc) CPUSeconds() float64 {
	c, err := cpuOf(p.PID())
	if err != nil {
		return 0
	}
	return c.self()
}

// statusKB reads a "Name:   123 kB" line of /proc/<pid>/status.
func statusKB(pid int, key string) int64 {
	return procField(fmt.Sprintf("/proc/%d/status", pid), key)
}

// procField reads the first number of the line "key: n ..." of a /proc file.
func procField(file, key string) int64 {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			if f := strings.Fields(v); len(f) > 0 {
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
		return procCPU{}, fmt.Errorf("rig: %w", err)
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procCPU{}, fmt.Errorf("rig: /proc/%d/stat: unexpected format", pid)
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state)
	if len(f) < 15 {
		return procCPU{}, fmt.Errorf("rig: /proc/%d/stat: too few fields", pid)
	}
	num := func(j int) float64 { v, _ := strconv.ParseFloat(f[j], 64); return v / clockTick }
	ppid, _ := strconv.Atoi(f[1])
	return procCPU{utime: num(11), stime: num(12), cutime: num(13), cstime: num(14), ppid: ppid}, nil
}

// ProcessCPU is the CPU seconds pid itself has used (user and system; to the clock tick).
func ProcessCPU(pid int) (float64, error) {
	c, err := cpuOf(pid)
	return c.self(), err
}

// Children lists the pids whose parent is pid.
func Children(pid int) []int {
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

// treeCPU is the CPU seconds of pid, its reaped children and its live children (0: none).
func treeCPU(pid int) float64 {
	if pid == 0 {
		return 0
	}
	c, err := cpuOf(pid)
	if err != nil {
		return 0
	}
	total := c.withDead()
	for _, ch := range Children(pid) {
		if cc, err := cpuOf(ch); err == nil {
			total += cc.self()
		}
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
	if c, err := cpuOf(os.Getpid()); err == nil {
		m.Self = c.self()
	}
	return m
}

// Frozen reports whether the process is stopped (SIGSTOP): state T in /proc.
func (p *Proc) Frozen() bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(p.PID()) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses, which may itself contain spaces.
	_, rest, _ := strings.Cut(string(b), ") ")
	return strings.HasPrefix(rest, "T")
}
