package scenarios

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/brp/levering/internal/brptest"
	"github.com/brp/levering/internal/load"
	"github.com/brp/levering/publicatie"
)

// A long read-only transaction in the same database (pg_dump, a report) does not pause
// publication: the horizon leaves it out after publicatie.LateWriterGrace. Before, nothing
// registered after its start was published until it ended.
func TestLongReaderDoesNotPausePublication(t *testing.T) {
	t.Parallel()
	w := makeEmptyWorld(t, nil, brptest.Broker(), load.Spec{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reader, err := w.db.Connx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	var pid int
	if err := reader.GetContext(ctx, &pid, `select pg_backend_pid()`); err != nil {
		t.Fatal(err)
	}
	readerDone := make(chan error, 1)
	go func() {
		tx, err := reader.BeginTxx(ctx, nil)
		if err != nil {
			readerDone <- err
			return
		}
		defer tx.Rollback() //nolint:errcheck
		_, err = tx.ExecContext(ctx, `select count(*) from admhnd; select pg_sleep(120)`)
		readerDone <- err
	}()
	brptest.Eventually(t, 10*time.Second, func() error {
		var n int
		if err := w.db.Get(&n, `select count(*) from pg_stat_activity where pid = $1 and query like '%pg_sleep%'`, pid); err != nil {
			return err
		}
		if n == 0 {
			return errors.New("the reader has not begun")
		}
		return nil
	})
	time.Sleep(publicatie.LateWriterGrace + 500*time.Millisecond)
	w.hs = load.Generate(load.Spec{N: 500, Personen: 100, Multi: 0.2, Seed: 7, Start: time.Now().Add(-600 * time.Millisecond)})
	if err := load.Insert(ctx, w.db, w.hs); err != nil {
		t.Fatal(err)
	}
	w.consumers(t, 2, 2)
	w.publisher(t, publicatie.Config{})
	w.verify(t)
	var running bool
	if err := w.db.Get(&running, `select exists (select from pg_stat_activity where pid = $1 and state = 'active')`, pid); err != nil {
		t.Fatal(err)
	}
	if !running {
		t.Fatalf("the reader ended before everything was delivered: %v", <-readerDone)
	}
	cancel()
	<-readerDone
}

// Issue 22's "2,000 handelingen of 500 persons each": the real publisher took them all into its
// view (VIEWSIZE counts handelingen) and grew from 15 to 213 MB resident. The view is bounded
// in bytes now (BRP_LEVERING_ADMHNDPUBLICATIE_VIEWBYTES, default 32 MiB); everything is still
// delivered, in order. Each handeling shares one person with every 200th other, so 200 chains
// of ten deliver one link at a time (groups off: with them the chains drain faster than the
// view fills) while the rest waits in the view, which fills before the consumers start. (Twenty chains of a hundred tried
// the same in ten times the steps: 89 s on an idle machine against 73 s.)
func TestPublisherMemoryBoundedByViewBytes(t *testing.T) {
	t.Parallel()
	w := makeEmptyWorld(t, nil, brptest.Broker(), load.Spec{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now().Add(time.Second) // at or after the inserting transaction's start
	for i := range 2000 {
		h := load.Handeling{ID: int64(i + 1), Soort: "VERHUIZING", Tsreg: start.Add(time.Duration(i) * time.Microsecond),
			Personen: []int64{int64(i%200 + 1)}}
		for p := range 499 {
			h.Personen = append(h.Personen, int64(1000+i*500+p))
		}
		w.hs = append(w.hs, h)
	}
	if err := load.Insert(ctx, w.db, w.hs); err != nil {
		t.Fatal(err)
	}
	const viewBytes = 32 << 20 // the default
	pub := w.publisherProc(t, "publicatie", brptest.Build(t, "cmd/publicatie"), "BRP_LEVERING_ADMHNDPUBLICATIE_GROUPSIZE=1")
	var most atomic.Int64
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for ctx.Err() == nil {
			if m, err := pub.Metrics(ctx); err == nil && int64(m["brp_levering_publicatie_view_bytes"]) > most.Load() {
				most.Store(int64(m["brp_levering_publicatie_view_bytes"]))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	// The consumers start once the view has filled: until then the chains' first links stay in
	// levering and the rest waits in the view. Started at once, they drained the chains while the
	// intake was still reading, on a busy machine faster than the view filled (a lane beside two
	// busy loops: 16.7 MiB at most), and the bound was not tried.
	brptest.Eventually(t, 3*time.Minute, func() error {
		if n := most.Load(); n < viewBytes*9/10 {
			return fmt.Errorf("the view holds %d bytes, not yet nine tenths of VIEWBYTES (%d)", n, viewBytes)
		}
		return nil
	})
	w.consumers(t, 2, 2)
	w.verify(t)
	cancel()
	<-sampled
	peak := pub.PeakRSSMB()
	t.Logf("view at most %.1f MiB estimated; publicatie peak RSS %.1f MB", float64(most.Load())/(1<<20), peak)
	if most.Load() < viewBytes*9/10 {
		t.Errorf("the view took at most %d bytes: it never filled, so the bound was not tried", most.Load())
	}
	if most.Load() > viewBytes+1<<20 {
		t.Errorf("the view took %d bytes; VIEWBYTES is %d (plus at most one handeling, 64 KiB here)", most.Load(), viewBytes)
	}
	// About 20 MB of its own and the view's heap twice over (GOGC); the unbounded view took
	// 213 MB.
	if peak > 120 {
		t.Errorf("publicatie peak RSS %.1f MB with the view bounded at 32 MiB", peak)
	}
}
