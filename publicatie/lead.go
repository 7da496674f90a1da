package publicatie

import (
	"container/heap"
	"context"
	"log/slog"
	"math"
	"time"
)

// The lead. Bijhouding takes tsreg from its application server's clock as it starts a
// registration, before its transaction begins (before it even has a connection from its pool),
// and that host's clock may be behind the database's (docs/contract.md section 1: the normal case).
// So a registration's tsreg lies a little before its transaction's start, by its lead. The
// horizon (readHorizon) keeps the view to handelingen no open transaction can still register an
// older one before, which holds only if it is lowered by the lead a transaction may have: the
// margin.
//
// The margin follows the leads bijhouding shows now. The registration trigger records a
// registration whose lead exceeds the margin (late: publicatie_nakomer.voorsprong, every one of
// them) and samples the leads of the others at the rate the leader asks for
// (publicatie_lead_samples, about leadSamplesPerSecond a second, and every lead above half the
// margin and 50 ms), each with its source: the client's address and application_name of the
// session, an application server. A source's lowest lead of the last leadMemory is its floor
// (leadFloors), its clock's offset. Every round the leader sets the margin to the highest
// floor plus the highest lead above its own source's floor of the last leadWindow, late or
// sampled (the excess that Config.LeadCover's share of the registrations stayed within; with
// one source at cover 1, the highest lead), plus a cushion (leadCushion), at most
// Config.MaxLead (the documented bound,
// publicatie_state.max_lead: leads beyond it never count, so a load of last month's handelingen
// does not hold back today's). It
// raises the margin as soon as three late ones say so (a straggler alone does not), and lowers
// it once leadMinObservations say so: a burst's or a lagging clock's margin comes down seconds
// after the leads do. A registration stamped by an application server whose clock is behind,
// within MaxLead, is the contract's normal case and must not end fout
// (scenarios.TestHostileBijhouding): the floors keep it covered. A registration that waited
// between reading its clock and BEGIN (a pool, a busy host) is covered as far as
// Config.LeadCover says: by default all but the one in ten that waited longest
// (DefaultLeadCover). Covering every wait made every handeling on a busy host wait for the
// worst one of the last seconds (docs/performance.md, "A busy machine").
//
// What the margin does not cover is late: taken into the view at its place behind the stand, and
// should a newer handeling of its persons have been delivered first, the consumer's order check
// (package levering) ends it fout (handeling.FoutOvertaken) rather than deliver it out of order.
// The trade-off: every handeling waits the margin; what exceeds it by more than the cushion (a
// straggler, the first registrations of a clock that fell behind) takes the late path: a record
// in bijhouding's transaction, and the risk of a fout, which needs a newer handeling of the
// straggler's persons registered and delivered within its lead. Figures in docs/performance.md
// ("Bounded waits", "A busy machine").
//
// The triggers read the margin in their own transactions, and the stand moved under the
// margins before. After a raise, for leadHold (until margins_until), a registration is recorded
// when its lead exceeds the lowest margin in force since (the stand may lie as far ahead as that
// one let it move). After a lowering, transactions begun before it committed (high_margin_until,
// set by the next round) are held back by the highest margin since: they may have compared
// their leads with it.
// They hold the horizon for at most Config.MaxWait, and what they commit later is recorded at
// their commit (migration 0015), so a lowering takes effect within MaxWait.

// DefaultMaxLead is Config.MaxLead's default: above the clock offsets between hosts synchronised
// by NTP (milliseconds) and the time an application server takes from stamping tsreg to its
// BEGIN, with room for hundreds of milliseconds of skew. The margin never exceeds it, so it is
// also the most a handeling may be held back for bijhouding's clocks.
const DefaultMaxLead = 2 * time.Second

// DefaultLeadCover is Config.LeadCover's default: the margin covers the waits before BEGIN of
// 9 in 10 registrations (issue 51; 0.99 before). Such a wait shows nothing the service could
// hold back by person: no transaction names the registration's persons before it begins, so
// the margin either covers the wait for everyone or lets the registration be late. Covering
// every wait made the tail of freshness on a busy host the worst wait of the last seconds, for
// every handeling (docs/performance.md, "A busy machine"); at 0.99 the margin beside a CPU hog
// was still 25-36 ms where it is about 8 ms at 0.9, and the freshness p50 at 500/s a third
// higher ("The afnemer's prefetch"). A straggler beyond the cover is late, and ends fout
// ("ingehaald") only when a newer handeling of its persons was registered and delivered within
// its wait: the hostile and chaos tests have not seen that at this setting, the freshness
// benchmark beside a CPU hog once in 42 runs (ec2f1ac, before the bound: 2 in 31;
// docs/performance.md, "The cushion"). A site that would rather wait than ever see that sets 1
// (contract section 9).
const DefaultLeadCover = 0.9

// leadSlack is the least cushion above the highest lead (leadCushion): leads jitter by about a
// millisecond; more would hold every handeling back by that much.
const leadSlack = 5 * time.Millisecond

// leadWindow is how long the leads the margin follows are kept: how soon it comes down after
// the leads have.
const leadWindow = 5 * time.Second

// leadMinLate is how many registrations recorded late (beyond the margin) within leadWindow
// raise it: a straggler (a garbage collection between reading the clock and BEGIN) does not.
const leadMinLate = 3

// leadMinObservations is how many leads, late or sampled, lower the margin; with fewer in
// leadWindow the leader looks back further, up to leadMemory.
const leadMinObservations = 20

// leadMemory bounds how far back the leads are kept when few registrations come.
const leadMemory = time.Minute

// leadSamplesPerSecond is how many ordinary registrations' leads the leader asks the trigger
// to sample a second (publicatie_state.lead_sample_rate: this over the registrations a
// second it takes in, at most all of them). Each is a row written in bijhouding's transaction.
const leadSamplesPerSecond = 50

// leadSampleLease is how long the trigger samples after the leader last asked
// (lead_sample_until): without a leader, nobody reads the samples, and none are written.
const leadSampleLease = 15 * time.Second

// leadHoldFor is how long after a change of the margin a registration is recorded when its
// lead exceeds the lowest margin since (until margins_until): until the stand, moved under that
// margin, lies behind what the new one lets in (at most maxLead), and every transaction that was
// open at the change has committed or is recorded at its commit (maxWait), with a second for
// the round's commit.
func leadHoldFor(maxLead, maxWait time.Duration) time.Duration {
	return maxLead + maxWait + time.Second
}

// leadRow is publicatie_state as the round read it.
type leadRow struct {
	margin, bound   time.Duration
	held            time.Duration // the margin the horizon used: the higher one while a lowering is recent
	maxWait         time.Duration
	loweringUndated bool          // a lowering committed: high_margin_until is to be set to this round's start
	sampleRate      float64       // lead_sample_rate
	sampleLeft      time.Duration // until lead_sample_until
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// leadObs is one lead the registration trigger recorded (late) or sampled, with its source: the
// client's address and application_name of the session that registered it.
type leadObs struct {
	d      time.Duration
	source string
}

// leadSeen is one round's part of the window: how many handelingen it took in, the leads of
// those recorded late, the sampled leads, and per source the lowest of these (newLeadSeen).
type leadSeen struct {
	at      time.Time
	taken   int
	late    []leadObs
	samples []leadObs
	lowest  []sourceLead
}

// newLeadSeen is a round's part of the window, with each source's lowest lead in it.
func newLeadSeen(at time.Time, late, samples []leadObs) leadSeen {
	s := leadSeen{at: at, late: late, samples: samples}
	for _, os := range [][]leadObs{late, samples} {
		for _, o := range os {
			s.lowest = addLead(s.lowest, o.source, o.d, 1)
		}
	}
	return s
}

// learnLead records what this round read (late: the leads of registrations recorded late,
// samples: the sampled ones) and sets the margin, its bound, the wait bound and the sample rate
// in the round's transaction when one of them changed (leadMargin).
func (w *openWork) learnLead(ctx context.Context, st roundStore, cur leadRow, late, samples []leadObs) error {
	now := time.Now()
	w.leadSeen = append(w.leadSeen, newLeadSeen(now, late, samples))
	for len(w.leadSeen) > 0 && now.Sub(w.leadSeen[0].at) > leadMemory {
		w.leadSeen = w.leadSeen[1:]
	}
	floors := w.leadSources.floors(w.leadSeen, now)
	want, obs, lateN := leadMargin(w.leadSeen, floors, now, cur.margin, w.cfg.MaxLead, w.cfg.LeadCover)
	rate := sampleRate(w.leadSeen, now)
	renew := cur.sampleLeft < leadSampleLease/2 || rate > 2*cur.sampleRate || rate < cur.sampleRate/2
	if want == cur.margin && cur.bound == w.cfg.MaxLead && cur.maxWait == w.cfg.MaxWait && !cur.loweringUndated && !renew {
		w.m.leadMargin.Set(cur.held.Seconds())
		return nil
	}
	if !renew {
		rate = cur.sampleRate
	}
	hold := leadHoldFor(w.cfg.MaxLead, w.cfg.MaxWait)
	if err := st.setLead(ctx, leadWrite{margin: want, bound: w.cfg.MaxLead, hold: hold, maxWait: w.cfg.MaxWait,
		sampleRate: rate, sampleLease: leadSampleLease}); err != nil {
		return err
	}
	if want != cur.margin {
		w.log.Info("tsreg lead margin changed: the horizon is held back by the lead bijhouding's tsreg may have on its transaction's start",
			slog.Duration("margin", want), slog.Duration("was", cur.margin), slog.Int("leads", obs), slog.Int("late", lateN),
			slog.Duration("max_lead", w.cfg.MaxLead), slog.Float64("lead_cover", w.cfg.LeadCover))
	}
	w.m.leadMargin.Set(max(want, cur.held).Seconds())
	return nil
}

// tookIn adds what a round's intake took in to the window learnLead reads.
func (w *openWork) tookIn(n int) {
	if k := len(w.leadSeen); k > 0 {
		w.leadSeen[k-1].taken += n
	}
}

// leadMargin is the margin the leads seen call for, given the current one (margin) and the
// bound: the highest of the sources' floors (leadFloors, over leadMemory) plus the excess over its
// source's floor that the share cover of the registrations of leadWindow stayed within (of
// more, up to leadMemory, while they are fewer than leadMinObservations), late or sampled, plus
// leadCushion: at cover 1, with one source, the highest lead (leadCover). It is raised only
// when at least leadMinLate of them were late (beyond margin) and the lead it covers lies
// beyond margin: not for the cushion alone (below cover 1 the late ones are always there, and
// the covered lead's jitter raised the margin by fractions of a millisecond several times a
// second, each change a write of publicatie_state and a hold), lowered only on
// leadMinObservations and when it falls by a fifth at least (a margin is kept while the leads
// stay near it), and never above maxLead. It also returns how many leads it weighed and how
// many of those were late.
//
// The floors are what keep an application server whose clock is behind in the margin while it
// registers less often than leadWindow: before them its registrations fell out of the window,
// the margin came down, and its next three were late (scenarios.TestHostileBijhouding). A busy
// host's stragglers do not move a floor, so they cost no more than before.
func leadMargin(seen []leadSeen, floors map[string]time.Duration, now time.Time, margin, maxLead time.Duration, cover float64) (want time.Duration, obs, late int) {
	var floor time.Duration
	for _, f := range floors {
		floor = max(floor, f)
	}
	// The window: leadWindow, or further back while it holds fewer than leadMinObservations.
	from, taken, nLate, nSamples := len(seen), 0, 0, 0
	for ; from > 0; from-- {
		s := seen[from-1]
		if now.Sub(s.at) > leadWindow && nLate+nSamples >= leadMinObservations {
			break
		}
		taken += s.taken
		nLate += len(s.late)
		nSamples += len(s.samples)
	}
	obs = nLate + nSamples
	if obs == 0 {
		return margin, 0, 0
	}
	c := newLeadCover(taken, nLate, nSamples, 1-cover)
	excess := excessOver(floors)
	for _, s := range seen[from:] {
		for _, o := range s.late {
			if o.d > margin {
				late++
			}
			c.add(excess(o), false)
		}
		for _, o := range s.samples {
			c.add(excess(o), true)
		}
	}
	covered := c.lead() + floor
	target := min(maxLead, max(0, covered+leadCushion(covered)))
	switch {
	case covered > margin && late >= leadMinLate:
		return target, obs, late
	case target <= margin*4/5 && obs >= leadMinObservations:
		return target, obs, late
	}
	return margin, obs, late
}

// excessOver returns a lead's excess over its source's floor (0 for a source without one). A
// round's leads come mostly from one source after another, so it looks up a source's floor
// only when the source changes.
func excessOver(floors map[string]time.Duration) func(leadObs) time.Duration {
	var src string
	var floor time.Duration
	looked := false
	return func(o leadObs) time.Duration {
		if !looked || o.source != src {
			src, floor, looked = o.source, floors[o.source], true
		}
		return o.d - floor
	}
}

// leadCover finds, in one pass over the leads and without sorting them, the covered lead: the
// highest lead but those of the registrations with the highest ones that weigh at most allowed,
// the share uncovered of them all. Late leads weigh one registration each; a sample weighs the
// registrations it stands for, (taken - late) / samples, at least one. With fewer than 1 /
// uncovered registrations (uncovered 0: always) it is the highest lead. It keeps the highest
// leads seen whose weight, less the lowest one's, stays within allowed: a min-heap, of one lead
// at cover 1, of about allowed leads below it. A round weighs thousands of leads (a server
// behind has all of its recorded), and a sort of them was most of a round's cost of the margin
// (docs/performance.md, "The default: LEADCOVER 0.99"). The weight of top is counted in leads
// and samples, so that no float sum drifts.
type leadCover struct {
	weight              float64 // of a sample: the registrations it stands for
	allowed             float64
	top                 leadHeap
	topLate, topSamples int
	lowest              time.Duration
}

func newLeadCover(taken, late, samples int, uncovered float64) *leadCover {
	weight := 1.0
	if samples > 0 {
		weight = max(1, float64(taken-late)/float64(samples))
	}
	total := max(float64(taken), float64(late)+weight*float64(samples))
	return &leadCover{weight: weight, allowed: uncovered * total, lowest: math.MaxInt64}
}

// add weighs a lead recorded late (sample false: weighing 1) or sampled.
func (c *leadCover) add(d time.Duration, sample bool) {
	c.lowest = min(c.lowest, d)
	if len(c.top) > 0 && c.topWeight(false) > c.allowed && d <= c.top[0].d {
		return // below a lead already not left out
	}
	heap.Push(&c.top, coverLead{d, sample})
	c.count(sample, 1)
	for len(c.top) > 1 && c.topWeight(true) > c.allowed {
		c.count(heap.Pop(&c.top).(coverLead).sample, -1)
	}
}

// topWeight is the weight of top, or of top without its lowest lead.
func (c *leadCover) topWeight(withoutLowest bool) float64 {
	l, s := c.topLate, c.topSamples
	if withoutLowest {
		if c.top[0].sample {
			s--
		} else {
			l--
		}
	}
	return float64(l) + c.weight*float64(s)
}

func (c *leadCover) count(sample bool, n int) {
	if sample {
		c.topSamples += n
	} else {
		c.topLate += n
	}
}

// lead is the covered lead of what was added: the lowest of top once top weighs more than
// allowed, else the lowest lead (every registration may be left out).
func (c *leadCover) lead() time.Duration {
	if len(c.top) > 0 && c.topWeight(false) > c.allowed {
		return c.top[0].d
	}
	return c.lowest
}

type coverLead struct {
	d      time.Duration
	sample bool
}

// leadHeap is a min-heap of leads (container/heap).
type leadHeap []coverLead

func (h leadHeap) Len() int           { return len(h) }
func (h leadHeap) Less(i, j int) bool { return h[i].d < h[j].d }
func (h leadHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *leadHeap) Push(x any)        { *h = append(*h, x.(coverLead)) }
func (h *leadHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// leadCushion is what the margin keeps above the highest lead seen: a tenth of it, at least
// leadSlack (leads jitter by about a millisecond) and at most 25 ms (every handeling waits for
// it), for the time between an application server's reading its clock and its BEGIN, which
// varies with its load.
func leadCushion(lead time.Duration) time.Duration {
	return min(max(leadSlack, lead/10), 25*time.Millisecond)
}

// sampleRate is the sample rate that gives about leadSamplesPerSecond samples a second at the
// rate handelingen were taken in over leadWindow (all of them while few come).
func sampleRate(seen []leadSeen, now time.Time) float64 {
	taken := 0
	for _, s := range seen {
		if now.Sub(s.at) <= leadWindow {
			taken += s.taken
		}
	}
	perSecond := float64(taken) / leadWindow.Seconds()
	if perSecond <= leadSamplesPerSecond {
		return 1
	}
	return max(0.001, leadSamplesPerSecond/perSecond)
}
