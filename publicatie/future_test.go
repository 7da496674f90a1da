package publicatie

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/brp/levering/handeling"
	"github.com/brp/levering/internal/brptest"
	"github.com/brp/levering/internal/load"
)

// syncBuffer is a log sink the test reads while the publisher may write.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// lines returns the JSON log lines with message msg.
func (s *syncBuffer) lines(t *testing.T, msg string) []map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(s.b.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// A handeling a year ahead of the database clock is counted by the collector, which keeps the
// oldest age at the oldest handeling not in the future (never negative); the leader logs it
// once, with its admhnd_id and tsreg and no person, and does not publish it. One a second ahead
// (within the skew) and an excluded one do not count.
func TestFutureHandelingCountedLoggedOnce(t *testing.T) {
	t.Parallel()
	e := newRoundEnv(t, Config{})
	var log syncBuffer
	e.pub.log = slog.New(slog.NewJSONHandler(&log, nil))
	now := time.Now()
	excluded := load.Handeling{ID: 4, Soort: handeling.InitieleVulling, Tsreg: now.Add(365 * 24 * time.Hour), Personen: []int64{40}}
	e.insert(
		load.Handeling{ID: 1, Tsreg: now.Add(365 * 24 * time.Hour), Personen: []int64{770077}},
		load.Handeling{ID: 2, Tsreg: now.Add(time.Second), Personen: []int64{20}},
		load.Handeling{ID: 3, Tsreg: now.Add(-time.Minute), Personen: []int64{30}},
		excluded,
	)

	reg := prometheus.NewRegistry()
	reg.MustRegister(NewBacklogCollector(e.db, brptest.Layout(), handeling.DefaultExcluded(), 1000))
	gauge := func(name string) float64 {
		t.Helper()
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fams {
			if f.GetName() == "brp_levering_"+name {
				return f.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatalf("no brp_levering_%s", name)
		return 0
	}
	if n := gauge("future_handelingen"); n != 1 {
		t.Errorf("future_handelingen %v, want 1", n)
	}
	if age := gauge("oldest_undelivered_age_seconds"); age < 55 || age > 120 {
		t.Errorf("oldest_undelivered_age_seconds %v, want the minute of handeling 3", age)
	}
	if n := testutil.CollectAndCount(NewBacklogCollector(e.db, brptest.Layout(), nil, 1000), "brp_levering_future_handelingen"); n != 1 {
		t.Errorf("%d future_handelingen series, want 1", n)
	}

	ctx := context.Background()
	e.pub.checkFuture(ctx)
	e.pub.future.last = time.Time{} // the next check is due: it reads the handeling again
	e.pub.checkFuture(ctx)
	e.pub.checkFuture(ctx) // within FutureCheckInterval: no query
	lines := log.lines(t, "handeling registered in the future: it waits until its tsreg has passed")
	if len(lines) != 1 {
		t.Fatalf("%d log lines about the handeling in the future, want 1:\n%s", len(lines), log.String())
	}
	l := lines[0]
	tsreg, err := time.Parse(time.RFC3339Nano, l["tsreg"].(string))
	if l["level"] != "WARN" || l["admhnd_id"] != float64(1) || err != nil || tsreg.Sub(now) < 364*24*time.Hour ||
		l["ahead_seconds"].(float64) < 364*24*3600 {
		t.Errorf("log line %v, want WARN with admhnd_id 1, its tsreg and ahead_seconds", l)
	}
	if strings.Contains(log.String(), "770077") {
		t.Errorf("the log names the person:\n%s", log.String())
	}

	// It waits: a round publishes the others (2 once its second has passed), never it.
	published := e.round()
	if !slices.Contains(published, 3) || slices.Contains(published, 1) {
		t.Fatalf("the round published %v, want 3 and not 1", published)
	}
	if s := brptest.Status(t, e.db, 1); s != "" {
		t.Errorf("handeling 1 is %q, want still to be delivered", s)
	}
	e.setStatus("geleverd", published...)
	if age := gauge("oldest_undelivered_age_seconds"); age < 0 || age > 5 {
		t.Errorf("oldest_undelivered_age_seconds %v with only handelingen ahead left, want about 0 and never negative", age)
	}
}

// The ids remembered as logged stay bounded: past maxFutureLogged the earliest is forgotten.
func TestFutureLogIsBounded(t *testing.T) {
	f := &futureLog{logged: map[int64]struct{}{}}
	for id := range int64(maxFutureLogged + 5) {
		f.remember(id)
	}
	if len(f.logged) != maxFutureLogged || len(f.order) != maxFutureLogged {
		t.Fatalf("remembers %d (%d in order), want %d", len(f.logged), len(f.order), maxFutureLogged)
	}
	if _, ok := f.logged[4]; ok {
		t.Error("the fifth id logged is still remembered")
	}
	if _, ok := f.logged[maxFutureLogged+4]; !ok {
		t.Error("the last id logged is forgotten")
	}
}
