package setup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Serve listens on addr (unless it is "off") and serves h until ctx ends; shutdown is bounded.
// It returns the address actually bound (port 0 picks one) after the listener is up.
func Serve(ctx context.Context, addr ListenAddr, h http.Handler, log *slog.Logger) (string, error) {
	if addr == "off" || addr == "" {
		return "", nil
	}
	ln, err := net.Listen("tcp", string(addr))
	if err != nil {
		return "", fmt.Errorf("http: listen on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http server stopped", slog.Any("error", err))
		}
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	log.Info("http listening", slog.String("http_addr", ln.Addr().String()))
	return ln.Addr().String(), nil
}

// Check is one readiness condition: nil means ready.
type Check struct {
	Name  string
	Check func(ctx context.Context) error
}

// Mux serves /healthz (the process runs), /readyz (every check passes; the body says which
// failed, plus whatever info returns) and /metrics (reg, with Go and process collectors).
func Mux(reg *prometheus.Registry, info func() map[string]any, checks ...Check) *http.ServeMux {
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
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
		for _, c := range checks {
			if err := bounded(ctx, c.Check); err != nil {
				ready = false
				body[c.Name] = err.Error()
			} else {
				body[c.Name] = "ok"
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

// bounded runs check and gives up when ctx ends: a check of a dependency that hangs (a frozen
// database does not answer even a cancelled ping) must not hang the probe with it.
func bounded(ctx context.Context, check func(context.Context) error) error {
	done := make(chan error, 1)
	go func() { done <- check(ctx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("no answer: %w", ctx.Err())
	}
}
