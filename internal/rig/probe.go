package rig

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
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
		m, err := parseMetrics(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("%s: /metrics: %w", p.Name, err)
		}
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
// The labels are in the order the process wrote them (client_golang: sorted by name), a
// histogram's le and a summary's quantile last, label values escaped as in the text format
// (`\\`, `\"`, `\n`); a histogram gives x_bucket{...,le="..."}, x_sum and x_count, a summary
// x{...,quantile="..."}, x_sum and x_count.
type Metrics map[string]float64

// parseMetrics reads Prometheus's text format (version 0.0.4) with expfmt and flattens it into
// its samples.
func parseMetrics(r io.Reader) (Metrics, error) {
	var parser expfmt.TextParser
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return nil, err
	}
	out := Metrics{}
	for name, mf := range families {
		for _, m := range mf.GetMetric() {
			labels := m.GetLabel()
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				out[sampleKey(name, labels, "", 0)] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[sampleKey(name, labels, "", 0)] = m.GetGauge().GetValue()
			case dto.MetricType_UNTYPED:
				out[sampleKey(name, labels, "", 0)] = m.GetUntyped().GetValue()
			case dto.MetricType_SUMMARY:
				s := m.GetSummary()
				for _, q := range s.GetQuantile() {
					out[sampleKey(name, labels, model.QuantileLabel, q.GetQuantile())] = q.GetValue()
				}
				out[sampleKey(name+"_sum", labels, "", 0)] = s.GetSampleSum()
				out[sampleKey(name+"_count", labels, "", 0)] = float64(s.GetSampleCount())
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				for _, b := range h.GetBucket() {
					out[sampleKey(name+"_bucket", labels, model.BucketLabel, b.GetUpperBound())] = float64(b.GetCumulativeCount())
				}
				out[sampleKey(name+"_sum", labels, "", 0)] = h.GetSampleSum()
				out[sampleKey(name+"_count", labels, "", 0)] = float64(h.GetSampleCount())
			}
		}
	}
	return out, nil
}

// labelValue escapes a label value as the text format writes it.
var labelValue = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)

// sampleKey writes a sample's name and labels as the text format does: name{a="1",b="2"}, with
// the bound label (le, quantile; "" for none) last and its value written as client_golang
// writes floats (+Inf, 0.005, 1e-05), and no braces without labels.
func sampleKey(name string, labels []*dto.LabelPair, bound string, v float64) string {
	if len(labels) == 0 && bound == "" {
		return name
	}
	var b strings.Builder
	b.WriteString(name)
	b.WriteByte('{')
	for i, l := range labels {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=\"%s\"", l.GetName(), labelValue.Replace(l.GetValue()))
	}
	if bound != "" {
		if len(labels) > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=\"%s\"", bound, formatFloat(v))
	}
	b.WriteByte('}')
	return b.String()
}

// formatFloat writes a float as the text format does.
func formatFloat(v float64) string {
	switch {
	case math.IsInf(v, +1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
