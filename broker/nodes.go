package broker

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// ParseAddrs splits a broker address, host:port or a comma-separated list of them (the nodes
// of a master/slave pair or a network of brokers), into its nodes, in order. Spaces around
// entries are ignored; an empty entry, a missing host, a port outside 1-65535 or a node listed
// twice is an error.
func ParseAddrs(s string) ([]string, error) {
	var nodes []string
	seen := map[string]bool{}
	for i, e := range strings.Split(s, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			return nil, fmt.Errorf("entry %d is empty", i+1)
		}
		host, port, err := net.SplitHostPort(e)
		if err != nil || host == "" {
			return nil, fmt.Errorf("entry %d (%q) is not host:port", i+1, e)
		}
		if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
			return nil, fmt.Errorf("entry %d (%q) has no port 1-65535", i+1, e)
		}
		if seen[e] {
			return nil, fmt.Errorf("entry %d (%q) is listed twice", i+1, e)
		}
		seen[e] = true
		nodes = append(nodes, e)
	}
	return nodes, nil
}

// Dialer connects to one of the broker nodes of a Config. It is the one place that decides
// which node a process uses: the publisher and the consumers dial through it alike.
//
// Dial tries the node that answered last first (at the start: the first listed, or a random
// one with Config.RandomStart), then the others in list order, once round the list; the
// callers back off between rounds. Lost moves the start past a node whose connection failed,
// so that a dead node is tried last, not first: a node that is down may not even refuse (a
// host that is gone), and each try of it can cost the TCP connect timeout (10 s, package tcp)
// or, when it accepts but does not answer, OpTimeout.
//
// A Dialer of NewFirstDialer starts every Dial at the first listed node instead.
//
// A Dialer is safe for concurrent use.
type Dialer struct {
	cfg   Config
	nodes []string
	next  atomic.Int64 // index of the node tried first
	first bool         // always start at node 0

	mu      sync.Mutex
	current string // node of the last successful Dial, until it is lost
}

// NewDialer validates cfg and returns a Dialer over its nodes.
func NewDialer(cfg Config) (*Dialer, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	nodes, _ := ParseAddrs(cfg.Addr) // validate checked it
	d := &Dialer{cfg: cfg, nodes: nodes}
	if cfg.RandomStart {
		d.next.Store(int64(rand.IntN(len(nodes))))
	}
	return d, nil
}

// NewFirstDialer is NewDialer for a Dialer that starts every Dial at the first listed node
// (cfg.RandomStart does not apply): it uses the first node that answers and goes back to it
// as soon as it answers again. For what must go to one broker of a network while it can:
// the verzending messages. A first node that is down is tried on every Dial.
func NewFirstDialer(cfg Config) (*Dialer, error) {
	cfg.RandomStart = false
	d, err := NewDialer(cfg)
	if d != nil {
		d.first = true
	}
	return d, err
}

// Nodes returns the broker nodes, in the configured order.
func (d *Dialer) Nodes() []string { return append([]string(nil), d.nodes...) }

// Dial connects to the first node that answers, starting with the one that answered last,
// once round the list. The connection's Node says which node it is. The error names each
// node's failure.
func (d *Dialer) Dial(ctx context.Context) (*Conn, error) {
	start := int(d.next.Load())
	if d.first {
		start = 0
	}
	var errs []error
	for k := range d.nodes {
		i := (start + k) % len(d.nodes)
		c, err := dialNode(ctx, d.cfg, d.nodes[i])
		if err == nil {
			c.index = i
			d.next.Store(int64(i))
			d.mu.Lock()
			d.current = c.Node
			d.mu.Unlock()
			return c, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}

// Lost tells the Dialer that c, one of its connections, failed: unless another connection
// has moved on already, the next Dial starts at the node after c's (a Dialer of
// NewFirstDialer still starts at the first), and Current is empty until a Dial succeeds
// again.
func (d *Dialer) Lost(c *Conn) {
	if c == nil {
		return
	}
	d.next.CompareAndSwap(int64(c.index), int64((c.index+1)%len(d.nodes)))
	d.mu.Lock()
	if d.current == c.Node {
		d.current = ""
	}
	d.mu.Unlock()
}

// Current returns the node of the last successful Dial, or "" when there was none or its
// connection was lost since: the node this process uses, for logs, /readyz and metrics.
func (d *Dialer) Current() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.current
}

// NodeCollector returns the gauge <namespace>_broker_node{node}: 1 for each node that one of
// the dialers uses (Current), 0 for the other configured nodes. The dialers share one list
// of nodes (Config.Addr).
func NodeCollector(namespace string, dialers ...*Dialer) prometheus.Collector {
	return &nodeCollector{dialers: dialers, desc: prometheus.NewDesc(prometheus.BuildFQName(namespace, "", "broker_node"),
		"1 for each broker node (host:port of BRP_STOMP_ADDR) this process is connected to, 0 for the other nodes.",
		[]string{"node"}, nil)}
}

type nodeCollector struct {
	dialers []*Dialer
	desc    *prometheus.Desc
}

func (n *nodeCollector) Describe(ch chan<- *prometheus.Desc) { ch <- n.desc }

func (n *nodeCollector) Collect(ch chan<- prometheus.Metric) {
	used := map[string]bool{}
	for _, d := range n.dialers {
		used[d.Current()] = true
	}
	for _, node := range n.dialers[0].nodes {
		v := 0.0
		if used[node] {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(n.desc, prometheus.GaugeValue, v, node)
	}
}
