package rig

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// HTTPAddr waits until ctx ends for the process's probe listener (BRP_HTTP_ADDR, announced in
// its "http listening" line) and returns its address.
func (p *Proc) HTTPAddr(ctx context.Context) (string, error) {
	l, err := p.WaitLog(ctx, "http listening")
	if err != nil {
		return "", err
	}
	return fmt.Sprint(l["http_addr"]), nil
}

// Readiness is what a process's /readyz said: Ready (HTTP 200) and the body (the checks, a
// publisher's "leader", the broker nodes in use).
type Readiness struct {
	Ready bool
	Body  map[string]any
}

// Leader reports whether a publisher said it holds the lease.
func (r Readiness) Leader() bool { return r.Body["leader"] == true }

// Readiness asks the process's /readyz once.
func (p *Proc) Readiness(ctx context.Context) (Readiness, error) {
	var r Readiness
	b, code, err := p.get(ctx, "/readyz")
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(b, &r.Body); err != nil {
		return r, fmt.Errorf("%s: /readyz: %w", p.Name, err)
	}
	r.Ready = code == http.StatusOK
	return r, nil
}

// WaitReady waits until ctx ends for /readyz to answer 200: the process reaches its database
// and its broker (a consumer: its workers are subscribed).
func (p *Proc) WaitReady(ctx context.Context) error {
	_, err := p.waitReadiness(ctx, "ready", func(r Readiness) bool { return r.Ready })
	return err
}

// WaitLeader waits until ctx ends for a publisher's /readyz to say it is ready and leads, and
// returns when this was first seen.
func (p *Proc) WaitLeader(ctx context.Context) (time.Time, error) {
	return p.waitReadiness(ctx, "leader", func(r Readiness) bool { return r.Ready && r.Leader() })
}

func (p *Proc) waitReadiness(ctx context.Context, what string, ok func(Readiness) bool) (time.Time, error) {
	if _, err := p.HTTPAddr(ctx); err != nil {
		return time.Time{}, err
	}
	var last Readiness
	var lastErr error
	for {
		if last, lastErr = p.Readiness(ctx); lastErr == nil && ok(last) {
			return time.Now(), nil
		}
		if p.Exited() {
			return time.Time{}, fmt.Errorf("%s exited (%v) before it was %s:\n%s", p.Name, p.err, what, p.Tail(30))
		}
		select {
		case <-ctx.Done():
			if lastErr != nil {
				return time.Time{}, fmt.Errorf("%s not %s: %w (last /readyz: %w)", p.Name, what, ctx.Err(), lastErr)
			}
			return time.Time{}, fmt.Errorf("%s not %s: %w (last /readyz: %v)", p.Name, what, ctx.Err(), last.Body)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// get fetches path from the process's probe listener.
func (p *Proc) get(ctx context.Context, path string) ([]byte, int, error) {
	addr, err := p.HTTPAddr(ctx)
	if err != nil {
		return nil, 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", p.Name, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %s: %w", p.Name, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %s: %w", p.Name, path, err)
	}
	return b, resp.StatusCode, nil
}

// Metrics scrapes the process's /metrics once it is up: while it waits at start for its
// database or broker (brp_levering_starting 1) it polls until ctx ends.
func (p *Proc) Metrics(ctx context.Context) (Metrics, error) {
	for {
		b, code, err := p.get(ctx, "/metrics")
		if err != nil {
			return nil, err
		}
		if code != http.StatusOK {
			return nil, fmt.Errorf("%s: /metrics: HTTP %d", p.Name, code)
		}
		m := parseMetrics(string(b))
		if m["brp_levering_starting"] != 1 {
			return m, nil
		}
		// Still waiting at start for its database or broker: its metrics are not there yet.
		select {
		case <-ctx.Done():
			return m, nil
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Metrics maps a sample's name with labels, as written (`x_bucket{le="0.001"}`), to its value.
type Metrics map[string]float64

// parseMetrics reads Prometheus's text format.
func parseMetrics(s string) Metrics {
	out := Metrics{}
	for _, line := range strings.Split(s, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] = v
	}
	return out
}
