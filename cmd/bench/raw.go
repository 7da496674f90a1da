package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lib/pq"

	"github.com/brp/levering/broker"
	"github.com/brp/levering/internal/rig"
	"github.com/brp/levering/levering"
)

// rawPhase measures the raw ceiling: a bare loop doing per item only what the pipeline cannot
// avoid (receive a persistent message, one status UPDATE committed, one persistent send
// confirmed by a receipt over a connection of its own, ack), with no ordering logic. Once one
// item per database and broker transaction, once in batches; at the default workers of one
// consumer process and at K times that for every K of the pipeline runs (the same concurrency).
func (b *bench) rawPhase(ctx context.Context) []Raw {
	if err := b.rawTable(ctx); err != nil {
		return []Raw{{Error: b.fail("raw", err)}}
	}
	defer b.dropRawTable(ctx)
	gs := []int{levering.DefaultWorkers}
	for _, k := range b.o.consumers {
		gs = append(gs, levering.DefaultWorkers*k)
	}
	slices.Sort(gs)
	gs = slices.Compact(gs)
	var out []Raw
	i := 0
	for _, batch := range []int{1, b.o.rawBatch} {
		for _, g := range gs {
			if ctx.Err() != nil {
				return out
			}
			i++
			r := b.rawRun(ctx, i, batch, g, false)
			b.logf("raw batch %d, %d goroutines: %d items in %.2fs: %.0f/s", batch, g, r.N, r.Seconds, r.Rate)
			out = append(out, r)
		}
	}
	// The stricter reference: batched and acked once per batch, as the consumer acks.
	if g := headlineConsumers(b.o.consumers) * levering.DefaultWorkers; ctx.Err() == nil {
		i++
		r := b.rawRun(ctx, i, b.o.rawBatch, g, true)
		b.logf("raw batch %d, one ack per batch, %d goroutines: %d items in %.2fs: %.0f/s", b.o.rawBatch, g, r.N, r.Seconds, r.Rate)
		out = append(out, r)
	}
	return out
}

// rawTable creates the raw loop's table: the contract's columns of admhnd, without the
// service's own indexes and triggers.
func (b *bench) rawTable(ctx context.Context) error {
	_, err := b.db.ExecContext(ctx, `create table if not exists bench_raw (
		id bigint primary key, soort text not null, tsreg timestamptz not null, tslev timestamptz null, statuslev text null)`)
	return err
}

func (b *bench) dropRawTable(ctx context.Context) {
	_, _ = b.db.ExecContext(context.WithoutCancel(ctx), `drop table if exists bench_raw`)
}

// pairsPhase measures the headline ratio again: the pipeline with k consumers, then the
// batched raw ceiling at its concurrency, b.o.pairs times in turn.
func (b *bench) pairsPhase(ctx context.Context, k int) []Pair {
	if err := b.rawTable(ctx); err != nil {
		return []Pair{{Error: b.fail("pairs", err)}}
	}
	defer b.dropRawTable(ctx)
	var out []Pair
	for i := 1; i <= b.o.pairs && ctx.Err() == nil; i++ {
		var pr Pair
		p := b.pipelineRun(ctx, fmt.Sprintf("pair-%d-pipeline-%d", i, k), k)
		r := b.rawRun(ctx, 100+2*i, b.o.rawBatch, k*levering.DefaultWorkers, false)
		ra := b.rawRun(ctx, 101+2*i, b.o.rawBatch, k*levering.DefaultWorkers, true)
		pr.Pipeline, pr.Raw, pr.RawAckPerBatch = p.Rate, r.Rate, ra.Rate
		pr.PipelineCPU, pr.RawCPU, pr.RawAckPerBatchCPU = p.CPU, r.CPU, ra.CPU
		pr.PipelineCPUms, pr.RawCPUms, pr.RawAckPerBatchCPUms = p.CPU.msPer(p.Geleverd), r.CPU.msPer(r.N), ra.CPU.msPer(ra.N)
		switch {
		case p.Error != "" || !p.Complete:
			pr.Error = "pipeline: " + p.Error
		case r.Error != "":
			pr.Error = "raw: " + r.Error
		case ra.Error != "":
			pr.Error = "raw, one ack per batch: " + ra.Error
		}
		b.logf("pair %d: pipeline@%d %.0f/s, raw batched %.0f/s (%.2f), raw batched with one ack per batch %.0f/s (%.2f)",
			i, k, pr.Pipeline, pr.Raw, pr.Pipeline/pr.Raw, pr.RawAckPerBatch, pr.Pipeline/pr.RawAckPerBatch)
		out = append(out, pr)
	}
	return out
}

// warmUp runs the pipeline and the batched raw loop once, unmeasured: a broker that has just
// started runs its first minute of work through its interpreter, and whichever section came
// first would pay for that.
func (b *bench) warmUp(ctx context.Context, k int) {
	// One pipeline run was measured not to be enough: the next one still took the broker
	// 40% more CPU than later ones.
	p := b.pipelineRun(ctx, fmt.Sprintf("warmup-1-pipeline-%d", k), k)
	if p.Error == "" {
		p = b.pipelineRun(ctx, fmt.Sprintf("warmup-2-pipeline-%d", k), k)
	}
	if err := b.rawTable(ctx); err != nil {
		b.fail("warm-up", err)
		return
	}
	r := b.rawRun(ctx, 99, b.o.rawBatch, k*levering.DefaultWorkers, false)
	b.dropRawTable(ctx)
	b.logf("warm-up (not measured): pipeline@%d %.0f/s, raw batched %.0f/s", k, p.Rate, r.Rate)
}

type rawPub struct {
	ID       int64   `json:"id"`
	Personen []int64 `json:"personen"`
}

// rawRun runs the raw loop once. ackPerBatch acks each batch with one cumulative ack, as the
// consumer does; otherwise every item is acked (client-individual), as the issue defines it.
func (b *bench) rawRun(ctx context.Context, idx, batch, goroutines int, ackPerBatch bool) Raw {
	n := b.o.rawN
	mode := "1 item per transaction"
	if batch > 1 {
		mode = fmt.Sprintf("batches of %d", batch)
	}
	if ackPerBatch {
		mode += ", one ack per batch"
	}
	r := Raw{Mode: mode, Batch: batch, AckPerBatch: ackPerBatch, Goroutines: goroutines, N: n}
	label := fmt.Sprintf("raw %d", idx)
	fail := func(err error) Raw { r.Error = b.fail(label, err); return r }
	if _, err := b.db.ExecContext(ctx, `truncate bench_raw`); err != nil {
		return fail(err)
	}
	if _, err := b.db.ExecContext(ctx, `insert into bench_raw (id, soort, tsreg)
		select g, 'VERHUIZING', now() - interval '1 hour' + g * interval '1 ms' from generate_series(1, $1::bigint) g`, n); err != nil {
		return fail(err)
	}
	if _, err := b.db.ExecContext(ctx, `vacuum analyze bench_raw`); err != nil {
		return fail(err)
	}
	qin := fmt.Sprintf("/queue/brp.bench.%s.raw%d.in", b.runID, idx)
	qout := fmt.Sprintf("/queue/brp.bench.%s.raw%d.out", b.runID, idx)
	if err := b.prefill(ctx, qin, n); err != nil {
		return fail(err)
	}

	// Connections like the consumer processes': every worker receives on a connection of its
	// own, the default number of workers share one sending connection.
	per := levering.DefaultWorkers
	pairs := (goroutines + per - 1) / per
	r.Conns = pairs
	var conns []*broker.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	type worker struct {
		sub  *broker.Subscription
		msgs <-chan *broker.Delivery
		send *broker.Conn
	}
	var ws []worker
	for i := range pairs {
		send, err := broker.Dial(ctx, b.bcfg)
		if err != nil {
			return fail(err)
		}
		conns = append(conns, send)
		for range min(per, goroutines-per*i) {
			recv, err := broker.Dial(ctx, b.bcfg)
			if err != nil {
				return fail(err)
			}
			conns = append(conns, recv)
			prefetch := 2 * batch
			subscribe := recv.Subscribe
			if ackPerBatch {
				subscribe = recv.SubscribeCumulative
			}
			sub, err := subscribe(ctx, qin, prefetch)
			if err != nil {
				return fail(err)
			}
			ws = append(ws, worker{sub: sub, msgs: rig.Pump(sub, prefetch), send: send})
		}
	}
	m0 := b.cpuMark()
	var processed atomic.Int64
	done := make(chan struct{})
	var doneOnce sync.Once
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, goroutines)
	var wg sync.WaitGroup
	t0 := time.Now()
	for _, p := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := b.rawWorker(wctx, p.sub, p.msgs, p.send, qout, batch, ackPerBatch, func(k int) {
				if processed.Add(int64(k)) >= int64(n) {
					doneOnce.Do(func() { close(done) })
				}
			})
			if err != nil && wctx.Err() == nil {
				errc <- err
			}
		}()
	}
	var runErr error
	select {
	case <-done:
	case runErr = <-errc:
	case <-ctx.Done():
		runErr = ctx.Err()
	case <-time.After(b.o.phaseTimeout):
		runErr = fmt.Errorf("%d of %d items after %v", processed.Load(), n, b.o.phaseTimeout)
	}
	el := time.Since(t0)
	r.CPU = b.cpuSince(m0)
	cancel()
	for _, c := range conns {
		c.Close()
	}
	wg.Wait()
	if runErr != nil {
		return fail(runErr)
	}
	r.Seconds = round3(el.Seconds())
	r.Rate = float64(n) / el.Seconds()
	if err := b.db.GetContext(ctx, &r.Verified, `select count(*) from bench_raw where statuslev = 'geleverd'`); err != nil {
		return fail(err)
	}
	if r.Verified != n {
		return fail(fmt.Errorf("%d of %d rows geleverd", r.Verified, n))
	}
	// Empty the run's queues (not timed).
	got, err := b.drain(ctx, qout, n)
	if err != nil {
		return fail(err)
	}
	if len(got) < n {
		return fail(fmt.Errorf("%d of %d messages on the out queue", len(got), n))
	}
	_, _ = b.drain(ctx, qin, 0)
	return r
}

// prefill puts n persistent publications on queue, 100 per broker transaction.
func (b *bench) prefill(ctx context.Context, queue string, n int) error {
	conn, err := broker.Dial(ctx, b.bcfg)
	if err != nil {
		return err
	}
	defer conn.Disconnect()
	var msgs []broker.Message
	for i := 1; i <= n; i++ {
		body, _ := json.Marshal(rawPub{ID: int64(i), Personen: []int64{int64(1 + i%b.o.personen)}})
		msgs = append(msgs, broker.Message{Destination: queue, AdmhndID: int64(i), Body: body})
		if len(msgs) == 100 || i == n {
			if err := conn.Send(ctx, msgs...); err != nil {
				return err
			}
			msgs = msgs[:0]
		}
	}
	return nil
}

// rawWorker receives, updates (committed), sends (confirmed) and acks until ctx ends; with
// batch > 1 it gathers up to batch messages (waiting at most 5 ms for each next one) and
// handles them in one database and one broker transaction.
func (b *bench) rawWorker(ctx context.Context, sub *broker.Subscription, msgs <-chan *broker.Delivery, send *broker.Conn, qout string, batch int, ackPerBatch bool, done func(int)) error {
	recv := func(wait time.Duration) (*broker.Delivery, error) {
		var timeout <-chan time.Time
		if wait > 0 {
			t := time.NewTimer(wait)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timeout:
			return nil, nil
		case m, ok := <-msgs:
			if !ok {
				return nil, sub.Err()
			}
			return m, nil
		}
	}
	ids := make([]int64, 0, batch)
	pubs := map[int64]rawPub{}
	for {
		m, err := recv(0)
		if err != nil {
			return err
		}
		ms := []*broker.Delivery{m}
		for len(ms) < batch {
			m, err := recv(5 * time.Millisecond)
			if err != nil {
				return err
			}
			if m == nil {
				break
			}
			ms = append(ms, m)
		}
		ids = ids[:0]
		clear(pubs)
		for _, m := range ms {
			var p rawPub
			if err := json.Unmarshal(m.Body, &p); err != nil {
				return fmt.Errorf("raw: bad message: %w", err)
			}
			if h := m.Header("admhnd-id"); h != strconv.FormatInt(p.ID, 10) {
				return fmt.Errorf("raw: admhnd-id %q differs from body id %d", h, p.ID)
			}
			ids = append(ids, p.ID)
			pubs[p.ID] = p
		}
		// One statement, committed on its own: one database transaction for the batch.
		var out []broker.Message
		var rows []struct {
			ID    int64     `db:"id"`
			Soort string    `db:"soort"`
			Tsreg time.Time `db:"tsreg"`
			Tslev time.Time `db:"tslev"`
		}
		if len(ids) == 1 {
			err = b.db.SelectContext(ctx, &rows, `update bench_raw set statuslev = 'geleverd', tslev = now()
				where id = $1 returning id, soort, tsreg, tslev`, ids[0])
		} else {
			err = b.db.SelectContext(ctx, &rows, `update bench_raw set statuslev = 'geleverd', tslev = now()
				where id = any($1) returning id, soort, tsreg, tslev`, pq.Array(ids))
		}
		if err != nil {
			return fmt.Errorf("raw: update: %w", err)
		}
		for _, row := range rows {
			body, _ := json.Marshal(levering.Verzending{ID: row.ID, Soort: row.Soort, Tsreg: row.Tsreg, Tslev: row.Tslev, Personen: pubs[row.ID].Personen})
			out = append(out, broker.Message{Destination: qout, AdmhndID: row.ID, Body: body})
		}
		// One message with a receipt, or one STOMP transaction committed with a receipt.
		if err := send.Send(ctx, out...); err != nil {
			return err
		}
		acks := ms
		if ackPerBatch {
			// The subscription is cumulative: the last message acks the batch.
			acks = ms[len(ms)-1:]
		}
		for _, m := range acks {
			if err := sub.Ack(ctx, m); err != nil {
				return err
			}
		}
		done(len(ms))
	}
}
