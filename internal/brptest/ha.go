package brptest

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/Shopify/toxiproxy/v2"

	"github.com/brp/levering/broker"
)

// BrokerNodes are the two ActiveMQ brokers of a high availability topology of a test's own
// (package stack: up-amq-pair or up-amq-network), stopped when the test ends.
type BrokerNodes struct {
	s *Services
	// A and B are the nodes' STOMP addresses (host:port); A is the master of a pair.
	A, B string
	kind string // "pair" or "network"
}

// PrivateBrokerPair starts an ActiveMQ master/slave pair on one shared KahaDB store: A serves,
// B waits for the store's lock and serves once A is gone.
func PrivateBrokerPair(t testing.TB) *BrokerNodes {
	t.Helper()
	NeedsServices(t)
	a, b := freePort(t), freePort(t)
	n := &BrokerNodes{kind: "pair", A: "127.0.0.1:" + strconv.Itoa(a), B: "127.0.0.1:" + strconv.Itoa(b)}
	n.s = newPrivate(t)
	n.s.cfg.PairPortA, n.s.cfg.PairPortB = a, b
	n.s.run("up-amq-pair")
	return n
}

// PrivateBrokerNetwork starts two ActiveMQ brokers, each with a store of its own, joined by a
// network connector each way; it returns once both bridges are up.
func PrivateBrokerNetwork(t testing.TB) *BrokerNodes {
	t.Helper()
	NeedsServices(t)
	a, b := freePort(t), freePort(t)
	n := &BrokerNodes{kind: "network", A: "127.0.0.1:" + strconv.Itoa(a), B: "127.0.0.1:" + strconv.Itoa(b)}
	n.s = newPrivate(t)
	n.s.cfg.NetPortA, n.s.cfg.NetPortB, n.s.cfg.NetOpenWireA, n.s.cfg.NetOpenWireB = a, b, freePort(t), freePort(t)
	n.s.run("up-amq-network")
	return n
}

// Broker is a broker configuration listing the given nodes in that order (default A, B).
func (n *BrokerNodes) Broker(nodes ...string) broker.Config {
	if len(nodes) == 0 {
		nodes = []string{n.A, n.B}
	}
	b := Broker()
	b.Addr = strings.Join(nodes, ",")
	return b
}

// Kill kills node a or b with SIGKILL, as a crash of its host would end it.
func (n *BrokerNodes) Kill(node string) {
	n.s.t.Helper()
	pid := n.s.pid(filepath.Join("amq-"+n.kind, node, "activemq.pid"))
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		n.s.t.Fatalf("brptest: kill broker %s: %v", node, err)
	}
}

// ReplicatedDB is a PostgreSQL primary with a streaming hot standby of a test's own
// (package stack: up-db and up-pg-standby), and the one endpoint through which the
// service reaches whichever of them is the primary: a fault proxy, like a virtual IP or
// HAProxy in front of a Patroni cluster. The standby streams through a fault proxy of its own,
// so that a test can cut replication.
type ReplicatedDB struct {
	s *Services
	// StandbyPort is the standby's port; Services' PGPort is the primary's.
	StandbyPort int
	// Endpoint is the address the service uses (Switch moves it to the standby).
	Endpoint *Proxy
	// Replication carries the standby's WAL stream from the primary.
	Replication *Proxy
}

// PrivateReplicatedDB starts the primary, the standby (synchronous replication when sync:
// every commit waits until the standby has it) and the two proxies.
func PrivateReplicatedDB(t testing.TB, sync bool) *ReplicatedDB {
	t.Helper()
	NeedsServices(t)
	r := &ReplicatedDB{StandbyPort: freePort(t)}
	r.s = newPrivate(t)
	r.s.cfg.StandbyPort = r.StandbyPort
	r.s.run("up-db")
	primary := "127.0.0.1:" + strconv.Itoa(r.s.PGPort)
	r.Replication = NewProxy(t, primary)
	r.Endpoint = NewProxy(t, primary)
	r.s.cfg.ReplicationAddr, r.s.cfg.PGAsync = r.Replication.Addr(), !sync
	r.s.run("up-pg-standby")
	return r
}

// ServerURL is the URL of the primary's brp database through the endpoint (for DBOn).
func (r *ReplicatedDB) ServerURL() string {
	return fmt.Sprintf("postgres://postgres@%s/brp?sslmode=disable", r.Endpoint.Addr())
}

// KillPrimary kills the primary's postmaster and every backend with SIGKILL, as a crash of
// its host would: nothing is flushed or said goodbye to.
func (r *ReplicatedDB) KillPrimary() { r.s.signalTree(r.s.DBPID(), syscall.SIGKILL) }

// Promote makes the standby a primary (pg_ctl promote) and waits until it accepts writes.
func (r *ReplicatedDB) Promote() { r.s.run("promote-pg-standby") }

// SwitchEndpoint points the endpoint at the standby, as Patroni moves its virtual IP: the
// connections open through it are closed, new ones reach the standby.
func (r *ReplicatedDB) SwitchEndpoint() {
	r.Endpoint.Switch("127.0.0.1:" + strconv.Itoa(r.StandbyPort))
}

// Switch points the proxy at another upstream; the connections open now are closed (their
// peers see the socket close), new ones go to upstream.
func (p *Proxy) Switch(upstream string) {
	p.t.Helper()
	if err := p.p.Update(&toxiproxy.Proxy{Listen: p.p.Listen, Upstream: upstream, Enabled: true}); err != nil {
		p.t.Fatalf("brptest: switch proxy to %s: %v", upstream, err)
	}
}
