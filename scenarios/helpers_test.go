package scenarios

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/brp/levering/broker"
	"github.com/brp/levering/internal/brptest"
	"github.com/brp/levering/internal/load"
	"github.com/brp/levering/internal/rig"
	"github.com/brp/levering/levering"
	"github.com/brp/levering/publicatie"
)

// world is one scenario's services, database, queues, workload and verzending reader.
type world struct {
	svc        *brptest.Services // nil: the shared services
	broker     broker.Config
	db         *sqlx.DB
	dbURL      string
	q          brptest.Queues
	hs         []load.Handeling
	verzending *brptest.Reader
}

// newWorld sets up a scenario on the shared services.
func newWorld(t testing.TB, spec load.Spec) *world {
	return newWorldOn(t, nil, spec)
}

// newWorldOn sets up a scenario on svc, or on the shared services when svc is nil.
func newWorldOn(t testing.TB, svc *brptest.Services, spec load.Spec) *world {
	t.Helper()
	if svc != nil {
		return makeWorld(t, svc, svc.Broker(), spec)
	}
	return makeWorld(t, nil, brptest.Broker(), spec)
}

// newWorldBroker sets up a scenario on the shared database and broker b.
func newWorldBroker(t testing.TB, b broker.Config, spec load.Spec) *world {
	return makeWorld(t, nil, b, spec)
}

func makeWorld(t testing.TB, svc *brptest.Services, b broker.Config, spec load.Spec) *world {
	t.Helper()
	w := makeEmptyWorld(t, svc, b, spec)
	if err := load.Insert(context.Background(), w.db, w.hs); err != nil {
		t.Fatal(err)
	}
	return w
}

// makeEmptyWorld is makeWorld without inserting the workload w.hs.
func makeEmptyWorld(t testing.TB, svc *brptest.Services, b broker.Config, spec load.Spec) *world {
	t.Helper()
	server := brptest.DatabaseURL()
	if svc != nil {
		server = svc.DatabaseURL()
	}
	w := emptyWorldAt(t, server, b, spec)
	w.svc = svc
	return w
}

// newWorldForm sets up a scenario on the shared services, with the contract's tables in the
// form bijhouding created them (brptest.StatusEnum, ...).
func newWorldForm(t testing.TB, b broker.Config, form brptest.Form, spec load.Spec) *world {
	t.Helper()
	w := &world{broker: b, q: brptest.NewQueues(t), hs: load.Generate(spec)}
	w.db, w.dbURL = brptest.DBWith(t, form)
	w.verzending = brptest.ReadFrom(t, w.broker, w.q.Verzending)
	if err := load.Insert(context.Background(), w.db, w.hs); err != nil {
		t.Fatal(err)
	}
	return w
}

// emptyWorldAt is makeEmptyWorld with the database on the server of serverURL.
func emptyWorldAt(t testing.TB, serverURL string, b broker.Config, spec load.Spec) *world {
	t.Helper()
	w := &world{broker: b, q: brptest.NewQueues(t), hs: load.Generate(spec)}
	w.db, w.dbURL = brptest.DBOn(t, serverURL)
	w.verzending = brptest.ReadFrom(t, w.broker, w.q.Verzending)
	return w
}

// env is the environment for the world's processes.
func (w *world) env(extra ...string) []string {
	return rig.Env(w.broker, w.dbURL, w.q, extra...)
}

// consumerProc starts a real mutatielevering process.
func (w *world) consumerProc(t testing.TB, name, bin string, env ...string) *brptest.Proc {
	return brptest.Start(t, name, bin, w.env(env...)...)
}

// publisher runs an in-process publisher until the test ends.
func (w *world) publisher(t testing.TB, cfg publicatie.Config) *publicatie.Publisher {
	t.Helper()
	cfg.Queue, cfg.ListenURL, cfg.Broker, cfg.Layout = w.q.Publicatie, w.dbURL, w.broker, brptest.Layout()
	if cfg.LeadCover == 0 {
		cfg.LeadCover = leadCover(t)
	}
	p, err := publicatie.New(w.db, cfg, quiet())
	if err != nil {
		t.Fatal(err)
	}
	goRun(t, p.Run)
	return p
}

// consumers runs n in-process consumers until the test ends.
func (w *world) consumers(t testing.TB, n, workers int) {
	t.Helper()
	for range n {
		c, err := levering.New(w.db, levering.Config{Queue: w.q.Publicatie, VerzendingQueue: w.q.Verzending,
			DeadLetterQueue: w.q.DLQ, Workers: workers, Broker: w.broker, Layout: brptest.Layout()}, quiet())
		if err != nil {
			t.Fatal(err)
		}
		goRun(t, c.Run)
	}
}

// publisherProc starts a real publicatie process on the world's database and queues.
func (w *world) publisherProc(t testing.TB, name, bin string, env ...string) *brptest.Proc {
	if c := leadCover(t); c != 0 {
		env = append([]string{fmt.Sprintf("BRP_LEVERING_ADMHNDPUBLICATIE_LEADCOVER=%g", c)}, env...)
	}
	return brptest.Start(t, name, bin, w.env(env...)...)
}

// leadCover is BRP_TEST_LEADCOVER: the scenarios' publishers run with that LEADCOVER
// (publicatie.Config.LeadCover), to try another choice (1: cover every lead) on the hostile
// and chaos tests; unset, 0: the default.
func leadCover(t testing.TB) float64 {
	s := os.Getenv("BRP_TEST_LEADCOVER")
	if s == "" {
		return 0
	}
	c, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("BRP_TEST_LEADCOVER: %v", err)
	}
	return c
}

func (w *world) verify(t testing.TB) load.OrderReport {
	t.Helper()
	return verifyDelivered(t, w.db, w.hs, w.verzending)
}

func (w *world) delivered(t testing.TB) int {
	return brptest.Statuses(t, w.db)["geleverd"]
}

// waitDelivered waits (up to a minute) until at least n handelingen are geleverd.
func (w *world) waitDelivered(t testing.TB, n int) {
	t.Helper()
	brptest.Eventually(t, time.Minute, func() error {
		if d := w.delivered(t); d < n {
			return errorf("%d delivered, waiting for %d", d, n)
		}
		return nil
	})
}

// committedRounds counts a publisher's committed rounds that published something, by epoch.
func committedRounds(p *brptest.Proc) map[int64]int {
	out := map[int64]int{}
	for _, l := range p.Lines("round committed") {
		if n, _ := l["published"].(float64); n > 0 {
			e, _ := l["epoch"].(float64)
			out[int64(e)]++
		}
	}
	return out
}

func total(m map[int64]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// status reads a publisher's status document.
func status(t testing.TB, p *brptest.Proc) publicatie.Status {
	t.Helper()
	resp, err := http.Get("http://" + p.HTTPAddr() + "/status")
	if err != nil {
		t.Fatalf("status of %s: %v", p.Name, err)
	}
	defer resp.Body.Close()
	var st publicatie.Status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatalf("status of %s: %v", p.Name, err)
	}
	return st
}

func lineTime(l map[string]any) time.Time { return l["_at"].(time.Time) }

func errorf(format string, a ...any) error { return fmt.Errorf(format, a...) }
