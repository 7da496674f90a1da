package scenarios

import (
	"context"
	"fmt"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/brp/levering/internal/brptest"
	"github.com/brp/levering/internal/load"
	"github.com/brp/levering/publicatie"
)

// BenchmarkBulkRetry measures issue 49's operator at scale: BRP_BULK_FOUT fout handelingen
// (default 50,000, one person each) and BRP_BULK_HELD of their persons (default 10,000) with a
// later handeling held behind them, a publisher and three consumers (real processes), and
// bijhouding registering 200 handelingen a second of other persons throughout. It times
// `publicatie status` (three times), then `publicatie fout retry --all`, then waits until every
// retried and held handeling is geleverd, checks per-person order on the verzending queue, and
// reports the unrelated registrations' delay (tslev - tsreg) meanwhile.
//
// Figures: status_max_ms, retry_s (the command), delivered_s (from the retry's end until all
// are geleverd), load_p50_ms, load_p99_ms, load_max_ms (the 200/s registrations during the
// retry and the delivery), order_violations.
func BenchmarkBulkRetry(b *testing.B) {
	fouts, held := envInt("BRP_BULK_FOUT", 50_000), envInt("BRP_BULK_HELD", 10_000)
	w := makeEmptyWorld(b, nil, brptest.Broker(), load.Spec{})
	// Persons 1..fouts each with a fout handeling; persons 1..held with a later one waiting.
	w.db.MustExec(`insert into admhnd (id, soort, tsreg, statuslev, foutreden)
		select i, 'VERHUIZING', now() - interval '1 hour' + make_interval(secs => i / 100000.0), 'fout', 'afnemerindicatie ontbreekt'
		from generate_series(1, $1::int) i`, fouts)
	w.db.MustExec(`insert into admhnd (id, soort, tsreg)
		select $1::int + i, 'VERHUIZING', now() - interval '30 minutes' + make_interval(secs => i / 100000.0)
		from generate_series(1, $2::int) i`, fouts, held)
	w.db.MustExec(`insert into admhnd_persoon (admhnd_id, persoon_id)
		select i, i from generate_series(1, $1::int) i union all select $1::int + i, i from generate_series(1, $2::int) i`, fouts, held)
	w.db.MustExec(`analyze admhnd, admhnd_persoon`)
	var hs []load.Handeling
	for i := 1; i <= fouts; i++ {
		hs = append(hs, load.Handeling{ID: int64(i), Soort: "VERHUIZING", Personen: []int64{int64(i)}})
	}
	for i := 1; i <= held; i++ {
		hs = append(hs, load.Handeling{ID: int64(fouts + i), Soort: "VERHUIZING", Personen: []int64{int64(i)}})
	}

	bin := brptest.Build(b, "cmd/publicatie")
	pub := w.publisherProc(b, "publicatie", bin)
	con := brptest.Build(b, "cmd/mutatielevering")
	for i := range 3 {
		w.consumerProc(b, fmt.Sprintf("mutatielevering-%d", i+1), con)
	}
	brptest.Eventually(b, 3*time.Minute, func() error {
		if h := scrape(b, pub)["brp_levering_held_behind_fout_handelingen"]; h != float64(held) {
			return fmt.Errorf("the leader counts %v held behind fout, want %d", h, held)
		}
		return nil
	})

	// Bijhouding: 200 a second of persons of their own, until the end.
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var mu sync.Mutex
	var loadIDs []int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for i := int64(1); ctx.Err() == nil; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			id, person := int64(10_000_000)+i, int64(10_000_000)+i%20_000
			if _, err := w.db.ExecContext(ctx, `with a as (insert into admhnd (id, soort, tsreg) values ($1, 'GEBOORTE', now()) returning id)
				insert into admhnd_persoon select id, $2 from a`, id, person); err != nil {
				return
			}
			mu.Lock()
			loadIDs = append(loadIDs, id)
			hs = append(hs, load.Handeling{ID: id, Soort: "GEBOORTE", Personen: []int64{person}})
			mu.Unlock()
		}
	}()
	time.Sleep(5 * time.Second)

	run := func(args ...string) (time.Duration, string) {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(cctx, bin, args...)
		cmd.Env = w.env()
		began := time.Now()
		out, err := cmd.CombinedOutput()
		if err != nil {
			b.Fatalf("publicatie %v: %v\n%s", args, err, out)
		}
		return time.Since(began), string(out)
	}
	var statusMax time.Duration
	for range 3 {
		d, _ := run("status")
		statusMax = max(statusMax, d)
	}
	retryStart := time.Now()
	retry, out := run("fout", "retry", "--all", "--door", "bench")
	retried := time.Now()
	b.Logf("retry --all took %v:\n%s", retry.Round(time.Millisecond), out)
	brptest.EventuallyEvery(b, 10*time.Minute, time.Second, func() error {
		var left int
		if err := w.db.Get(&left, `select count(*) from admhnd where id <= $1 and statuslev is distinct from 'geleverd'`, fouts+held); err != nil {
			return err
		}
		if left > 0 {
			return fmt.Errorf("%d of %d retried and held not yet geleverd", left, fouts+held)
		}
		return nil
	})
	delivered := time.Since(retried)
	stop()
	wg.Wait()

	var p50, p99, pmax float64
	if err := w.db.QueryRow(`select coalesce(percentile_cont(0.5) within group (order by d), 0), coalesce(percentile_cont(0.99) within group (order by d), 0), coalesce(max(d), 0)
		from (select extract(epoch from tslev - tsreg) * 1000 as d from admhnd where id > 10000000 and tsreg >= $1 and tslev is not null) x`, retryStart).Scan(&p50, &p99, &pmax); err != nil {
		b.Fatal(err)
	}
	brptest.EventuallyEvery(b, 5*time.Minute, time.Second, func() error {
		if n := w.verzending.Count(); n < fouts+held {
			return fmt.Errorf("the verzending reader has %d messages, want at least %d", n, fouts+held)
		}
		return nil
	})
	mu.Lock()
	byID := load.ByID(hs)
	mu.Unlock()
	rep := load.CheckOrder(w.verzending.IDs(), byID)
	b.ReportMetric(float64(statusMax.Milliseconds()), "status_max_ms")
	b.ReportMetric(retry.Seconds(), "retry_s")
	b.ReportMetric(delivered.Seconds(), "delivered_s")
	b.ReportMetric(p50, "load_p50_ms")
	b.ReportMetric(p99, "load_p99_ms")
	b.ReportMetric(pmax, "load_max_ms")
	b.ReportMetric(float64(len(rep.Violations)), "order_violations")
	b.Logf("%d fout and %d held: status at most %v; retry --all %v; all geleverd %v after it; unrelated registrations meanwhile p50 %.0f ms, p99 %.0f ms, max %.0f ms (%d registered); %d order violations",
		fouts, held, statusMax.Round(time.Millisecond), retry.Round(time.Millisecond), delivered.Round(time.Second), p50, p99, pmax, len(loadIDs), len(rep.Violations))
	if len(rep.Violations) > 0 {
		b.Fatalf("per-person order violated:\n%v", rep.Violations)
	}
}

// BenchmarkFailoverHeld measures issue 49's takeover with BRP_FAILOVER_HELD persons (default
// 100,000) held behind fout: two publishers (default lease timeout) and a consumer, real
// processes; the leader is killed (kill -9), a handeling of another person is registered at
// once, and the figures are the time from the kill until the follower leads (takeover_s) and
// until that handeling is on the verzending queue (first_free_s), against the lease timeout
// (lease_timeout_s).
func BenchmarkFailoverHeld(b *testing.B) {
	n := envInt("BRP_FAILOVER_HELD", 100_000)
	w := makeEmptyWorld(b, nil, brptest.Broker(), load.Spec{})
	holdBehindFout(b, w, n)
	bin := brptest.Build(b, "cmd/publicatie")
	a := w.publisherProc(b, "publicatie-a", bin)
	a.WaitLeader(time.Minute)
	f := w.publisherProc(b, "publicatie-b", bin)
	f.WaitReady(time.Minute)
	w.consumerProc(b, "mutatielevering", brptest.Build(b, "cmd/mutatielevering"))
	brptest.Eventually(b, 3*time.Minute, func() error {
		if h := scrape(b, a)["brp_levering_held_behind_fout_handelingen"]; h != float64(n) {
			return fmt.Errorf("the leader counts %v held behind fout, want %d", h, n)
		}
		if l := logged(f, "connected to broker"); l == nil {
			return fmt.Errorf("the follower has not connected to the broker yet")
		}
		return nil
	})
	time.Sleep(2 * time.Second)
	a.Kill()
	killed := time.Now()
	free := int64(2*n + 1)
	registerFree(b, w, free, int64(n+1))
	took := f.WaitLeader(2 * time.Minute).Sub(killed)
	brptest.EventuallyEvery(b, 2*time.Minute, 10*time.Millisecond, func() error {
		if w.verzending.Count() == 0 {
			return fmt.Errorf("the free handeling is not delivered yet")
		}
		return nil
	})
	first := time.Since(killed)
	lease := publicatie.MinLeaseTimeout // the default: twice the default delay (5 s), at least this
	b.ReportMetric(took.Seconds(), "takeover_s")
	b.ReportMetric(first.Seconds(), "first_free_s")
	b.ReportMetric(lease.Seconds(), "lease_timeout_s")
	b.Logf("%d held behind fout: the follower led %v after the kill, the free handeling was delivered %v after it (lease timeout %v)",
		n, took.Round(time.Millisecond), first.Round(time.Millisecond), lease)
}

// BenchmarkSweepSoak counts issue 49's sweep rebuilds under churn: BRP_SOAK_SECONDS (default
// 900) of bijhouding registering BRP_SOAK_RATE handelingen a second (default 300) over 20,000
// persons, a handeling in levering (else the oldest still to be delivered) set fout by hand
// every second, and `publicatie fout retry
// --all` every minute, with a publisher and two consumers (real processes). Figures:
// sweep_rebuilds (brp_levering_publicatie_view_rebuilds_total{reason="sweep"}: every one is a disagreement
// between the view and the database that the sweep did not put down to what committed between
// its reads), fouts, retried.
func BenchmarkSweepSoak(b *testing.B) {
	secs, rate := envInt("BRP_SOAK_SECONDS", 900), envInt("BRP_SOAK_RATE", 300)
	w := makeEmptyWorld(b, nil, brptest.Broker(), load.Spec{})
	bin := brptest.Build(b, "cmd/publicatie")
	pub := w.publisherProc(b, "publicatie", bin)
	con := brptest.Build(b, "cmd/mutatielevering")
	for i := range 2 {
		w.consumerProc(b, fmt.Sprintf("mutatielevering-%d", i+1), con)
	}
	pub.WaitLeader(time.Minute)
	ctx, stop := context.WithTimeout(context.Background(), time.Duration(secs)*time.Second)
	defer stop()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // bijhouding
		defer wg.Done()
		tick := time.NewTicker(time.Second / time.Duration(rate))
		defer tick.Stop()
		for i := int64(1); ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			_, _ = w.db.ExecContext(ctx, `with a as (insert into admhnd (id, soort, tsreg) values ($1, 'GEBOORTE', now()) returning id)
				insert into admhnd_persoon select id, $2 from a`, i, i%20_000)
		}
	}()
	fouts, retries := 0, 0
	second, minute := time.NewTicker(time.Second), time.NewTicker(time.Minute)
	defer second.Stop()
	defer minute.Stop()
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-second.C:
			// One in levering (a consumer's fout), else the oldest still to be delivered (a fout
			// set by hand), so that every second has one.
			if r, err := w.db.ExecContext(ctx, `update admhnd set statuslev = 'fout', foutreden = 'soak'
				where id = coalesce((select id from admhnd where statuslev = 'in_levering' limit 1),
				                    (select id from admhnd where statuslev is null order by tsreg, id limit 1))`); err == nil {
				if n, _ := r.RowsAffected(); n > 0 {
					fouts++
				}
			}
		case <-minute.C:
			cmd := exec.Command(bin, "fout", "retry", "--all", "--door", "soak")
			cmd.Env = w.env()
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("retry --all: %v\n%s", err, out)
			}
			retries++
		}
	}
	wg.Wait()
	rebuilds := scrape(b, pub)[`brp_levering_publicatie_view_rebuilds_total{reason="sweep"}`]
	b.ReportMetric(rebuilds, "sweep_rebuilds")
	b.ReportMetric(float64(fouts), "fouts")
	b.ReportMetric(float64(retries), "retries")
	b.Logf("%d s at %d/s with %d fouts and %d retries: %v sweep rebuilds", secs, rate, fouts, retries, rebuilds)
}
