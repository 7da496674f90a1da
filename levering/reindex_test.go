package levering_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/brp/levering/broker"
	"github.com/brp/levering/handeling"
	"github.com/brp/levering/internal/brptest"
	"github.com/brp/levering/internal/load"
	"github.com/brp/levering/levering"
	"github.com/lib/pq"
)

// Batches beside REINDEX of the tables they read and write (issue 34): a batch reads admhnd
// (its row locks take only a RowShareLock) and writes it later, so a REINDEX that took its
// ShareLock in between would wait for an index the batch holds while the batch waits for the
// ShareLock: "deadlock detected", a batch retried as if the database were away, or the
// REINDEX failed. With the table locks taken first (batchLocksSQL) the two wait for each
// other as a whole. Checked from both sides: no REINDEX ends in a deadlock, and the consumer
// never takes the database for unavailable.
func TestBatchesBesideReindex(t *testing.T) {
	t.Parallel()
	e := startWith(t, levering.Config{Batch: 10})
	ctx := context.Background()
	// Delivered handelingen, so that each index takes some milliseconds to build.
	brptest.Bed(t, e.db, load.Generate(load.Spec{N: 20_000, Personen: 2_000, Multi: 0.3, FirstID: 1_000_000}))
	brptest.DeliverAll(t, e.db)

	reindexErrs := reindexUntilDone(t, e)

	const waves, per = 20, 30
	for w := range waves {
		hs := make([]load.Handeling, per)
		msgs := make([]broker.Message, per)
		for i := range hs {
			id := int64(w*per + i + 1)
			p := 100_000 + id // a person of its own, none of the bed's: nothing holds it back
			hs[i] = load.Handeling{ID: id, Personen: []int64{p}}
			msgs[i] = publication(id, p)
		}
		// The test's bijhouding may itself deadlock with a REINDEX: that is bijhouding's to
		// retry, as here, each transaction on its own (the registration, then the status the
		// publisher would have set); what is tested is the consumer. On the kern layout it
		// writes the kern tables themselves, as bijhouding does: through the test views a
		// statement would hold kern.admhnd's indexes (the view's plan) before the table it
		// writes, and end a REINDEX in a deadlock no real writer causes.
		ids := make([]int64, len(hs))
		for i, h := range hs {
			ids[i] = h.ID
		}
		register := func() error { return insertErr(e.db, "", hs...) }
		inLevering := `update admhnd set statuslev = 'in_levering' where id = any($1)`
		if brptest.Layout() == handeling.Kern {
			register = func() error {
				for i := range hs {
					hs[i].Soort, hs[i].Tsreg = "GEBOORTE", time.Date(2026, 1, 1, 0, 0, int(hs[i].ID), 0, time.UTC)
				}
				return load.InsertKern(ctx, e.db, hs)
			}
			inLevering = `update kern.admhnd set statuslev = 3 where id = any($1)`
		}
		for _, step := range []func() error{
			register,
			func() error {
				_, err := e.db.Exec(inLevering, pq.Array(ids))
				return err
			},
		} {
			for attempt := 0; ; attempt++ {
				err := step()
				var pe *pq.Error
				if err == nil {
					break
				}
				if !errors.As(err, &pe) || pe.Code != "40P01" || attempt == 5 {
					t.Fatal(err)
				}
			}
		}
		brptest.Publish(t, e.q.Publicatie, msgs...)
		time.Sleep(150 * time.Millisecond)
	}
	brptest.Eventually(t, 60*time.Second, func() error {
		if got := e.c.Counts().Delivered; got != waves*per {
			return fmt.Errorf("delivered %d of %d", got, waves*per)
		}
		return nil
	})
	for _, s := range reindexErrs() {
		t.Errorf("REINDEX failed: %s", s)
	}
	if n := reconnects(t, e, "database"); n != 0 {
		t.Errorf("the consumer found the database unavailable %v times (a batch ended in a deadlock?)", n)
	}
}

// reindexUntilDone reindexes e's tables (in turn, every 10 ms) until done is called, which
// returns the errors of the REINDEX statements.
func reindexUntilDone(t *testing.T, e *env) (done func() []string) {
	t.Helper()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var errs []string
	wg.Add(1)
	go func() {
		defer wg.Done()
		// After REINDEX INDEX CONCURRENTLY of admhnd_persoon's key that index has the highest
		// oid, so REINDEX TABLE takes the other one first: the order of batchLocksSQL's
		// planned read of admhnd_persoon.
		forms := []string{`reindex table admhnd`, `reindex index admhnd_in_levering_idx`, `reindex table admhnd_persoon`,
			`reindex index concurrently admhnd_persoon_pkey`, `reindex table admhnd_persoon`, `reindex table concurrently admhnd`}
		if brptest.Layout() == handeling.Kern {
			forms = []string{`reindex table kern.admhnd`, `reindex index kern.ix_admhnd_statuslev_inlevering`,
				`reindex table kern.his_persafgeleidadministrati`, `reindex index concurrently kern.ix_his_persafgeleidadministrati_admhnd`,
				`reindex table kern.his_persafgeleidadministrati`, `reindex table concurrently kern.admhnd`}
		}
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			if _, err := e.db.Exec(forms[i%len(forms)]); err != nil {
				var pe *pq.Error
				if errors.As(err, &pe) {
					err = fmt.Errorf("%w (%s)", err, pe.Detail)
				}
				errs = append(errs, fmt.Sprintf("%s: %v", forms[i%len(forms)], err))
			}
		}
	}()
	return func() []string {
		close(stop)
		wg.Wait()
		return errs
	}
}

// reconnects reads brp_levering_reconnects_total{dependency}.
func reconnects(t *testing.T, e *env, dependency string) float64 {
	t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "brp_levering_reconnects_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == dependency {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
