package stack

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"text/template"
	"time"
)

// The broker configuration: activemq.xml, a text/template that every broker of the project
// is rendered from (amqConf), and log4j.properties.
//
//go:embed activemq/*
var activemqConf embed.FS

var activemqXML = template.Must(template.New("activemq.xml").Option("missingkey=error").ParseFS(activemqConf, "activemq/activemq.xml"))

// amqConf is what activemq.xml's template reads: which of the variants it describes says.
type amqConf struct {
	Deploy, Network, OpenWire bool
}

// renderConf renders activemq.xml for c.
func renderConf(c amqConf) ([]byte, error) {
	var b bytes.Buffer
	if err := activemqXML.Execute(&b, c); err != nil {
		return nil, fmt.Errorf("activemq.xml: %w", err)
	}
	return b.Bytes(), nil
}

const (
	amqWait = 60 * time.Second
	amqStop = 15 * time.Second
)

// amqNode is one ActiveMQ broker: the default one (dir activemq), or a node of the master/slave
// pair or of the network of brokers.
type amqNode struct {
	s        *stack
	base     string
	port     int
	kahadb   string // "": data/kahadb
	name     string
	openwire int
	peer     int // the peer's OpenWire port: a network connector to it
}

func (s *stack) amq() *amqNode {
	return &amqNode{s: s, base: filepath.Join(s.cfg.RunDir, "activemq"), port: s.cfg.StompPort, name: "brp-dev", openwire: s.cfg.OpenWirePort}
}

// pairNode is node a or b of the master/slave pair: one broker name and one store.
func (s *stack) pairNode(node string) *amqNode {
	port := s.cfg.PairPortA
	if node == "b" {
		port = s.cfg.PairPortB
	}
	return &amqNode{s: s, base: filepath.Join(s.cfg.RunDir, "amq-pair", node), port: port,
		kahadb: filepath.Join(s.cfg.RunDir, "amq-pair", "shared", "kahadb"), name: "brp-pair"}
}

// netNode is node a or b of the network of brokers: a store of its own, a bridge to the other.
func (s *stack) netNode(node string) *amqNode {
	n := &amqNode{s: s, base: filepath.Join(s.cfg.RunDir, "amq-network", node), port: s.cfg.NetPortA,
		name: "brp-net-a", openwire: s.cfg.NetOpenWireA, peer: s.cfg.NetOpenWireB}
	if node == "b" {
		n.port, n.name, n.openwire, n.peer = s.cfg.NetPortB, "brp-net-b", s.cfg.NetOpenWireB, s.cfg.NetOpenWireA
	}
	return n
}

func (a *amqNode) conf() string    { return filepath.Join(a.base, "conf") }
func (a *amqNode) dataDir() string { return filepath.Join(a.base, "data") }
func (a *amqNode) logPath() string { return filepath.Join(a.dataDir(), "activemq.log") }
func (a *amqNode) outPath() string { return filepath.Join(a.dataDir(), "console.log") }
func (a *amqNode) pidFile() string { return filepath.Join(a.base, "activemq.pid") }

// ours reports whether pid is a live broker process of this node's base directory.
func (a *amqNode) ours(pid int) bool {
	return alive(pid) && slices.Contains(procList(pid, "cmdline"), "-Dactivemq.base="+a.base)
}

// pid is the broker's process if it runs: from the pid file, else found among the processes
// (a lost or stale pid file).
func (a *amqNode) pid() (int, bool) {
	if pid, ok := readPID(a.pidFile()); ok && a.ours(pid) {
		return pid, true
	}
	if found := pids(a.ours); len(found) > 0 {
		return found[0], true
	}
	return 0, false
}

func (a *amqNode) logs() string { return tail(a.outPath(), 30) + tail(a.logPath(), 30) }

// wait waits until check says yes for the broker started as pid; what says what is awaited.
func (a *amqNode) wait(ctx context.Context, pid int, what string, check func() bool) error {
	err := waitFor(ctx, amqWait, check, func() error {
		if !alive(pid) {
			return errors.New("activemq exited during startup")
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("activemq (%s) not %s: %w%s", a.base, what, err, a.logs())
	}
	return nil
}

func (a *amqNode) answers() bool { return stompPing(a.port, "localhost", "", "") }

// writeConf writes the broker configuration for this node.
func (a *amqNode) writeConf() error {
	xml, err := renderConf(amqConf{Network: a.peer != 0, OpenWire: a.openwire != 0})
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(a.conf(), "activemq.xml"), xml, 0o644); err != nil {
		return err
	}
	log4j, err := activemqConf.ReadFile("activemq/log4j.properties")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(a.conf(), "log4j.properties"), log4j, 0o644)
}

// start starts the broker and waits until it answers STOMP or, as the slave of a pair, until
// it waits for its master's store lock. It returns where this start's lines begin in the
// broker's log.
func (a *amqNode) start(ctx context.Context, slave bool) (int64, error) {
	if pid, ok := a.pid(); ok {
		a.s.logf("activemq: already running (pid %d, %s)", pid, a.base)
		if err := writePID(a.pidFile(), pid); err != nil || slave {
			return 0, err
		}
		return 0, a.wait(ctx, pid, fmt.Sprintf("answering STOMP on 127.0.0.1:%d", a.port), a.answers)
	}
	for _, port := range []int{a.port, a.openwire} {
		if port != 0 && portOpen(port) {
			return 0, fmt.Errorf("port 127.0.0.1:%d is taken by another process; stop it or choose another port (scripts/services.sh says how)", port)
		}
	}
	java, err := exec.LookPath("java")
	if err != nil {
		return 0, errors.New("java not found")
	}
	if err := a.prepare(); err != nil {
		return 0, err
	}
	role, ow := "", ""
	if slave {
		role = " as slave"
	}
	if a.openwire != 0 {
		ow = fmt.Sprintf(", openwire 127.0.0.1:%d", a.openwire)
	}
	a.s.logf("activemq: starting %s, stomp 127.0.0.1:%d%s%s (log: %s)", a.name, a.port, ow, role, a.logPath())
	from := size(a.logPath())
	pid, err := daemon(a.base, a.outPath(), os.Environ(), java, a.javaArgs()...)
	if err != nil {
		return 0, err
	}
	if err := writePID(a.pidFile(), pid); err != nil {
		return 0, err
	}
	if slave {
		locked := regexp.MustCompile(`is locked by another server`)
		if err := a.wait(ctx, pid, "waiting for the store lock", func() bool { return logged(a.logPath(), from, locked) }); err != nil {
			return 0, err
		}
		a.s.logf("activemq: slave (pid %d) waits for the store lock; stomp 127.0.0.1:%d opens when the master is gone", pid, a.port)
		return from, nil
	}
	if err := a.wait(ctx, pid, fmt.Sprintf("answering STOMP on 127.0.0.1:%d", a.port), a.answers); err != nil {
		return 0, err
	}
	a.s.logf("activemq: ready (pid %d), stomp 127.0.0.1:%d", pid, a.port)
	return from, nil
}

// prepare makes the node's directories and writes its configuration.
func (a *amqNode) prepare() error {
	lib := filepath.Join(a.base, "lib")
	for _, d := range []string{a.conf(), a.dataDir(), a.tmp(), lib} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := a.writeConf(); err != nil {
		return err
	}
	// lib is on the broker's extension classpath: XStream and Jettison (the Debian package
	// leaves them out) for STOMP's jms-map-json and jms-map-xml.
	for _, jar := range []string{"xstream", "jettison"} {
		if src := "/usr/share/java/" + jar + ".jar"; exists(src) {
			dst := filepath.Join(lib, jar+".jar")
			_ = os.Remove(dst)
			if err := os.Symlink(src, dst); err != nil {
				return err
			}
		}
	}
	return nil
}

func (a *amqNode) tmp() string { return filepath.Join(a.base, "tmp") }

// javaArgs is the broker's JVM command line: the ports, store and name that activemq.xml
// reads as brp.* properties.
func (a *amqNode) javaArgs() []string {
	kahadb := a.kahadb
	if kahadb == "" {
		kahadb = filepath.Join(a.dataDir(), "kahadb")
	}
	home := a.s.cfg.ActiveMQHome
	args := []string{"-Xms64m", "-Xmx512m", "-Djava.awt.headless=true", "-Djava.io.tmpdir=" + a.tmp(),
		"-Dactivemq.home=" + home, "-Dactivemq.base=" + a.base, "-Dactivemq.conf=" + a.conf(),
		"-Dactivemq.data=" + a.dataDir(), "-Dactivemq.classpath=" + a.conf(),
		"-Dlog4j.configuration=file:" + filepath.Join(a.conf(), "log4j.properties"),
		"-Dbrp.stomp.port=" + strconv.Itoa(a.port), "-Dbrp.kahadb.dir=" + kahadb, "-Dbrp.broker.name=" + a.name,
		"--add-opens=java.base/java.lang=ALL-UNNAMED", "--add-opens=java.base/java.util=ALL-UNNAMED",
		"--add-opens=java.base/java.util.concurrent=ALL-UNNAMED", "--add-opens=java.base/java.io=ALL-UNNAMED",
		"--add-opens=java.base/java.net=ALL-UNNAMED", "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
		"--add-opens=java.naming/javax.naming=ALL-UNNAMED", "--add-opens=java.rmi/sun.rmi.transport.tcp=ALL-UNNAMED"}
	if a.openwire != 0 {
		args = append(args, "-Dbrp.openwire.port="+strconv.Itoa(a.openwire))
	}
	if a.peer != 0 {
		args = append(args, "-Dbrp.peer.openwire.port="+strconv.Itoa(a.peer))
	}
	return append(args, "-jar", filepath.Join(home, "bin", "activemq.jar"), "start", "xbean:file:"+filepath.Join(a.conf(), "activemq.xml"))
}

func (a *amqNode) stop(ctx context.Context, quiet bool) error {
	pid, ok := a.pid()
	if !ok {
		if !quiet {
			a.s.logf("activemq: not running")
		}
		_ = os.Remove(a.pidFile())
		return nil
	}
	a.s.logf("activemq: stopping (pid %d)", pid)
	err := stopPIDs(ctx, []int{pid}, func() []int {
		if a.ours(pid) {
			return []int{pid}
		}
		return nil
	}, amqStop, func() { a.s.logf("activemq: still running after %v, sending SIGKILL", amqStop) })
	if err != nil {
		return fmt.Errorf("activemq: %w", err)
	}
	_ = os.Remove(a.pidFile())
	a.s.logf("activemq: stopped")
	return nil
}

// pairUp starts the master/slave pair: the master first, then the slave, which waits for its
// lock.
func (s *stack) pairUp(ctx context.Context) error {
	if _, err := s.pairNode("a").start(ctx, false); err != nil {
		return err
	}
	_, err := s.pairNode("b").start(ctx, true)
	return err
}

// pairDown stops the pair, the slave first so that it does not take over.
func (s *stack) pairDown(ctx context.Context, quiet bool) error {
	return stopNodes(ctx, quiet, s.pairNode("b"), s.pairNode("a"))
}

// stopNodes stops the brokers in the order given.
func stopNodes(ctx context.Context, quiet bool, nodes ...*amqNode) error {
	for _, n := range nodes {
		if err := n.stop(ctx, quiet); err != nil {
			return err
		}
	}
	return nil
}

// networkUp starts both brokers of the network and waits until each one's bridge to the other
// is up.
func (s *stack) networkUp(ctx context.Context) error {
	a, b := s.netNode("a"), s.netNode("b")
	fromA, err := a.start(ctx, false)
	if err != nil {
		return err
	}
	fromB, err := b.start(ctx, false)
	if err != nil {
		return err
	}
	bridged := regexp.MustCompile(`Network connection between .* has been established`)
	for _, n := range []struct {
		node *amqNode
		from int64
		peer string
	}{{a, fromA, "b"}, {b, fromB, "a"}} {
		pid, _ := n.node.pid()
		if err := n.node.wait(ctx, pid, "bridged to "+n.peer, func() bool { return logged(n.node.logPath(), n.from, bridged) }); err != nil {
			return err
		}
	}
	s.logf("activemq network: bridges a -> b and b -> a established")
	return nil
}

func (s *stack) networkDown(ctx context.Context, quiet bool) error {
	return stopNodes(ctx, quiet, s.netNode("a"), s.netNode("b"))
}
