package scenarios

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/brp/levering/broker"
	"github.com/brp/levering/internal/brptest"
	"github.com/brp/levering/internal/load"
	"github.com/brp/levering/publicatie"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// goRun runs fn in the background until the test ends.
func goRun(t testing.TB, fn func(ctx context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := fn(ctx); err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// watchInLevering samples the number of handelingen in levering until the test ends and
// returns a function giving the highest value seen.
func watchInLevering(t testing.TB, db *sqlx.DB) func() int64 {
	var peak atomic.Int64
	goRun(t, func(ctx context.Context) error {
		for ctx.Err() == nil {
			var n int64
			if err := db.GetContext(ctx, &n, `select count(*) from admhnd where statuslev = 'in_levering'`); err == nil && n > peak.Load() {
				peak.Store(n)
			}
			time.Sleep(10 * time.Millisecond)
		}
		return nil
	})
	return peak.Load
}

// verifyDelivered checks the contract's guarantees once the run is over: every handeling not
// excluded is geleverd (or fout when it has no persons), the excluded ones are untouched, and
// the verzending queue shows every delivered handeling in per-person order. It fails when
// nothing was delivered for 3 minutes.
func verifyDelivered(t testing.TB, db *sqlx.DB, hs []load.Handeling, verzending *brptest.Reader) load.OrderReport {
	t.Helper()
	return verifyDeliveredWithin(t, db, hs, verzending, 3*time.Minute)
}

// verifyDeliveredWithin is verifyDelivered with how long the run may go without delivering
// anything (brptest.WhileProgressing): a slow run on a busy machine passes, a stalled one fails.
func verifyDeliveredWithin(t testing.TB, db *sqlx.DB, hs []load.Handeling, verzending *brptest.Reader, stall time.Duration) load.OrderReport {
	t.Helper()
	want := 0
	wantFout := 0
	for _, h := range hs {
		switch {
		case h.Soort == load.ExcludedSoort:
		case len(h.Personen) == 0:
			wantFout++
		default:
			want++
		}
	}
	// Counting the statuses scans the whole table: every 50 ms it would cost a benchmark's
	// database more than the rounds it measures.
	every := 50 * time.Millisecond
	if len(hs) > 10_000 {
		every = time.Second
	}
	brptest.WhileProgressing(t, stall, every, func() (int64, error) {
		st := brptest.Statuses(t, db)
		if st["geleverd"] != want || st["fout"] != wantFout {
			return int64(st["geleverd"] + st["fout"]), fmt.Errorf("statuses %v, want %d geleverd and %d fout", st, want, wantFout)
		}
		return 0, nil
	})
	var touched int
	if err := db.Get(&touched, `select count(*) from admhnd where soort = $1 and (statuslev is not null or tslev is not null or tspub is not null)`, load.ExcludedSoort); err != nil {
		t.Fatal(err)
	}
	if touched != 0 {
		t.Fatalf("%d excluded handelingen were touched", touched)
	}
	// The reader may trail the consumers by a large backlog (catch-up: a million messages, read
	// at about the rate they were delivered): wait while it makes progress, fail when it stalls.
	for n, since := verzending.Count(), time.Now(); n < want; {
		time.Sleep(100 * time.Millisecond)
		if m := verzending.Count(); m > n {
			n, since = m, time.Now()
		} else if time.Since(since) > 30*time.Second {
			t.Fatalf("the verzending queue gave no message for 30 s after %d, want at least %d", n, want)
		}
	}
	var rep load.OrderReport
	byID := load.ByID(hs)
	brptest.Eventually(t, 30*time.Second, func() error {
		rep = load.CheckOrder(verzending.IDs(), byID)
		if rep.Distinct != want {
			return fmt.Errorf("verzending holds %d distinct handelingen, want %d", rep.Distinct, want)
		}
		return nil
	})
	if len(rep.Violations) > 0 {
		t.Fatalf("per-person order violated on the verzending queue:\n%v", rep.Violations)
	}
	return rep
}

// TestEndToEnd runs 2,000 handelingen over 200 persons (a third multi-person) through one
// publisher and four consumers, on each supported broker and with statuslev as text and as
// an enum (bijhouding's choice, docs/contract.md section 1), with the seed's default delay (5 s):
// speed comes from the wake-ups.
func TestEndToEnd(t *testing.T) {
	t.Parallel()
	for name, b := range map[string]func(*testing.T) broker.Config{
		"ActiveMQ": func(*testing.T) broker.Config { return brptest.Broker() },
		"RabbitMQ": func(t *testing.T) broker.Config { return brptest.RabbitMQ(t) },
	} {
		for _, form := range brptest.StatusForms {
			name := name + "/" + form.Name
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				endToEnd(t, name, newWorldForm(t, b(t), form, load.Spec{N: 2000, Personen: 200, Multi: 1.0 / 3, Excluded: 0.05, Seed: 42}))
			})
		}
	}
}

func endToEnd(t *testing.T, name string, w *world) {
	peak := watchInLevering(t, w.db)
	const maxInLevering = 100
	w.consumers(t, 4, 2)
	start := time.Now()
	pub := w.publisher(t, publicatie.Config{MaxInLevering: maxInLevering})
	rep := w.verify(t)
	if p := peak(); p > maxInLevering {
		t.Fatalf("peak in levering %d exceeds MAXINLEVERING %d", p, maxInLevering)
	}
	t.Logf("%s: %d handelingen in %v: %d verzending messages (%d duplicates), %d rounds, peak in levering %d",
		name, len(w.hs), time.Since(start).Round(time.Millisecond), rep.Messages, rep.Duplicates, pub.RoundsCommitted(), peak())
}
