package brptest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
)

// Proxy is a real TCP fault proxy (toxiproxy, in-process) in front of one service, for a
// process of the test to connect through.
type Proxy struct {
	t testing.TB
	p *toxiproxy.Proxy
}

var (
	toxiOnce   sync.Once
	toxiServer *toxiproxy.ApiServer
)

// NewProxy starts a proxy to upstream (host:port) on a free loopback port; it stops when the
// test ends.
func NewProxy(t testing.TB, upstream string) *Proxy {
	t.Helper()
	NeedsServices(t)
	toxiOnce.Do(func() { toxiServer = toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop()) })
	p := toxiproxy.NewProxy(toxiServer, Name(t), "127.0.0.1:"+strconv.Itoa(freePort(t)), upstream)
	if err := p.Start(); err != nil {
		t.Fatalf("brptest: proxy to %s: %v", upstream, err)
	}
	t.Cleanup(p.Stop)
	return &Proxy{t: t, p: p}
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.p.Listen }

// URL is a PostgreSQL URL with its host:port replaced by the proxy's.
func (p *Proxy) URL(dbURL string) string {
	return strings.Replace(dbURL, p.p.Upstream, p.Addr(), 1)
}

// Down stops the proxy: its connections close and new ones are refused, as when the service
// behind it stopped. Up starts it again on the same address.
func (p *Proxy) Down() { p.setEnabled(false) }

// Up ends Down.
func (p *Proxy) Up() { p.setEnabled(true) }

func (p *Proxy) setEnabled(on bool) {
	p.t.Helper()
	if err := p.p.Update(&toxiproxy.Proxy{Listen: p.p.Listen, Upstream: p.p.Upstream, Enabled: on}); err != nil {
		p.t.Fatalf("brptest: proxy enabled=%v: %v", on, err)
	}
}

// Cut makes the proxy a partition that drops packets: every connection, open or new, stays
// open while nothing passes in either direction (toxiproxy's timeout toxic with timeout 0).
// Neither side sees the socket close.
func (p *Proxy) Cut() {
	p.t.Helper()
	for _, stream := range []string{"upstream", "downstream"} {
		body := `{"name":"cut_` + stream + `","type":"timeout","stream":"` + stream + `","attributes":{"timeout":0}}`
		if _, err := p.p.Toxics.AddToxicJson(strings.NewReader(body)); err != nil {
			p.t.Fatalf("brptest: cut proxy: %v", err)
		}
	}
}

// Delay holds back everything the upstream sends to the clients by d (toxiproxy's latency
// toxic): a server that answers slowly. It lasts until the test ends.
func (p *Proxy) Delay(d time.Duration) {
	p.t.Helper()
	body := fmt.Sprintf(`{"name":"delay","type":"latency","stream":"downstream","attributes":{"latency":%d}}`, d.Milliseconds())
	if _, err := p.p.Toxics.AddToxicJson(strings.NewReader(body)); err != nil {
		p.t.Fatalf("brptest: delay proxy: %v", err)
	}
}

// Heal ends Cut: data flows again on the connections that are still open.
func (p *Proxy) Heal() {
	p.t.Helper()
	for _, stream := range []string{"upstream", "downstream"} {
		if err := p.p.Toxics.RemoveToxic(context.Background(), "cut_"+stream); err != nil {
			p.t.Fatalf("brptest: heal proxy: %v", err)
		}
	}
}
