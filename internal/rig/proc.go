package rig

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Cmd says how to start a process.
type Cmd struct {
	Name string // for messages: "publicatie", "mutatielevering-2"
	Bin  string // the binary
	// Env is the process's settings (see Env), added to a clean environment (Environ).
	Env []string
	// LogFile, when set, receives every line the process writes.
	LogFile string
}

// Proc is a running command whose output lines (JSON log lines) are kept for inspection.
type Proc struct {
	Name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error

	mu    sync.Mutex
	lines []map[string]any // the JSON lines, each with "_at": when it was read
	raw   []string
}

// Start runs c.
func (c Cmd) Start() (*Proc, error) {
	var logFile *os.File
	if c.LogFile != "" {
		f, err := os.Create(c.LogFile)
		if err != nil {
			return nil, fmt.Errorf("rig: %w", err)
		}
		logFile = f
	}
	cmd := exec.Command(c.Bin)
	cmd.Env = Environ(c.Env...)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		if logFile != nil {
			logFile.Close()
		}
		return nil, fmt.Errorf("rig: start %s: %w", c.Bin, err)
	}
	p := &Proc{Name: c.Name, cmd: cmd, done: make(chan struct{})}
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if logFile != nil {
				_, _ = logFile.Write(append(sc.Bytes(), '\n'))
			}
			p.add(sc.Text())
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	go func() {
		p.err = cmd.Wait()
		pw.Close()
		<-scanned
		if logFile != nil {
			logFile.Close()
		}
		close(p.done)
	}()
	return p, nil
}

func (p *Proc) add(line string) {
	var m map[string]any
	_ = json.Unmarshal([]byte(line), &m)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.raw = append(p.raw, line)
	if m != nil {
		m["_at"] = time.Now()
		p.lines = append(p.lines, m)
	}
}

// PID is the process's id.
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// Output returns every line the process wrote so far, as written.
func (p *Proc) Output() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.raw...)
}

// Tail returns the process's last n lines, one per line.
func (p *Proc) Tail(n int) string {
	out := p.Output()
	return strings.Join(out[max(0, len(out)-n):], "\n")
}

// Lines returns the log lines whose msg is msg, each with "_at" (when it was read).
func (p *Proc) Lines(msg string) []map[string]any {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []map[string]any
	for _, l := range p.lines {
		if l["msg"] == msg {
			out = append(out, l)
		}
	}
	return out
}

// Warnings returns the WARN and ERROR lines as "LEVEL msg: error".
func (p *Proc) Warnings() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, l := range p.lines {
		if level := fmt.Sprint(l["level"]); level == "WARN" || level == "ERROR" {
			w := level + " " + fmt.Sprint(l["msg"])
			if e, ok := l["error"]; ok {
				w += ": " + fmt.Sprint(e)
			}
			out = append(out, w)
		}
	}
	return out
}

// WaitLog waits until ctx ends for a log line whose msg is msg and returns the first one; it
// fails early when the process ends.
func (p *Proc) WaitLog(ctx context.Context, msg string) (map[string]any, error) {
	for {
		if ls := p.Lines(msg); len(ls) > 0 {
			return ls[0], nil
		}
		if p.Exited() {
			return nil, fmt.Errorf("%s exited (%v) before logging %q:\n%s", p.Name, p.err, msg, p.Tail(30))
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%s has not logged %q: %w", p.Name, msg, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Signal sends sig to the process.
func (p *Proc) Signal(sig syscall.Signal) {
	if p.cmd.Process != nil {
		_ = p.cmd.Process.Signal(sig)
	}
}

// Kill sends SIGKILL and waits for the process to be gone.
func (p *Proc) Kill() {
	p.Signal(syscall.SIGKILL)
	<-p.done
}

// Exited reports whether the process has ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Err is how the process ended (nil: exit 0, or still running).
func (p *Proc) Err() error {
	if !p.Exited() {
		return nil
	}
	return p.err
}

// ExitedEarly returns an error naming the first of procs that has ended, with its last lines.
func ExitedEarly(procs ...*Proc) error {
	for _, p := range procs {
		if p.Exited() {
			return fmt.Errorf("%s exited (%v):\n%s", p.Name, p.err, p.Tail(30))
		}
	}
	return nil
}

// Wait waits up to timeout for the process to end and returns its exit code (-1: signal).
func (p *Proc) Wait(timeout time.Duration) (int, error) {
	select {
	case <-p.done:
	case <-time.After(timeout):
		return 0, fmt.Errorf("%s still runs after %v", p.Name, timeout)
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode(), nil
	}
	return 0, p.err
}

// StopAll sends SIGTERM to every process and waits up to timeout for each, killing those that
// stay; it returns an error for each that did not exit 0.
func StopAll(timeout time.Duration, procs ...*Proc) error {
	for _, p := range procs {
		p.Signal(syscall.SIGTERM)
	}
	var errs []error
	for _, p := range procs {
		select {
		case <-p.done:
			if p.err != nil {
				errs = append(errs, fmt.Errorf("%s ended: %w", p.Name, p.err))
			}
		case <-time.After(timeout):
			p.Kill()
			errs = append(errs, fmt.Errorf("%s did not stop within %v after SIGTERM; killed", p.Name, timeout))
		}
	}
	return errors.Join(errs...)
}
