package scenarios

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/brp/levering/handeling"
	"github.com/brp/levering/internal/brptest"
	"github.com/brp/levering/internal/load"
)

// TestChaos runs 20,000 handelingen over 2,000 persons (5,000 over 500 on RabbitMQ) through one
// publisher and four consumers (real processes on services of its own) while a loop kill -9s
// a random consumer every 1-3 s and restarts it, the broker is restarted once and the
// publisher is killed once and replaced; first of all, one consumer is frozen for good
// (SIGSTOP, never resumed) and replaced. The workload is registered in ten waves, oldest
// first, the next one after each of those events: the events then happen while work is in
// flight however fast the machine delivers (a RabbitMQ run once finished before the
// publisher kill). scripts/test.sh runs it on its own, verbosely, so its counts are printed.
//
// On the kern layout (BRP_TEST_LAYOUT=kern) the ActiveMQ run spreads the 20,000 over 5,000
// persons, a third of the handelingen multi-person, as issue 42 asks, and checks at the end that no kern column was added and that the
// handelingen of the excluded soort (status 2) are untouched.
func TestChaos(t *testing.T) {
	personen := 2000
	if brptest.Layout() == handeling.Kern {
		personen = 5000
	}
	t.Run("ActiveMQ", func(t *testing.T) { chaos(t, brptest.PrivateServices(t), 20000, personen) })
	t.Run("RabbitMQ", func(t *testing.T) { chaos(t, brptest.PrivateRabbitMQ(t), 5000, 500) })
}

func chaos(t *testing.T, svc *brptest.Services, n, personen int) {
	multi := 0.3
	if brptest.Layout() == handeling.Kern {
		multi = 1.0 / 3 // issue 42's target: a third multi-person
	}
	spec := load.Spec{N: n, Personen: personen, Multi: multi, Excluded: 0.05, NoPerson: 5, Seed: uint64(time.Now().UnixNano())}
	w := makeEmptyWorld(t, svc, svc.Broker(), spec)
	const waves = 10
	hs := w.hs // the late writers below add to w.hs while the waves go in
	wave := func(i int) []load.Handeling { return hs[i*len(hs)/waves : (i+1)*len(hs)/waves] }
	if err := load.Insert(context.Background(), w.db, wave(0)); err != nil {
		t.Fatal(err)
	}
	inserted := 1
	pubBin, conBin := brptest.Build(t, "cmd/publicatie"), brptest.Build(t, "cmd/mutatielevering")
	// With groups (the default): a person's queued handelingen travel together through every
	// kill, restart and freeze below.
	total, noPerson, excluded := 0, 0, 0
	for _, h := range w.hs {
		switch {
		case h.Soort == load.ExcludedSoort:
			excluded++
		case len(h.Personen) == 0:
			noPerson++
		default:
			total++
		}
	}

	var mu sync.Mutex
	publishers := []*brptest.Proc{w.publisherProc(t, "publicatie-1", pubBin)}
	var consumers [4]*brptest.Proc
	for i := range consumers {
		consumers[i] = w.consumerProc(t, fmt.Sprintf("mutatielevering-%d", i+1), conBin)
	}
	start := time.Now()
	kills, brokerRestarts, publisherKills := 0, 0, 0
	var frozen *brptest.Proc
	ctx, cancel := context.WithCancel(context.Background())
	chaosDone := make(chan struct{})
	go func() {
		defer close(chaosDone)
		r := rand.New(rand.NewPCG(spec.Seed, 1))
		for n := 1; ; n++ {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second + time.Duration(r.IntN(2000))*time.Millisecond):
			}
			delivered := w.delivered(t)
			mu.Lock()
			switch {
			case frozen == nil:
				i := r.IntN(len(consumers))
				frozen = consumers[i]
				frozen.Signal(syscall.SIGSTOP)
				consumers[i] = w.consumerProc(t, fmt.Sprintf("mutatielevering-%d.%d", i+1, n), conBin)
			case brokerRestarts == 0 && delivered > total/4:
				svc.RestartBroker()
				brokerRestarts++
			case publisherKills == 0 && delivered > total/2:
				old := publishers[len(publishers)-1]
				old.Kill()
				publishers = append(publishers, w.publisherProc(t, fmt.Sprintf("publicatie-%d", len(publishers)+1), pubBin))
				publisherKills++
			default:
				i := r.IntN(len(consumers))
				consumers[i].Kill()
				consumers[i] = w.consumerProc(t, fmt.Sprintf("mutatielevering-%d.%d", i+1, n), conBin)
				kills++
			}
			mu.Unlock()
			if inserted < waves {
				if err := load.Insert(ctx, w.db, wave(inserted)); err != nil {
					t.Errorf("register wave %d: %v", inserted+1, err)
					return
				}
				inserted++
			}
		}
	}()

	// Meanwhile, writers held just past MAXWAIT (issue 48): each registers a handeling of a
	// person of its own and links it, another transaction commits a newer handeling of that
	// person, and the first commits 2.1 s after it began. Both are delivered, in order.
	slow := lateWriters(t, w, 50, 2100*time.Millisecond)
	w.hs = append(w.hs, slow...)
	total += len(slow)

	rep := verifyDeliveredWithin(t, w.db, w.hs, w.verzending, 10*time.Minute)
	cancel()
	<-chaosDone
	mu.Lock()
	defer mu.Unlock()
	published := 0
	for _, p := range publishers {
		for _, l := range p.Lines("round committed") {
			n, _ := l["published"].(float64)
			published += int(n)
		}
	}
	st := brptest.Statuses(t, w.db)
	t.Logf("chaos: %d handelingen (%d to deliver, %d without persons to set fout, %d excluded) in %v",
		len(w.hs), total, noPerson, excluded, time.Since(start).Round(time.Second))
	t.Logf("chaos: published %d (by committed rounds, incl. republished), delivered %d, fout %d, verzending messages %d, duplicates %d",
		published, st["geleverd"], st["fout"], rep.Messages, rep.Duplicates)
	t.Logf("chaos: %d writers held %v past their newer handelingen' commits: all delivered, in order", len(slow)/2, 2100*time.Millisecond)
	t.Logf("chaos: consumer kills %d, broker restarts %d, publisher kills %d, consumers frozen for good 1 (%s); per-person order OK",
		kills, brokerRestarts, publisherKills, frozen.Name)
	if brokerRestarts != 1 || publisherKills != 1 || kills < 5 {
		t.Fatalf("chaos incomplete: %d consumer kills, %d broker restarts, %d publisher kills", kills, brokerRestarts, publisherKills)
	}
	if !frozen.Frozen() {
		t.Fatalf("%s did not stay frozen to the end", frozen.Name)
	}
	if brptest.Layout() == handeling.Kern {
		brptest.KernUntouched(t, w.db, excluded)
	}
}

// lateWriters runs n writers, five at a time, on w's database: each begins, registers a
// handeling of a person of its own and links it; another transaction registers and commits a
// newer handeling of that person; the first commits open after it began. It returns the 2n
// handelingen once all committed. (In the kern layout the newer one's his row waits for the
// first's: a person's writers wait for each other there, as bijhouding's do.)
func lateWriters(t *testing.T, w *world, n int, open time.Duration) []load.Handeling {
	t.Helper()
	out := make([]load.Handeling, 2*n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 5)
	errs := make(chan error, 2*n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			person := int64(90_000_000 + i)
			older := load.Handeling{ID: int64(90_000_000 + 2*i), Soort: "VERHUIZING", Tsreg: time.Now().Truncate(time.Microsecond), Personen: []int64{person}}
			began := time.Now()
			tx, err := w.db.Beginx()
			if err != nil {
				errs <- err
				return
			}
			defer tx.Rollback() //nolint:errcheck
			if err := insertHandeling(tx, older); err != nil {
				errs <- err
				return
			}
			newer := load.Handeling{ID: older.ID + 1, Soort: "VERHUIZING", Tsreg: time.Now().Truncate(time.Microsecond), Personen: []int64{person}}
			done := make(chan error, 1)
			go func() {
				ntx, err := w.db.Beginx()
				if err == nil {
					defer ntx.Rollback() //nolint:errcheck
					if err = insertHandeling(ntx, newer); err == nil {
						err = ntx.Commit()
					}
				}
				done <- err
			}()
			time.Sleep(time.Until(began.Add(open)))
			if err := tx.Commit(); err != nil {
				errs <- err
				return
			}
			if err := <-done; err != nil {
				errs <- err
				return
			}
			out[2*i], out[2*i+1] = older, newer
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("late writers: %v", err)
	}
	return out
}
