package scenarios

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/brp/levering/internal/brptest"
	"github.com/brp/levering/internal/load"
	"github.com/brp/levering/internal/rig"
)

// BenchmarkBacklogRSS is the peak-RSS check under a large backlog (issue 5): BRP_RSS_N
// handelingen still to be delivered (default 1,000,000, over a tenth as many persons), one
// publicatie and two mutatielevering processes on a PostgreSQL and an ActiveMQ of their own,
// for BRP_RSS_SECONDS (default 90), each
// process's resident memory logged every 5 s. Flat columns mean memory does not grow with the
// backlog. Reported: the peak RSS of the publisher and of the larger consumer, the most any
// process grew between the first and the last sample, and how many were delivered meanwhile.
func BenchmarkBacklogRSS(b *testing.B) {
	n, secs := envInt("BRP_RSS_N", 1_000_000), envInt("BRP_RSS_SECONDS", 90)
	for b.Loop() {
		svc := brptest.PrivateServices(b) // a million messages through the shared broker would crowd the other tests
		w := makeEmptyWorld(b, svc, svc.Broker(), load.Spec{})
		for _, q := range []string{
			`insert into admhnd (id, soort, tsreg)
			  select g, 'VERHUIZING', now() - interval '1 day' + g * interval '1 ms' from generate_series(1, $1::bigint) g`,
			`insert into admhnd_persoon select g, 1 + g % greatest($1::bigint / 10, 1) from generate_series(1, $1::bigint) g`,
		} {
			if _, err := w.db.ExecContext(context.Background(), q, n); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := w.db.ExecContext(context.Background(), `analyze admhnd; analyze admhnd_persoon`); err != nil {
			b.Fatal(err)
		}
		info := "BRP_LOG_LEVEL=info"
		procs := []*brptest.Proc{w.publisherProc(b, "publicatie", brptest.Build(b, "cmd/publicatie"), info)}
		for i := range 2 {
			procs = append(procs, w.consumerProc(b, fmt.Sprintf("mutatielevering-%d", i+1), brptest.Build(b, "cmd/mutatielevering"), info))
		}
		var table strings.Builder
		fmt.Fprintf(&table, "%6s %10s %16s %16s %16s\n", "s", "geleverd", "publicatie_MB", "consumer1_MB", "consumer2_MB")
		first := make([]float64, len(procs))
		growth := 0.0
		for t := 5; t <= secs; t += 5 {
			time.Sleep(5 * time.Second)
			fmt.Fprintf(&table, "%6d %10d", t, w.delivered(b))
			for i, p := range procs {
				rss := rig.RSSMB(p.PID())
				if t == 5 {
					first[i] = rss
				}
				growth = max(growth, rss-first[i])
				fmt.Fprintf(&table, " %16.1f", rss)
			}
			table.WriteByte('\n')
		}
		b.Logf("resident memory every 5 s:\n%s", table.String())
		b.ReportMetric(procs[0].PeakRSSMB(), "publicatie_peak_MB")
		b.ReportMetric(max(procs[1].PeakRSSMB(), procs[2].PeakRSSMB()), "mutatielevering_peak_MB")
		b.ReportMetric(growth, "growth_MB")
		b.ReportMetric(float64(w.delivered(b)), "geleverd")
	}
}

// envInt is the positive integer in the environment variable name, or def.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
