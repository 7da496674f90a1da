package stack

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The project's RabbitMQ credentials and virtual host (rabbitmq/rabbitmq.conf creates them).
const (
	RabbitUser  = "brp"
	RabbitPass  = "brp"
	RabbitVhost = "/"
)

const (
	rabbitNode = "brp-dev@localhost"
	rabbitWait = 90 * time.Second
	rabbitStop = 30 * time.Second
)

//go:embed rabbitmq/rabbitmq.conf
var rabbitConf string

// rabbitMQ is the project's RabbitMQ node (Debian rabbitmq-server with rabbitmq_stomp): on
// 127.0.0.1 and off RabbitMQ's default ports, so that a system RabbitMQ can run too. Every
// process of the node (the launcher script, the Erlang VM, its epmd) carries its marker
// variable in its environment: that is how they are found.
type rabbitMQ struct {
	s    *stack
	cfg  Config
	base string
}

func (s *stack) rabbit() *rabbitMQ {
	return &rabbitMQ{s: s, cfg: s.cfg, base: filepath.Join(s.cfg.RunDir, "rabbitmq")}
}

func (r *rabbitMQ) marker() string  { return "BRP_RABBITMQ_BASE=" + r.base }
func (r *rabbitMQ) conf() string    { return filepath.Join(r.base, "conf") }
func (r *rabbitMQ) mnesia() string  { return filepath.Join(r.base, "mnesia") }
func (r *rabbitMQ) logDir() string  { return filepath.Join(r.base, "log") }
func (r *rabbitMQ) logPath() string { return filepath.Join(r.logDir(), "rabbit.log") }
func (r *rabbitMQ) outPath() string { return filepath.Join(r.logDir(), "console.log") }
func (r *rabbitMQ) pidFile() string { return filepath.Join(r.base, "rabbitmq.pid") }
func (r *rabbitMQ) logs() string    { return tail(r.outPath(), 30) + tail(r.logPath(), 30) }
func (r *rabbitMQ) ping() bool {
	return stompPing(r.cfg.RabbitStompPort, RabbitVhost, RabbitUser, RabbitPass)
}
func (r *rabbitMQ) procs(comm ...string) []int {
	return pids(func(pid int) bool { return r.ours(pid, comm...) })
}

// ours reports whether pid is a live process of this node whose command is one of comm.
func (r *rabbitMQ) ours(pid int, comm ...string) bool {
	return alive(pid) && slices.Contains(comm, procComm(pid)) && slices.Contains(procList(pid, "environ"), r.marker())
}

// pid is the Erlang VM's process if the node runs (pid file written by RabbitMQ, else a scan).
func (r *rabbitMQ) pid() (int, bool) {
	if pid, ok := readPID(r.pidFile()); ok && r.ours(pid, "beam.smp") {
		return pid, true
	}
	if found := r.procs("beam.smp"); len(found) > 0 {
		return found[0], true
	}
	return 0, false
}

// waitReady waits for STOMP; launcher is the script started by this call (0: none).
func (r *rabbitMQ) waitReady(ctx context.Context, launcher int) error {
	err := waitFor(ctx, rabbitWait, r.ping, func() error {
		if _, ok := r.pid(); !ok && (launcher == 0 || !r.ours(launcher, "rabbitmq-server")) {
			return errors.New("rabbitmq exited during startup")
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("rabbitmq does not answer STOMP on 127.0.0.1:%d: %w%s", r.cfg.RabbitStompPort, err, r.logs())
	}
	return nil
}

func (r *rabbitMQ) start(ctx context.Context) error {
	t0 := time.Now()
	if pid, ok := r.pid(); ok {
		r.s.logf("rabbitmq: already running (pid %d)", pid)
		return r.waitReady(ctx, 0)
	}
	for _, port := range []int{r.cfg.RabbitStompPort, r.cfg.RabbitDistPort} {
		if portOpen(port) {
			return fmt.Errorf("port 127.0.0.1:%d is taken by another process; stop it or set BRP_DEV_RABBIT_STOMP_PORT / BRP_DEV_RABBIT_DIST_PORT", port)
		}
	}
	// An epmd on our port is fine if it is ours (left from an earlier run); another one is not.
	if portOpen(r.cfg.RabbitEPMDPort) && len(r.procs("epmd")) == 0 {
		return fmt.Errorf("port 127.0.0.1:%d (epmd) is taken by another process; stop it or set BRP_DEV_RABBIT_EPMD_PORT", r.cfg.RabbitEPMDPort)
	}
	for _, d := range []string{r.conf(), r.mnesia(), r.logDir()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	conf := strings.NewReplacer("@STOMP_PORT@", strconv.Itoa(r.cfg.RabbitStompPort), "@USER@", RabbitUser, "@PASS@", RabbitPass).Replace(rabbitConf)
	for name, content := range map[string]string{
		"rabbitmq.conf":   conf,
		"enabled_plugins": "[rabbitmq_stomp].\n",
		// Read instead of /etc/rabbitmq/rabbitmq-env.conf, so that a system setup does not leak in.
		"rabbitmq-env.conf": "# Written by scripts/services.sh: the project node reads no rabbitmq-env.conf.\n",
	} {
		if err := os.WriteFile(filepath.Join(r.conf(), name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	// The Erlang cookie goes to $HOME/.erlang.cookie: HOME is the run dir, not the caller's.
	// rabbitmqctl reaches this node with the same cookie and epmd, for example:
	//   HOME=.run/rabbitmq RABBITMQ_NODENAME=brp-dev@localhost ERL_EPMD_PORT=4371 \
	//     /usr/lib/rabbitmq/bin/rabbitmqctl list_queues name messages
	env := append(without(os.Environ(), "RABBITMQ_NODE_IP_ADDRESS", "RABBITMQ_NODE_PORT", "RABBITMQ_USE_LONGNAME"),
		r.marker(), "HOME="+r.base, "RABBITMQ_NODENAME="+rabbitNode,
		"RABBITMQ_CONF_ENV_FILE="+filepath.Join(r.conf(), "rabbitmq-env.conf"),
		"RABBITMQ_CONFIG_FILE="+filepath.Join(r.conf(), "rabbitmq.conf"),
		"RABBITMQ_ADVANCED_CONFIG_FILE="+filepath.Join(r.conf(), "advanced.config"),
		"RABBITMQ_ENABLED_PLUGINS_FILE="+filepath.Join(r.conf(), "enabled_plugins"),
		"RABBITMQ_ENABLED_PLUGINS=rabbitmq_stomp", "RABBITMQ_MNESIA_BASE="+r.mnesia(),
		"RABBITMQ_LOG_BASE="+r.logDir(), "RABBITMQ_LOGS="+r.logPath(), "RABBITMQ_PID_FILE="+r.pidFile(),
		"RABBITMQ_DIST_PORT="+strconv.Itoa(r.cfg.RabbitDistPort), "ERL_EPMD_PORT="+strconv.Itoa(r.cfg.RabbitEPMDPort),
		"ERL_EPMD_ADDRESS=127.0.0.1",
		// The distribution listener on loopback too (RABBITMQ_DIST_PORT only sets its port).
		"RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS=-kernel inet_dist_use_interface {127,0,0,1}")
	r.s.logf("rabbitmq: starting, stomp 127.0.0.1:%d (log: %s)", r.cfg.RabbitStompPort, r.logPath())
	launcher, err := daemon(r.base, r.outPath(), env, filepath.Join(r.cfg.RabbitBin, "rabbitmq-server"))
	if err != nil {
		return err
	}
	if err := r.waitReady(ctx, launcher); err != nil {
		return err
	}
	pid, _ := r.pid()
	r.s.logf("rabbitmq: ready (pid %d) in %d s, stomp 127.0.0.1:%d", pid, int(time.Since(t0).Seconds()), r.cfg.RabbitStompPort)
	return nil
}

func (r *rabbitMQ) stop(ctx context.Context, quiet bool) error {
	pid, ok := r.pid()
	if !ok {
		// The launcher script without a VM, or our epmd, may still be left.
		if left := r.procs("rabbitmq-server", "epmd"); len(left) > 0 {
			r.s.logf("rabbitmq: stopping leftover processes %v", left)
			_ = stopPIDs(ctx, left, func() []int { return r.procs("rabbitmq-server", "epmd") }, 10*time.Second, func() {})
		} else if !quiet {
			r.s.logf("rabbitmq: not running")
		}
		_ = os.Remove(r.pidFile())
		return nil
	}
	r.s.logf("rabbitmq: stopping (pid %d)", pid)
	// RabbitMQ shuts down cleanly on SIGTERM to the VM; the launcher script exits with it.
	vm := func() []int { return r.procs("beam.smp", "rabbitmq-server") }
	if err := stopPIDs(ctx, []int{pid}, vm, rabbitStop, func() { r.s.logf("rabbitmq: still running after %v, sending SIGKILL", rabbitStop) }); err != nil {
		return fmt.Errorf("rabbitmq: %w", err)
	}
	// epmd outlives the node it was started for; this one serves only our port.
	_ = stopPIDs(ctx, r.procs("epmd"), func() []int { return r.procs("epmd") }, 10*time.Second, func() {})
	_ = os.Remove(r.pidFile())
	r.s.logf("rabbitmq: stopped")
	return nil
}
