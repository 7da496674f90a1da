package publicatie

import (
	"context"
	"log/slog"
	"time"

	"github.com/lib/pq"

	"github.com/brp/levering/handeling"
)

// FutureCheckInterval is how often, at most, the leader looks for handelingen registered in
// the future (checkFuture): they wait until their tsreg has passed, so seconds do not matter,
// and a query every round would cost a busy publisher a statement per round for nothing.
const FutureCheckInterval = 5 * time.Second

// futureLimit is the most handelingen registered in the future one check reads, the earliest
// first: it bounds the lines one check logs when a bijhouding clock ahead registers many.
const futureLimit = 100

// maxFutureLogged bounds how many logged ids a process remembers (some hundreds of kilobytes
// at most): a flood of handelingen registered in the future must not grow the publisher's
// memory. Past it the earliest logged is forgotten; it is logged again only if it is still in
// the future and among the earliest futureLimit at a later check.
const maxFutureLogged = 10_000

// futureLog is what checkFuture remembers between calls.
type futureLog struct {
	last   time.Time          // when the last check ran
	logged map[int64]struct{} // ids logged, at most maxFutureLogged
	order  []int64            // the same ids, oldest logged first, to forget in that order
}

// remember records id as logged, forgetting the earliest logged past maxFutureLogged.
func (f *futureLog) remember(id int64) {
	if len(f.order) >= maxFutureLogged {
		delete(f.logged, f.order[0])
		f.order = f.order[1:]
	}
	f.logged[id] = struct{}{}
	f.order = append(f.order, id)
}

// checkFuture logs, at WARN, each handeling still to be delivered (soort not excluded) whose
// tsreg lies more than handeling.FutureSkew ahead of the database clock, once per process:
// its admhnd_id, tsreg and how far ahead it is, never its persons. Such a handeling waits,
// unpublished, until its tsreg has passed (the intake reads up to now), which nothing else
// would say; brp_levering_future_handelingen counts them. Run calls it between rounds: it
// queries only while this instance leads (one process logs) and at most every
// FutureCheckInterval, within 2 s; a failure is left to the rounds to report.
func (p *Publisher) checkFuture(ctx context.Context) {
	if !p.Leader() {
		return
	}
	if p.future == nil {
		p.future = &futureLog{logged: map[int64]struct{}{}}
	}
	f := p.future
	if time.Since(f.last) < FutureCheckInterval {
		return
	}
	f.last = time.Now()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	rows, err := p.db.QueryContext(ctx, p.sql.futureSQL, pq.Array(p.cfg.Excluded), futureLimit, handeling.FutureSkew.Seconds())
	if err != nil {
		p.log.Debug("checking for handelingen registered in the future failed", slog.Any("error", err))
		return
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var tsreg time.Time
		var ahead float64
		if err := rows.Scan(&id, &tsreg, &ahead); err != nil {
			p.log.Debug("checking for handelingen registered in the future failed", slog.Any("error", err))
			return
		}
		if _, ok := f.logged[id]; ok {
			continue
		}
		f.remember(id)
		p.log.Warn("handeling registered in the future: it waits until its tsreg has passed",
			slog.Int64("admhnd_id", id), slog.Time("tsreg", tsreg), slog.Float64("ahead_seconds", ahead))
	}
}
