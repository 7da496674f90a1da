package scenarios

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"testing"
	"time"

	"github.com/brp/levering/internal/brptest"
	"github.com/brp/levering/internal/load"
)

// holdBehindFout registers, on w's database, n persons (from 1) each with a fout handeling
// and a later one still to be delivered, registered an hour ago, as a faulty release of
// bijhouding or a burst of overtaken handelingen leaves them.
func holdBehindFout(t testing.TB, w *world, n int) {
	t.Helper()
	w.db.MustExec(`insert into admhnd (id, soort, tsreg, statuslev, foutreden)
		select i, 'VERHUIZING', now() - interval '1 hour' + make_interval(secs => i / 10000.0), 'fout', 'test'
		from generate_series(1, $1::int) i`, n)
	w.db.MustExec(`insert into admhnd (id, soort, tsreg)
		select $1::int + i, 'VERHUIZING', now() - interval '30 minutes' + make_interval(secs => i / 10000.0)
		from generate_series(1, $1::int) i`, n)
	w.db.MustExec(`insert into admhnd_persoon (admhnd_id, persoon_id)
		select i, i from generate_series(1, $1::int) i union all select $1::int + i, i from generate_series(1, $1::int) i`, n)
	w.db.MustExec(`analyze admhnd, admhnd_persoon`)
}

// registerFree registers one handeling of person, as bijhouding does (tsreg now, its person in
// the same transaction), and returns its id.
func registerFree(t testing.TB, w *world, id, person int64) {
	t.Helper()
	w.db.MustExec(`with a as (insert into admhnd (id, soort, tsreg) values ($1, 'VERHUIZING', now()) returning id)
		insert into admhnd_persoon select id, $2 from a`, id, person)
}

// TestFoutNeverStopsOthers (issue 39): with 4,100 or 100,000 persons held behind fout, each
// with a later handeling waiting, a handeling of another person registered after all of them
// is delivered (by real publicatie and mutatielevering processes), and nothing held is. The
// leader's metrics and `publicatie status` say how many handelingen wait behind fout and of
// how many persons. How long the free one takes is BenchmarkHeldBehindFout's to measure.
func TestFoutNeverStopsOthers(t *testing.T) {
	t.Parallel()
	for _, n := range []int{4_100, 100_000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			t.Parallel()
			w := makeEmptyWorld(t, nil, brptest.Broker(), load.Spec{})
			holdBehindFout(t, w, n)
			bin := brptest.Build(t, "cmd/publicatie")
			pub := w.publisherProc(t, "publicatie", bin)
			w.consumerProc(t, "mutatielevering", brptest.Build(t, "cmd/mutatielevering"))
			brptest.Eventually(t, 2*time.Minute, func() error {
				m := scrape(t, pub)
				if h, p := m["brp_levering_held_behind_fout_handelingen"], m["brp_levering_held_behind_fout_persons"]; h != float64(n) || p != float64(n) {
					return fmt.Errorf("the leader counts %v held behind fout of %v persons, want %d of %d", h, p, n, n)
				}
				return nil
			})
			free := int64(2*n + 1)
			registerFree(t, w, free, int64(n+1))
			start := time.Now()
			brptest.Eventually(t, time.Minute, func() error {
				if ids := w.verzending.IDs(); len(ids) == 0 {
					return fmt.Errorf("nothing delivered yet")
				}
				return nil
			})
			t.Logf("%d held behind fout: the free handeling on the verzending queue %v after its registration", n, time.Since(start).Round(time.Millisecond))
			time.Sleep(time.Second) // anything else the consumers send arrives meanwhile
			if ids := w.verzending.IDs(); len(ids) != 1 || ids[0] != free {
				t.Fatalf("delivered %v, want only the free handeling %d", ids, free)
			}
			if st := brptest.Statuses(t, w.db); st["fout"] != n || st[""] != n || st["geleverd"] != 1 {
				t.Fatalf("statuses %v, want %d fout, %d te leveren, 1 geleverd", st, n, n)
			}
			// Counted from the tables within the status's budget, or else the leader's own count,
			// which it writes within a round or two of its view's (issue 49).
			want := regexp.MustCompile(fmt.Sprintf(`held behind fout\s+%d\s+handeling\(en\) of %d person\(s\)`, n, n))
			brptest.Eventually(t, time.Minute, func() error {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				cmd := exec.CommandContext(ctx, bin, "status")
				cmd.Env = w.env()
				began := time.Now()
				out, err := cmd.Output()
				if err != nil {
					t.Fatalf("publicatie status: %v\n%s", err, out)
				}
				if !want.Match(out) {
					return fmt.Errorf("publicatie status does not say %d held behind fout of %d persons:\n%s", n, n, out)
				}
				t.Logf("%d held behind fout: publicatie status answered in %v", n, time.Since(began).Round(time.Millisecond))
				return nil
			})
		})
	}
}
