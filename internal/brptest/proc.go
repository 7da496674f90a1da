package brptest

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/brp/levering/broker"
)

// Proc is a running command whose JSON log lines are kept for the test to inspect.
type Proc struct {
	t    testing.TB
	Name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error

	mu    sync.Mutex
	lines []map[string]any
	raw   []string
}

// Start runs bin with env added to a clean environment (no inherited BRP_ variables) and JSON
// debug logs. The process is killed when the test ends if it still runs.
func Start(t testing.TB, name, bin string, env ...string) *Proc {
	t.Helper()
	cmd := exec.Command(bin)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "BRP_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "BRP_LOG_FORMAT=json", "BRP_LOG_LEVEL=debug", "BRP_HTTP_ADDR=127.0.0.1:0")
	cmd.Env = append(cmd.Env, env...)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	p := &Proc{t: t, Name: name, cmd: cmd, done: make(chan struct{})}
	scanDone := make(chan struct{})
	go func() {
		defer close(scanDone)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			p.add(sc.Text())
		}
	}()
	go func() {
		p.err = cmd.Wait()
		pw.Close()
		<-scanDone
		close(p.done)
	}()
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			p.dump()
		}
	})
	return p
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

// dump logs the process's last lines above debug level, plus its last debug line: debug lines
// (one per delivered handeling, one per round) would push the failure out of a CI log's tail.
func (p *Proc) dump() {
	p.mu.Lock()
	defer p.mu.Unlock()
	var kept []string
	debug, lastDebug := 0, ""
	for _, l := range p.raw {
		if strings.Contains(l, `"level":"DEBUG"`) {
			debug++
			lastDebug = l
			continue
		}
		kept = append(kept, l)
	}
	from := max(0, len(kept)-30)
	p.t.Logf("%s: last %d of %d lines above debug level (%d debug lines left out, the last one: %s):\n%s",
		p.Name, len(kept)-from, len(kept), debug, lastDebug, strings.Join(kept[from:], "\n"))
}

// Output returns every line the process wrote so far, as written.
func (p *Proc) Output() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.raw...)
}

// Lines returns the log lines whose msg is msg, each with "_at" (when the test read it).
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

// WaitLog waits for a log line with the given msg and returns it.
func (p *Proc) WaitLog(msg string, timeout time.Duration) map[string]any {
	p.t.Helper()
	var line map[string]any
	Eventually(p.t, timeout, func() error {
		if ls := p.Lines(msg); len(ls) > 0 {
			line = ls[0]
			return nil
		}
		if p.Exited() {
			return fmt.Errorf("%s exited (%v) before logging %q", p.Name, p.err, msg)
		}
		return fmt.Errorf("%s has not logged %q", p.Name, msg)
	})
	return line
}

// HTTPAddr waits for the process's status listener and returns its address.
func (p *Proc) HTTPAddr() string {
	return p.WaitLog("http listening", 20*time.Second)["http_addr"].(string)
}

// OperateAddr waits for the process's operator listener (BRP_OPERATE_ADDR) and returns its
// address.
func (p *Proc) OperateAddr() string {
	return p.WaitLog("operator pages listening", 20*time.Second)["operate_addr"].(string)
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

// Frozen reports whether the process is stopped (SIGSTOP): state T in /proc.
func (p *Proc) Frozen() bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(p.cmd.Process.Pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses, which may itself contain spaces.
	_, rest, _ := strings.Cut(string(b), ") ")
	return strings.HasPrefix(rest, "T")
}

// AppNamePrefix begins the application_name of the process's database sessions as command
// (dbsession.AppName: command[pid]@host).
func (p *Proc) AppNamePrefix(command string) string {
	return command + "[" + strconv.Itoa(p.cmd.Process.Pid) + "]@"
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

// Env is the environment a test's processes share: its database and its queues, on the
// tests' broker.
func Env(dbURL string, q Queues, extra ...string) []string {
	return EnvFor(Broker(), dbURL, q, extra...)
}

// EnvFor is Env on the broker of b.
func EnvFor(b broker.Config, dbURL string, q Queues, extra ...string) []string {
	env := []string{
		"BRP_DATABASE_URL=" + dbURL,
		"BRP_STOMP_ADDR=" + b.Addr,
		"BRP_STOMP_LOGIN=" + b.Login,
		"BRP_STOMP_PASSCODE=" + b.Passcode,
		"BRP_STOMP_HOST=" + b.Host,
		"BRP_LEVERING_ADMHNDPUBLICATIE_QUEUE=" + q.Publicatie,
		"BRP_LEVERING_VERZENDING_QUEUE=" + q.Verzending,
		"BRP_LEVERING_MUTATIELEVERING_DLQ=" + q.DLQ,
	}
	return append(env, extra...)
}
