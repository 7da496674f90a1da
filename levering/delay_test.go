package levering_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/brp/levering/internal/brptest"
	"github.com/brp/levering/internal/load"
	"github.com/brp/levering/levering"
)

// delayHistogram reads brp_levering_delivery_delay_seconds from reg.
func delayHistogram(t *testing.T, reg *prometheus.Registry) *dto.Histogram {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == "brp_levering_delivery_delay_seconds" {
			return f.GetMetric()[0].GetHistogram()
		}
	}
	t.Fatal("brp_levering_delivery_delay_seconds is not registered")
	return nil
}

// below returns how many observations the histogram has at or below le.
func below(t *testing.T, h *dto.Histogram, le float64) uint64 {
	t.Helper()
	for _, b := range h.GetBucket() {
		if b.GetUpperBound() == le {
			return b.GetCumulativeCount()
		}
	}
	t.Fatalf("no bucket le=%v", le)
	return 0
}

// Every handeling delivered is observed once, as tslev - tsreg; a tsreg ahead of the database
// clock as 0. A duplicate and a fout one are not deliveries.
func TestDeliveryDelayHistogram(t *testing.T) {
	t.Parallel()
	db, _ := brptest.DB(t)
	q := brptest.NewQueues(t)
	reg := prometheus.NewRegistry()
	c, err := levering.New(db, levering.Config{
		Queue: q.Publicatie, VerzendingQueue: q.Verzending, DeadLetterQueue: q.DLQ,
		Workers: 2, Broker: brptest.Broker(), Registerer: reg, Layout: brptest.Layout(),
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	e := &env{db: db, q: q, c: c}

	if h := delayHistogram(t, reg); h.GetSampleCount() != 0 {
		t.Fatalf("%d observations before any delivery", h.GetSampleCount())
	}
	now := time.Now()
	if err := load.Insert(context.Background(), db, []load.Handeling{
		{ID: 1, Soort: "GEBOORTE", Tsreg: now.Add(-90 * time.Second), Personen: []int64{10}},
		{ID: 2, Soort: "GEBOORTE", Tsreg: now.Add(-2 * time.Second), Personen: []int64{20}},
		{ID: 3, Soort: "GEBOORTE", Tsreg: now.Add(time.Hour), Personen: []int64{30}}, // a clock an hour ahead
		{ID: 4, Soort: "GEBOORTE", Tsreg: now.Add(-time.Second), Personen: []int64{40}},
		{ID: 5, Soort: "GEBOORTE", Tsreg: now.Add(-time.Second)}, // no persons: fout
	}); err != nil {
		t.Fatal(err)
	}
	db.MustExec(`update admhnd set statuslev = 'in_levering' where id <> 4`)
	db.MustExec(`update admhnd set statuslev = 'geleverd', tslev = now() where id = 4`)
	brptest.Publish(t, q.Publicatie, publication(1, 10), publication(2, 20), publication(3, 30), publication(4, 40), publication(5))
	e.waitCounts(t, levering.Counts{Delivered: 3, Duplicates: 1, Fout: 1})

	h := delayHistogram(t, reg)
	if h.GetSampleCount() != 3 {
		t.Fatalf("%d observations, want one per delivered handeling (3)", h.GetSampleCount())
	}
	// 3 (ahead) in the first bucket, 2 (some seconds) by 60 s, 1 (90 s and some) by 300 s.
	if n := below(t, h, 0.005); n != 1 {
		t.Errorf("%d observations at or below 5 ms, want 1 (the tsreg an hour ahead)", n)
	}
	if n := below(t, h, 60); n != 2 {
		t.Errorf("%d observations at or below 60 s, want 2", n)
	}
	if n := below(t, h, 300); n != 3 {
		t.Errorf("%d observations at or below 300 s, want 3", n)
	}
	if s := h.GetSampleSum(); s < 92 || s > 120 {
		t.Errorf("sum %v s, want about 92 (90 + 2 + 0)", s)
	}
}
