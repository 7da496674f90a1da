package schema_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/brp/levering/internal/brptest"
	"github.com/brp/levering/schema"
)

// BenchmarkMigrateInsertStall runs the whole migration over bijhouding's bare tables of 1M and
// 10M handelingen (BRP_MIGRATE_ROWS: a comma-separated list instead) while a bijhouding
// registers a handeling with one person per transaction, one after the other, and reports the
// longest insert (max_insert_stall_ms), how long the migration took and how many inserts it
// let through.
func BenchmarkMigrateInsertStall(b *testing.B) {
	sizes := []int{1_000_000, 10_000_000}
	if s := os.Getenv("BRP_MIGRATE_ROWS"); s != "" {
		sizes = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				b.Fatalf("BRP_MIGRATE_ROWS=%q: expected row counts", s)
			}
			sizes = append(sizes, n)
		}
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("rows=%d", n), func(b *testing.B) {
			for range b.N {
				migrateBeside(b, n)
			}
		})
	}
}

func migrateBeside(b *testing.B, n int) {
	b.StopTimer()
	db, _ := brptest.DB(b)
	ctx := context.Background()
	bareTables(b, db, n)
	db.MustExec(`vacuum analyze admhnd`)
	db.MustExec(`vacuum analyze admhnd_persoon`)
	var stop atomic.Bool
	var worst atomic.Int64
	var inserts atomic.Int64
	done := make(chan error, 1)
	go func() {
		for id := int64(n) + 1; !stop.Load(); id++ {
			start := time.Now()
			tx, err := db.BeginTx(ctx, nil)
			if err == nil {
				_, err = tx.Exec(`insert into admhnd (id, soort, tsreg) values ($1, 'GEBOORTE', now())`, id)
			}
			if err == nil {
				_, err = tx.Exec(`insert into admhnd_persoon (admhnd_id, persoon_id) values ($1, $1)`, id)
			}
			if err == nil {
				err = tx.Commit()
			}
			if err != nil {
				done <- err
				return
			}
			inserts.Add(1)
			if d := time.Since(start).Nanoseconds(); d > worst.Load() {
				worst.Store(d)
			}
		}
		done <- nil
	}()
	time.Sleep(time.Second) // the inserter's steady state before the migration
	worst.Store(0)
	b.StartTimer()
	start := time.Now()
	if _, err := schema.Migrate(ctx, db.DB); err != nil {
		b.Fatal(err)
	}
	took := time.Since(start)
	b.StopTimer()
	stop.Store(true)
	if err := <-done; err != nil {
		b.Fatalf("bijhouding beside the migration: %v", err)
	}
	b.ReportMetric(float64(worst.Load())/1e6, "max_insert_stall_ms")
	b.ReportMetric(took.Seconds(), "migrate_s")
	b.ReportMetric(float64(inserts.Load()), "inserts")
	b.Logf("rows=%d: migrate %.1f s, longest insert %.0f ms, %d inserts", n, took.Seconds(), float64(worst.Load())/1e6, inserts.Load())
}
