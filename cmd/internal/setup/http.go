package setup

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	stdlog "log"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/brp/levering/broker"
	"github.com/brp/levering/handeling"
)

// serveProbe listens on addr (unless it is "off") and serves h until ctx ends; shutdown is bounded.
// It logs "http listening" with the address actually bound (http_addr; port 0 picks one) and
// returns that address after the listener is up.
func serveProbe(ctx context.Context, addr ListenAddr, h http.Handler, log *slog.Logger) (string, error) {
	return serve(ctx, addr, h, nil, log, "http listening", "http_addr")
}

// serve is serveProbe with TLS when tc is not nil, announced as msg with the bound address under
// key, plus attrs.
func serve(ctx context.Context, addr ListenAddr, h http.Handler, tc *tls.Config, log *slog.Logger, msg, key string, attrs ...any) (string, error) {
	if addr == "off" || addr == "" {
		return "", nil
	}
	ln, err := net.Listen("tcp", string(addr))
	if err != nil {
		return "", fmt.Errorf("http: listen on %s: %w", addr, err)
	}
	if tc != nil {
		ln = tls.NewListener(ln, tc)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, TLSConfig: tc,
		ErrorLog: stdlog.New(serverErrors{log, key, ln.Addr().String()}, "", 0)}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http server stopped", slog.String(key, ln.Addr().String()), slog.Any("error", err))
		}
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	log.Info(msg, append([]any{slog.String(key, ln.Addr().String())}, attrs...)...)
	return ln.Addr().String(), nil
}

// serverErrors logs what net/http reports (a TLS handshake that failed, for instance a
// client certificate refused) as "http server error" at warn, except connections that just
// ended: browsers open spare connections and close them unused.
type serverErrors struct {
	log       *slog.Logger
	key, addr string
}

func (e serverErrors) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	level := slog.LevelWarn
	if strings.HasSuffix(msg, ": EOF") || strings.HasSuffix(msg, "connection reset by peer") {
		level = slog.LevelDebug
	}
	e.log.Log(context.Background(), level, "http server error", slog.String(e.key, e.addr), slog.String("error", msg))
	return len(p), nil
}

// BrokerCheck is a readiness check that dials the broker through d (at most every 2 s, within
// 2 s; in between it repeats the last answer), for a process that holds a connection only
// while it works (the publisher): readiness asks the broker itself. d is a Dialer of the
// check's own, so that the nodes a check reaches do not move the process's.
func BrokerCheck(d *broker.Dialer) func(context.Context) error {
	var mu sync.Mutex
	var last time.Time
	var lastErr error
	return func(ctx context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		if time.Since(last) < 2*time.Second {
			return lastErr
		}
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		c, err := d.Dial(ctx)
		if err == nil {
			c.Disconnect()
		}
		last, lastErr = time.Now(), err
		return err
	}
}

// Check is one readiness condition: nil means ready.
type Check struct {
	Name  string
	Check func(ctx context.Context) error
}

// Mux serves /healthz (the process runs), /readyz (every check passes; the body says which
// failed, plus whatever info returns) and /metrics (reg, with Go and process collectors, and
// brp_levering_dependency_up for the checks named database and broker, and
// brp_levering_build_info).
func Mux(reg *prometheus.Registry, info func() map[string]any, checks ...Check) *http.ServeMux {
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		dependencyCollector{checks: dependencyChecks(checks)}, buildInfoCollector())
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
		defer cancel()
		body := map[string]any{}
		if info != nil {
			body = info()
		}
		ready := true
		for i, err := range runChecks(ctx, checks) {
			if err != nil {
				ready = false
				body[checks[i].Name] = err.Error()
			} else {
				body[checks[i].Name] = "ok"
			}
		}
		body["ready"] = ready
		w.Header().Set("Content-Type", "application/json")
		if !ready {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_ = json.NewEncoder(w).Encode(body)
	})
	return mux
}

// runChecks runs the checks at once and gives up on those that have not answered when ctx
// ends: a check of a dependency that hangs (a frozen database does not answer even a cancelled
// ping) must neither hang the probe nor hide what the other checks say.
func runChecks(ctx context.Context, checks []Check) []error {
	errs := make([]error, len(checks))
	done := make(chan int, len(checks))
	for i, c := range checks {
		go func() {
			errs[i] = c.Check(ctx)
			done <- i
		}()
	}
	answered := make([]bool, len(checks))
	for range checks {
		select {
		case i := <-done:
			answered[i] = true
		case <-ctx.Done():
			out := make([]error, len(checks))
			for i := range checks {
				if answered[i] {
					out[i] = errs[i]
				} else {
					out[i] = fmt.Errorf("no answer: %w", ctx.Err())
				}
			}
			return out
		}
	}
	return errs
}

// dependencyChecks are the checks of the process's dependencies: the database and the broker.
func dependencyChecks(checks []Check) []Check {
	var out []Check
	for _, c := range checks {
		if c.Name == "database" || c.Name == "broker" {
			out = append(out, c)
		}
	}
	return out
}

const dependencyUpHelp = "1 if this process reaches the dependency (its readiness check passed at scrape time), else 0."

var dependencyUp = prometheus.NewDesc(prometheus.BuildFQName(handeling.MetricsNamespace, "", "dependency_up"),
	dependencyUpHelp, []string{"dependency"}, nil)

// dependencyCollector runs the dependency checks at scrape time, as /readyz does: the same
// answer for the alert as for the probe, in both commands.
type dependencyCollector struct{ checks []Check }

func (d dependencyCollector) Describe(ch chan<- *prometheus.Desc) { ch <- dependencyUp }

func (d dependencyCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	for i, err := range runChecks(ctx, d.checks) {
		up := 1.0
		if err != nil {
			up = 0
		}
		ch <- prometheus.MustNewConstMetric(dependencyUp, prometheus.GaugeValue, up, d.checks[i].Name)
	}
}

// startingProbe is the probe listener's handler from the first moment of the process: until Set
// puts the real one in place, /healthz answers 200 (the process runs: a liveness or startup
// probe must not restart a process that waits for its database or broker), and every other
// path 503 saying what the process waits for.
type startingProbe struct {
	h       atomic.Pointer[http.Handler]
	waiting atomic.Pointer[string]
	detail  atomic.Pointer[string]
}

// Waiting says what the process waits for now.
func (s *startingProbe) Waiting(what string) { s.WaitingFor(what, "") }

// WaitingFor says what the process waits for now, with a detail for a person (the probes'
// text), which the metrics leave out: their label stays what, one value per dependency.
func (s *startingProbe) WaitingFor(what, detail string) {
	s.detail.Store(&detail)
	s.waiting.Store(&what)
}

// Set puts the real handler in place.
func (s *startingProbe) Set(h http.Handler) { s.h.Store(&h) }

func (s *startingProbe) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h := s.h.Load(); h != nil {
		(*h).ServeHTTP(w, r)
		return
	}
	what, shown := "start", "start"
	if p := s.waiting.Load(); p != nil {
		what, shown = *p, *p
	}
	if d := s.detail.Load(); d != nil && *d != "" {
		shown += " (" + *d + ")"
	}
	switch r.URL.Path {
	case "/healthz":
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintln(w, "ok (starting: waiting for the "+shown+")")
		return
	case "/metrics":
		// What is known before the process is up: its build, that it starts, and the
		// dependency it waits for as down (DependencyDown fires on a start that hangs).
		reg := prometheus.NewRegistry()
		starting := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: handeling.MetricsNamespace, Name: "starting",
			Help: "1 while the process waits at start for its database or broker."})
		starting.Set(1)
		reg.MustRegister(buildInfoCollector(), starting, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: handeling.MetricsNamespace, Name: "dependency_up", Help: dependencyUpHelp,
			ConstLabels: prometheus.Labels{"dependency": what}}, func() float64 { return 0 }))
		promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusServiceUnavailable)
	_ = json.NewEncoder(w).Encode(map[string]any{"ready": false, "starting": "waiting for the " + shown})
}
