package brptest

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/brp/levering/internal/rig"
)

// Proc is a running command (rig.Proc) whose waits fail the test instead of returning errors:
// each takes a timeout where rig.Proc's takes a context, in the same place.
type Proc struct {
	*rig.Proc
	t testing.TB
}

// Start runs bin as rig.Cmd.Start does, with settings (rig.Env) after JSON debug logs and the
// test's layout (Layout). The
// process is killed when the test ends if it still runs.
func Start(t testing.TB, name, bin string, settings ...string) *Proc {
	t.Helper()
	NeedsServices(t)
	env := append([]string{"BRP_LOG_LEVEL=debug", "BRP_DATABASE_LAYOUT=" + string(Layout().Or())}, settings...)
	p, err := rig.Cmd{Name: name, Bin: bin, Env: env}.Start()
	if err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			dump(t, p)
		}
	})
	return &Proc{Proc: p, t: t}
}

// dump logs the process's last lines above debug level, plus its last debug line: debug lines
// (one per delivered handeling, one per round) would push the failure out of a CI log's tail.
func dump(t testing.TB, p *rig.Proc) {
	var kept []string
	debug, lastDebug := 0, ""
	for _, l := range p.Output() {
		if strings.Contains(l, `"level":"DEBUG"`) {
			debug++
			lastDebug = l
			continue
		}
		kept = append(kept, l)
	}
	from := max(0, len(kept)-30)
	t.Logf("%s: last %d of %d lines above debug level (%d debug lines left out, the last one: %s):\n%s",
		p.Name, len(kept)-from, len(kept), debug, lastDebug, strings.Join(kept[from:], "\n"))
}

// within runs f with a context that ends after timeout and fails the test on its error.
func (p *Proc) within(timeout time.Duration, f func(ctx context.Context) error) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := f(ctx); err != nil {
		p.t.Fatal(err)
	}
}

// WaitLog waits at most timeout for a log line with the given msg and returns it.
func (p *Proc) WaitLog(timeout time.Duration, msg string) map[string]any {
	p.t.Helper()
	var line map[string]any
	p.within(timeout, func(ctx context.Context) (err error) {
		line, err = p.Proc.WaitLog(ctx, msg)
		return err
	})
	return line
}

// WaitReady waits until the process's /readyz answers 200 (a consumer: subscribed; a
// publisher: it reaches its database and broker, leading or following).
func (p *Proc) WaitReady(timeout time.Duration) {
	p.t.Helper()
	p.within(timeout, p.Proc.WaitReady)
}

// WaitLeader waits until a publisher's /readyz says it leads and returns when that was seen.
func (p *Proc) WaitLeader(timeout time.Duration) time.Time {
	p.t.Helper()
	var at time.Time
	p.within(timeout, func(ctx context.Context) (err error) {
		at, err = p.Proc.WaitLeader(ctx)
		return err
	})
	return at
}

// HTTPAddr waits for the process's status listener and returns its address.
func (p *Proc) HTTPAddr() string {
	return fmtString(p.WaitLog(20*time.Second, "http listening")["http_addr"])
}

// OperateAddr waits for the process's operator listener (BRP_OPERATE_ADDR) and returns its
// address.
func (p *Proc) OperateAddr() string {
	return fmtString(p.WaitLog(20*time.Second, "operator pages listening")["operate_addr"])
}

func fmtString(v any) string { s, _ := v.(string); return s }

// AppNamePrefix begins the application_name of the process's database sessions as command
// (dbsession.AppName: command[pid]@host).
func (p *Proc) AppNamePrefix(command string) string {
	return command + "[" + strconv.Itoa(p.PID()) + "]@"
}
