package main

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/brp/levering/internal/load"
	"github.com/brp/levering/internal/rig"
)

// measureSpec is one run of the real processes over handelingen already in the database.
type measureSpec struct {
	label     string
	consumers int
	hs        []load.Handeling // ids ascending, as load.Generate makes them
	// window > 0 runs the processes this long and reports geleverd/window (seed mode);
	// otherwise they run until every expected handeling is geleverd.
	window time.Duration
	extra  []string
}

// pipelinePhase is the headline: the default settings, 1 publicatie and k mutatielevering.
func (b *bench) pipelinePhase(ctx context.Context, k int) Pipeline {
	return b.pipelineRun(ctx, fmt.Sprintf("pipeline-%d", k), k)
}

// pipelineRun seeds the pipeline's workload afresh and measures it with k consumers; label
// names the run in the logs.
func (b *bench) pipelineRun(ctx context.Context, label string, k int) Pipeline {
	b.logf("%s: seeding %d handelingen over %d persons", label, b.o.n, b.o.personen)
	if err := b.truncate(ctx); err != nil {
		return Pipeline{Label: label, Consumers: k, Error: b.fail(label, err)}
	}
	hs := workload(b.o.n, b.o.personen, 1, time.Now().Add(-time.Hour))
	if err := b.seed(ctx, hs); err != nil {
		return Pipeline{Label: label, Consumers: k, Error: b.fail(label, err)}
	}
	p := b.measure(ctx, measureSpec{label: label, consumers: k, hs: hs})
	b.logf("%s: %d geleverd in %.2fs: %.0f/s (first after %.2fs, steady %.0f/s); rounds p50 %.1f ms; verzending %d msgs, %d duplicates, %d violations",
		label, p.Geleverd, p.Seconds, p.Rate, p.FirstSeconds, p.SteadyRate, p.Rounds.LogP50Ms, p.Verzending.Messages,
		p.Verzending.Duplicates, p.Verzending.Violations)
	return p
}

// seedPhase is the reference "seed mode": rounds every DELAY only (no wake-ups), defaults
// otherwise, for a fixed window.
func (b *bench) seedPhase(ctx context.Context) Pipeline {
	label := "seed-mode"
	personen := b.o.seedPersonen
	b.logf("%s: seeding %d handelingen over %d persons; running %v", label, b.o.seedN, personen, b.o.seedWindow)
	if err := b.truncate(ctx); err != nil {
		return Pipeline{Label: label, Error: b.fail(label, err)}
	}
	hs := workload(b.o.seedN, personen, 1, time.Now().Add(-time.Hour))
	if err := b.seed(ctx, hs); err != nil {
		return Pipeline{Label: label, Error: b.fail(label, err)}
	}
	// No wake-ups whatever the publisher does with WAKEUP=false: the schema's notification
	// triggers are off in the bench database during this run.
	triggers, err := b.notifyTriggers(ctx, "disable")
	if err != nil {
		return Pipeline{Label: label, Error: b.fail(label, err)}
	}
	p := b.measure(ctx, measureSpec{label: label, consumers: b.o.seedConsumers, hs: hs, window: b.o.seedWindow,
		extra: []string{"BRP_LEVERING_ADMHNDPUBLICATIE_WAKEUP=false"}})
	if _, err := b.notifyTriggers(ctx, "enable"); err != nil {
		b.fail(label, err)
	}
	b.res.Notes = append(b.res.Notes, fmt.Sprintf("seed mode ran with the notification triggers (%s) disabled in the bench database, "+
		"so that no wake-up can reach the publisher", strings.Join(triggers, ", ")))
	b.logf("%s: %d geleverd in the %v window: %.0f/s; %d rounds; %d violations", label, p.Geleverd, b.o.seedWindow,
		p.Rate, p.Rounds.LogCount, p.Verzending.Violations)
	// Seed mode is a round every DELAY (5 s) only. A round that reads LIMIT candidates makes the
	// publisher run the next one at once, wake-ups or not: say so when that happened.
	if want := int(b.o.seedWindow/(5*time.Second)) + 1; p.Rounds.LogCount > want {
		b.res.Notes = append(b.res.Notes, fmt.Sprintf("seed mode ran %d rounds in %v, more than one per DELAY: "+
			"with BRP_LEVERING_ADMHNDPUBLICATIE_WAKEUP=false the publisher still runs the next round at once after a round "+
			"that read LIMIT candidates, so this is not the seed's fixed-delay polling (keep -seed-n below LIMIT)", p.Rounds.LogCount, b.o.seedWindow))
	}
	return p
}

// notifyTriggers disables or enables the schema's triggers that wake the publisher (those whose
// function's name mentions notify) and returns them as table.trigger.
func (b *bench) notifyTriggers(ctx context.Context, action string) ([]string, error) {
	var ts []struct {
		Table   string `db:"tbl"`
		Trigger string `db:"tgname"`
	}
	if err := b.db.SelectContext(ctx, &ts, `select t.tgrelid::regclass::text as tbl, t.tgname
		from pg_trigger t join pg_proc p on p.oid = t.tgfoid
		where not t.tgisinternal and p.proname like '%notify%' order by 1, 2`); err != nil {
		return nil, err
	}
	var out []string
	for _, t := range ts {
		if _, err := b.db.ExecContext(ctx, fmt.Sprintf(`alter table %s %s trigger %s`, t.Table, action, pqIdent(t.Trigger))); err != nil {
			return out, err
		}
		out = append(out, t.Table+"."+t.Trigger)
	}
	return out, nil
}

func pqIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// measure starts the processes, waits until the work is done (or the window ends), reads the
// processes' figures right before stopping them, and then reads the verzending queue back and
// checks its order.
func (b *bench) measure(ctx context.Context, s measureSpec) Pipeline {
	p := Pipeline{Label: s.label, Consumers: s.consumers, Seeded: len(s.hs), Expected: expected(s.hs), Extra: s.extra}
	from, to := s.hs[0].ID, s.hs[len(s.hs)-1].ID
	q := b.queues(s.label)
	m0 := b.cpuMark()
	t0 := time.Now()
	ps, err := b.start(s.label, s.consumers, q, s.extra...)
	if err != nil {
		p.Error = b.fail(s.label, err)
		return p
	}
	stopped := false
	defer func() {
		if !stopped {
			rig.KillAll(ps.all()...)
		}
	}()
	deadline := t0.Add(b.o.phaseTimeout)
	next := 0.0
	for {
		// Every poll counts over the whole workload (~3 ms of database CPU): at 100 ms that was
		// 2.5% of the machine during the pipeline runs, which the raw loop does not pay. The
		// rate comes from tslev, not from when the poll saw the end.
		select {
		case <-ctx.Done():
			p.Error = b.fail(s.label, ctx.Err())
			return p
		case <-time.After(250 * time.Millisecond):
		}
		c, err := b.countRange(ctx, from, to)
		if err != nil {
			p.Error = b.fail(s.label, err)
			return p
		}
		p.MaxInLevering = max(p.MaxInLevering, c.inLevering)
		if el := time.Since(t0).Seconds(); el >= next {
			p.Poll = append(p.Poll, PollPoint{T: round3(el), Geleverd: c.geleverd})
			next = float64(int(el)) + 1
		}
		if s.window > 0 && time.Since(t0) >= s.window {
			break
		}
		if s.window == 0 && c.geleverd+c.fout >= p.Expected {
			break
		}
		if err := rig.ExitedEarly(ps.all()...); err != nil {
			p.Error = b.fail(s.label, err)
			return p
		}
		if time.Now().After(deadline) {
			p.Error = b.fail(s.label, fmt.Errorf("not done after %v: geleverd %d of %d, in levering %d, fout %d",
				b.o.phaseTimeout, c.geleverd, p.Expected, c.inLevering, c.fout))
			break
		}
	}

	// Right before stopping: metrics, peak RSS and CPU of every process.
	pm, err := ps.pub.Metrics(ctx)
	if err != nil {
		b.res.Notes = append(b.res.Notes, fmt.Sprintf("%s: publisher metrics: %v", s.label, err))
	}
	var procSum, procCount float64
	for _, c := range ps.cons {
		if cm, err := c.Metrics(ctx); err == nil {
			if _, sum, count, ok := cm.Histogram("brp_levering_processing_duration_seconds"); ok {
				procSum += sum
				procCount += count
			}
		}
	}
	if procCount > 0 {
		p.ConsumerBatchMean = round3(1000 * procSum / procCount)
	}
	cpu := b.cpuSince(m0)
	for _, pr := range ps.all() {
		st := ProcStat{Name: pr.Name, PID: pr.PID(), PeakRSSMB: pr.PeakRSSMB(), CPUSeconds: pr.CPUSeconds()}
		if pr == ps.pub {
			cpu.Publisher += st.CPUSeconds
		} else {
			cpu.Consumers += st.CPUSeconds
		}
		p.Processes = append(p.Processes, st)
	}
	p.CPU = cpu
	b.samplePSS()
	p.Rounds = roundStats(pm, roundLines(ps.pub))
	p.Warnings = []string{}
	for _, pr := range ps.all() {
		for _, w := range pr.Warnings() {
			p.Warnings = append(p.Warnings, pr.Name+": "+w)
		}
	}
	if len(p.Warnings) > 0 {
		b.logf("%s: %d warnings, the first: %s", s.label, len(p.Warnings), p.Warnings[0])
	}
	stopErr := rig.StopAll(20*time.Second, ps.all()...)
	stopped = true
	for i, pr := range ps.all() {
		p.Processes[i].ExitOK = pr.Err() == nil
	}
	if stopErr != nil {
		msg := b.fail(s.label+": stop", stopErr)
		if p.Error == "" {
			p.Error = msg
		}
	}

	// What the database says.
	var first, last sql.NullTime
	var all int
	if err := b.db.QueryRowxContext(ctx, `select count(*), min(tslev), max(tslev) from admhnd
		where id between $1 and $2 and statuslev = 'geleverd'`, from, to).Scan(&all, &first, &last); err != nil {
		p.Error = b.fail(s.label, err)
		return p
	}
	_ = b.db.GetContext(ctx, &p.Fout, `select count(*) from admhnd where id between $1 and $2 and statuslev = 'fout'`, from, to)
	_ = b.db.GetContext(ctx, &p.ExcludedTouched, `select count(*) from admhnd where id between $1 and $2 and soort = $3
		and statuslev is not null`, from, to, load.ExcludedSoort)
	if s.window > 0 {
		end := t0.Add(s.window)
		if err := b.db.GetContext(ctx, &p.Geleverd, `select count(*) from admhnd where id between $1 and $2
			and statuslev = 'geleverd' and tslev <= $3`, from, to, end); err != nil {
			p.Error = b.fail(s.label, err)
			return p
		}
		p.Seconds = s.window.Seconds()
	} else {
		p.Geleverd = all
		if last.Valid {
			p.Seconds = last.Time.Sub(t0).Seconds()
		}
	}
	p.Complete = all >= p.Expected
	if p.Seconds > 0 {
		p.Rate = float64(p.Geleverd) / p.Seconds
	}
	if first.Valid && last.Valid {
		p.FirstSeconds = round3(first.Time.Sub(t0).Seconds())
		if d := last.Time.Sub(first.Time).Seconds(); d > 0 {
			p.SteadyRate = float64(all) / d
		}
	}
	p.Seconds = round3(p.Seconds)

	// The afnemer's view, read after the measurement so that reading costs it nothing.
	ids, err := b.drain(ctx, q.Verzending, all)
	if err != nil {
		p.Error = b.fail(s.label+": read verzending", err)
	}
	rep := load.CheckOrder(ids, byID(s.hs))
	p.Verzending = Verzending{Messages: rep.Messages, Distinct: rep.Distinct, Duplicates: rep.Duplicates,
		Violations: len(rep.Violations), Samples: rep.Violations}
	if rep.Distinct < all {
		p.Error = b.fail(s.label, fmt.Errorf("verzending queue has %d distinct handelingen, database %d geleverd", rep.Distinct, all))
	}
	if len(rep.Violations) > 0 {
		b.fail(s.label, fmt.Errorf("per-person order violated: %v", rep.Violations))
	}
	if p.ExcludedTouched > 0 {
		b.fail(s.label, fmt.Errorf("%d excluded handelingen were touched", p.ExcludedTouched))
	}
	// What seed mode left in flight, and the dead-letter queue: emptied, not timed.
	_, _ = b.drain(ctx, q.Publicatie, 0)
	_, _ = b.drain(ctx, q.DLQ, 0)
	return p
}

func round3(x float64) float64 { return float64(int64(x*1000+0.5)) / 1000 }

// chainPhase measures the per-link latency of one person's chain: registered at once, 1 ms
// apart, on an idle pipeline and then beside background work.
func (b *bench) chainPhase(ctx context.Context) []Chain {
	const k = 4
	label := "chain"
	b.logf("%s: %d links, 1 publicatie + %d mutatielevering", label, b.o.chain, k)
	fail := func(err error) []Chain { return []Chain{{Label: "idle", Links: b.o.chain, Error: b.fail(label, err)}} }
	if err := b.truncate(ctx); err != nil {
		return fail(err)
	}
	q := b.queues(label)
	ps, err := b.start(label, k, q)
	if err != nil {
		return fail(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			rig.KillAll(ps.all()...)
		}
	}()
	if err := b.ready(ctx, ps); err != nil {
		return fail(err)
	}
	var all []load.Handeling
	person := int64(b.o.personen) + 1_000_000
	c, hs := b.chainRun(ctx, ps, "idle", 1, person, 0)
	all = append(all, hs...)
	out := []Chain{c}
	if b.o.chainBackground > 0 && c.Error == "" {
		c, hs := b.chainRun(ctx, ps, "with background", 500_001, person+1, b.o.chainBackground)
		all = append(all, hs...)
		out = append(out, c)
	}
	b.samplePSS()
	if err := rig.StopAll(20*time.Second, ps.all()...); err != nil {
		b.fail(label+": stop", err)
	}
	stopped = true
	ids, err := b.drain(ctx, q.Verzending, expected(all))
	if err != nil {
		b.fail(label+": read verzending", err)
	}
	if rep := load.CheckOrder(ids, byID(all)); len(rep.Violations) > 0 {
		b.fail(label, fmt.Errorf("per-person order violated: %v", rep.Violations))
	}
	_, _ = b.drain(ctx, q.Publicatie, 0)
	return out
}

// chainRun registers the chain (after the background, if any) and waits for it.
func (b *bench) chainRun(ctx context.Context, ps processes, label string, firstID, person int64, background int) (Chain, []load.Handeling) {
	c := Chain{Label: label, Links: b.o.chain, Background: background, Consumers: len(ps.cons)}
	base := time.Now().Add(-2 * time.Second).Truncate(time.Millisecond)
	var bg []load.Handeling
	if background > 0 {
		// Interleaved in tsreg with the chain: the chain competes with work of the same age.
		bg = workload(background, b.o.personen, 1_000_001, base)
		if err := load.Insert(ctx, b.db, bg); err != nil {
			c.Error = b.fail("chain "+label, err)
			return c, nil
		}
	}
	chain := make([]load.Handeling, b.o.chain)
	for i := range chain {
		chain[i] = load.Handeling{ID: firstID + int64(i), Soort: "VERHUIZING", Tsreg: base.Add(time.Duration(i+1) * time.Millisecond),
			Personen: []int64{person}}
	}
	if err := load.Insert(ctx, b.db, chain); err != nil {
		c.Error = b.fail("chain "+label, err)
		return c, bg
	}
	t0 := time.Now()
	hs := append(chain, bg...)
	last := firstID + int64(b.o.chain) - 1
	deadline := t0.Add(b.o.phaseTimeout)
	for {
		cs, err := b.countRange(ctx, firstID, last)
		if err != nil {
			c.Error = b.fail("chain "+label, err)
			return c, hs
		}
		if cs.geleverd == b.o.chain {
			break
		}
		if err := rig.ExitedEarly(ps.all()...); err != nil {
			c.Error = b.fail("chain "+label, err)
			return c, hs
		}
		if time.Now().After(deadline) {
			c.Error = b.fail("chain "+label, fmt.Errorf("%d of %d links geleverd after %v", cs.geleverd, b.o.chain, b.o.phaseTimeout))
			return c, hs
		}
		time.Sleep(10 * time.Millisecond)
	}
	var tslev []time.Time
	if err := b.db.SelectContext(ctx, &tslev, `select tslev from admhnd where id between $1 and $2 order by tsreg, id`, firstID, last); err != nil {
		c.Error = b.fail("chain "+label, err)
		return c, hs
	}
	links := make([]float64, len(tslev))
	prev := t0
	for i, t := range tslev {
		links[i] = float64(t.Sub(prev).Microseconds()) / 1000
		prev = t
	}
	c.P50Ms, c.P95Ms, c.P99Ms, c.MaxMs = round3(percentile(links, 0.5)), round3(percentile(links, 0.95)),
		round3(percentile(links, 0.99)), round3(percentile(links, 1))
	sum := 0.0
	for _, l := range links {
		sum += l
	}
	c.MeanMs, c.FirstMs, c.TotalMs = round3(sum/float64(len(links))), round3(links[0]), round3(sum)
	b.logf("chain %s: %d links, p50 %.1f ms, p95 %.1f ms, p99 %.1f ms, total %.0f ms", label, len(links), c.P50Ms, c.P95Ms, c.P99Ms, c.TotalMs)
	if len(bg) > 0 {
		// Let the background finish so that the next measurement starts quiet.
		for time.Now().Before(deadline) {
			cs, err := b.countRange(ctx, bg[0].ID, bg[len(bg)-1].ID)
			if err != nil || cs.geleverd+cs.fout >= expected(bg) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return c, hs
}
