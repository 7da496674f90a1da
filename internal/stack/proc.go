package stack

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// portOpen reports whether something accepts TCP connections on 127.0.0.1:port.
func portOpen(port int) bool {
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), 2*time.Second)
	if err == nil {
		c.Close()
	}
	return err == nil
}

// stompPing reports whether 127.0.0.1:port answers a STOMP CONNECT with CONNECTED. RabbitMQ
// takes host as its virtual host and wants a login.
func stompPing(port int, host, login, passcode string) bool {
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), 2*time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(4 * time.Second))
	frame := "CONNECT\naccept-version:1.2\nhost:" + host + "\n"
	if login != "" {
		frame += "login:" + login + "\npasscode:" + passcode + "\n"
	}
	if _, err := io.WriteString(c, frame+"\n\x00"); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "CONNECTED") {
		return false
	}
	_, _ = io.WriteString(c, "DISCONNECT\n\n\x00")
	return true
}

// alive reports whether process pid runs: it exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] != 'Z'
}

// pids lists the live processes for which match says yes.
func pids(match func(pid int) bool) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err == nil && pid != os.Getpid() && match(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// procList reads a NUL-separated /proc file (cmdline, environ) of pid.
func procList(pid int, file string) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, file))
	if err != nil {
		return nil
	}
	return strings.Split(string(b), "\x00")
}

func procComm(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(b))
}

// readPID reads the first line of a pid file.
func readPID(path string) (int, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	return pid, err == nil
}

func writePID(path string, pid int) error {
	return os.WriteFile(path, []byte(strconv.Itoa(pid)+"\n"), 0o644)
}

// size is the length of a file, 0 when it does not exist: where a start's log lines begin.
func size(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// logged reports whether the file, from byte offset from on, has a line matching re.
func logged(path string, from int64, re *regexp.Regexp) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return false
	}
	b, _ := io.ReadAll(f)
	return re.Match(b)
}

// tail is the last lines of a file, framed, for an error message; "" when it is empty.
func tail(path string, lines int) string {
	b, err := os.ReadFile(path)
	if err != nil || len(b) == 0 {
		return ""
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return fmt.Sprintf("\n----- last lines of %s -----\n%s\n-----", path, strings.Join(all[max(0, len(all)-lines):], "\n"))
}

// waitFor polls check every 200 ms until it says yes (nil), gone says the process has ended
// (an error), or timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, check func() bool, gone func() error) error {
	deadline := time.Now().Add(timeout)
	for !check() {
		if err := gone(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not after %v", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil
}

// stopPIDs sends SIGTERM to term, waits until list says none is left or grace passes, then
// sends SIGKILL to what is left and waits 10 s more.
func stopPIDs(ctx context.Context, term []int, list func() []int, grace time.Duration, onKill func()) error {
	for _, p := range term {
		_ = syscall.Kill(p, syscall.SIGTERM)
	}
	none := func() bool { return len(list()) == 0 }
	nothing := func() error { return nil }
	if waitFor(ctx, grace, none, nothing) == nil {
		return nil
	}
	onKill()
	for _, p := range list() {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	if err := waitFor(ctx, 10*time.Second, none, nothing); err != nil {
		return fmt.Errorf("processes %v do not die", list())
	}
	return nil
}

// daemon starts a long-running service process in a session of its own (a Ctrl-C or a process
// group kill of the caller does not reach it), output appended to logPath. The caller reaps
// it when it exits (so that it leaves no zombie while the caller lives on, as a test binary
// does).
func daemon(dir, logPath string, env []string, name string, args ...string) (int, error) {
	out, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, err
	}
	defer out.Close()
	fmt.Fprintf(out, "\n===== %s services start =====\n", time.Now().Format(time.RFC3339))
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, env, out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start %s: %w", filepath.Base(name), err)
	}
	go func() { _ = cmd.Wait() }()
	return cmd.Process.Pid, nil
}

// without returns env without the variables named.
func without(env []string, names ...string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return slices.Contains(names, k)
	})
}
