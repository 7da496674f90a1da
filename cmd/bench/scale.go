package main

import (
	"context"
	"fmt"
	"time"

	"github.com/brp/levering/internal/load"
	"github.com/brp/levering/internal/rig"
)

// History rows get ids from historyBase on, far from the workloads' ids.
const historyBase = 1_000_000_000

// scalePhase measures the publisher's round time with a fixed backlog as the delivered history
// grows: it fills admhnd with delivered handelingen (statuslev geleverd, tslev set, one or two
// persons each over a million persons, the backlog's persons among them) up to each size, and
// publishes the same backlog at each.
func (b *bench) scalePhase(ctx context.Context) []Scale {
	var out []Scale
	if err := b.truncate(ctx); err != nil {
		return []Scale{{Error: b.fail("scale", err)}}
	}
	base := time.Now().Add(-400 * 24 * time.Hour).Truncate(time.Second)
	var filled int64
	for i, h := range b.o.history {
		if ctx.Err() != nil {
			break
		}
		s := Scale{History: h, Backlog: b.o.backlog}
		label := fmt.Sprintf("scale-%d", h)
		t := time.Now()
		if err := b.fillHistory(ctx, base, filled, h); err != nil {
			s.Error = b.fail(label, err)
			out = append(out, s)
			break
		}
		filled = h
		s.FillSeconds = round3(time.Since(t).Seconds())
		if err := b.db.GetContext(ctx, &s.Rows, `select count(*) from admhnd`); err != nil {
			s.Error = b.fail(label, err)
			out = append(out, s)
			break
		}
		b.logf("%s: %d rows in admhnd (filled in %.1fs); publishing %d handelingen over %d persons", label, s.Rows,
			s.FillSeconds, b.o.backlog, b.o.backlogPersonen)
		hs := workload(b.o.backlog, b.o.backlogPersonen, 2_000_000_000+int64(i)*10_000_000, time.Now().Add(-time.Hour))
		if err := b.seed(ctx, hs); err != nil {
			s.Error = b.fail(label, err)
			out = append(out, s)
			break
		}
		p := b.measure(ctx, measureSpec{label: label, consumers: b.o.scaleConsumers, hs: hs})
		s.Seconds, s.Rate, s.Rounds, s.Violations, s.Processes, s.Error = p.Seconds, p.Rate, p.Rounds,
			p.Verzending.Violations, p.Processes, p.Error
		s.CPU, s.Warnings = p.CPU, p.Warnings
		b.logf("%s: rounds p50 %.1f ms, p95 %.1f ms (log, %d rounds); metrics mean %.1f ms; %.0f/s", label,
			s.Rounds.LogP50Ms, s.Rounds.LogP95Ms, s.Rounds.LogCount, s.Rounds.MeanMs, s.Rate)
		if s.Error == "" {
			var err error
			if s.Isolated, err = b.isolatedRounds(ctx, label, 2_000_000_000+int64(i)*10_000_000+5_000_000, isolatedRounds); err != nil {
				s.Error = b.fail(label+" isolated rounds", err)
			} else {
				b.logf("%s: isolated full rounds p50 %.1f ms, p95 %.1f ms (%d rounds, %.0f published per round)", label,
					s.Isolated.LogP50Ms, s.Isolated.LogP95Ms, s.Isolated.LogCount, s.Isolated.PublishedAvg)
			}
		}
		out = append(out, s)
	}
	return out
}

// fillHistory adds delivered handelingen number from..to-1 in chunks, then vacuums and
// analyzes (as autovacuum would in a real system) and checkpoints, so that the measurement does
// not pay for the fill.
func (b *bench) fillHistory(ctx context.Context, base time.Time, from, to int64) error {
	const chunk = 1_000_000
	for lo := from; lo < to; lo += chunk {
		hi := min(lo+chunk, to)
		tx, err := b.db.BeginTxx(ctx, nil)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `insert into admhnd (id, soort, tsreg, tslev, statuslev, tspub)
			select $1::bigint + g,
			       (array['GEBOORTE','VERHUIZING','HUWELIJK','NAAMSWIJZIGING','OVERLIJDEN'])[1 + g % 5],
			       $4::timestamptz + g * interval '10 ms',
			       $4::timestamptz + g * interval '10 ms' + interval '2 s',
			       'geleverd',
			       $4::timestamptz + g * interval '10 ms' + interval '1 s'
			from generate_series($2::bigint, $3::bigint - 1) g`, historyBase, lo, hi, base); err != nil {
			tx.Rollback()
			return fmt.Errorf("fill admhnd: %w", err)
		}
		// Every handeling one person of a million, 30% a second one.
		if _, err := tx.ExecContext(ctx, `insert into admhnd_persoon (admhnd_id, persoon_id)
			select $1::bigint + g, 1 + g % 1000000 from generate_series($2::bigint, $3::bigint - 1) g
			union all
			select $1::bigint + g, 1 + (g * 7919 + 500000) % 1000000 from generate_series($2::bigint, $3::bigint - 1) g
			where g % 10 < 3 and (g * 7919 + 500000) % 1000000 <> g % 1000000`, historyBase, lo, hi); err != nil {
			tx.Rollback()
			return fmt.Errorf("fill admhnd_persoon: %w", err)
		}
		if err := tx.Commit(); err != nil {
			return err
		}
		if to-from > chunk {
			b.logf("  history: %d of %d rows", hi, to)
		}
	}
	if _, err := b.db.ExecContext(ctx, `vacuum analyze admhnd, admhnd_persoon`); err != nil {
		return err
	}
	if _, err := b.db.ExecContext(ctx, `checkpoint`); err != nil {
		b.res.Notes = append(b.res.Notes, "no checkpoint after the history fill: "+err.Error())
	}
	return nil
}

// isolatedRounds is how many full rounds the publisher runs alone at each history size.
const isolatedRounds = 20

// isolatedRounds measures full rounds of the publisher alone: it seeds the backlog again, starts
// only a publisher, and after each round that published something sets those handelingen back
// to te leveren (which wakes the publisher), so that every round reads LIMIT candidates over
// the same backlog and publishes as many as the persons allow. Afterwards the backlog is set
// geleverd, so that it counts as history, and the publication queue is emptied.
func (b *bench) isolatedRounds(ctx context.Context, label string, firstID int64, rounds int) (RoundStats, error) {
	label += "-isolated"
	hs := workload(b.o.backlog, b.o.backlogPersonen, firstID, time.Now().Add(-time.Hour))
	if err := b.seed(ctx, hs); err != nil {
		return RoundStats{}, err
	}
	from, to := hs[0].ID, hs[len(hs)-1].ID
	q := b.queues(label)
	ps, err := b.start(label, 0, q)
	if err != nil {
		return RoundStats{}, err
	}
	stopped := false
	defer func() {
		if !stopped {
			rig.KillAll(ps.all()...)
		}
	}()
	published := func() (n, msgs int) {
		for _, l := range roundLines(ps.pub) {
			if l.published > 0 {
				n++
				msgs += l.published
			}
		}
		return n, msgs
	}
	deadline := time.Now().Add(b.o.phaseTimeout)
	for i := 1; i <= rounds; i++ {
		for {
			if n, _ := published(); n >= i {
				break
			}
			if err := rig.ExitedEarly(ps.all()...); err != nil {
				return RoundStats{}, err
			}
			if time.Now().After(deadline) {
				return RoundStats{}, fmt.Errorf("%d of %d rounds after %v", i-1, rounds, b.o.phaseTimeout)
			}
			time.Sleep(2 * time.Millisecond)
		}
		// Let the round that the publisher's own commit notification starts (it finds nothing
		// to do) pass, so that the next full round reads a consistent budget.
		time.Sleep(150 * time.Millisecond)
		if _, err := b.db.ExecContext(ctx, `update admhnd set statuslev = null, tspub = null
			where id between $1 and $2 and statuslev = 'in_levering'`, from, to); err != nil {
			return RoundStats{}, err
		}
	}
	pm, err := ps.pub.Metrics(ctx)
	if err != nil {
		return RoundStats{}, err
	}
	rs := roundStats(pm, roundLines(ps.pub))
	if err := rig.StopAll(20*time.Second, ps.all()...); err != nil {
		return rs, err
	}
	stopped = true
	if _, err := b.db.ExecContext(ctx, `update admhnd set statuslev = 'geleverd', tslev = now()
		where id between $1 and $2 and soort <> $3`, from, to, load.ExcludedSoort); err != nil {
		return rs, err
	}
	_, msgs := published()
	_, err = b.drain(ctx, q.Publicatie, msgs)
	return rs, err
}
