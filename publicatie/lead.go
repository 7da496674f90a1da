package publicatie

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"
)

// The lead (issue 32). Bijhouding takes tsreg from its application server's clock as it starts
// a registration, before its transaction begins, and that host's clock may be behind the
// database's by some hundreds of milliseconds (CONTRACT.md section 1: the normal case). So a
// registration's tsreg lies a little before its transaction's start, by its lead. The horizon
// (readHorizon) keeps the view to handelingen no open transaction can still register an older
// one before, which holds only if it is lowered by the largest lead a transaction may have:
// the margin.
//
// A fixed margin would hold every handeling back by it, however small the leads really are.
// So the leader learns it: the registration trigger (migration 0011) records a handeling whose
// lead exceeds the margin, with its lead (publicatie_nakomer.voorsprong), and when more than a
// tenth of what the leader took in lately was recorded so, it raises the margin to their
// median lead plus leadSlack, at most Config.MaxLead (the documented bound,
// publicatie_toestand.grens: leads beyond it never raise the margin, so a load of last
// month's handelingen does not hold back today's). Such a late handeling is taken into the
// view at its place behind the stand; the consumer's order check (package levering) keeps it
// from reaching afnemers after a newer handeling of its persons.
// After leadDecay without a raise the margin is halved, so that one application server whose
// clock jumped back does not hold publication back for good; if the leads are still that
// large, the next late one raises it again.
//
// The triggers read the margin in their own transactions, and the stand moved under the margins
// before: so for a minute after a change (until sinds) a registration is recorded when its lead
// exceeds the lowest margin in force since (the stand may lie as far ahead as that one let it
// move: a raise would otherwise let a lead just above the old margin fall behind the stand
// unrecorded), and the horizon holds a transaction begun before sinds back by the highest (it
// may have compared its leads with that one). A minute covers a round's commit and, the margin
// being at most MaxLead (at most a minute), the stand catching up with the new margin.

// DefaultMaxLead is Config.MaxLead's default: above the clock offsets between hosts synchronised
// by NTP (milliseconds) and the time an application server takes from stamping tsreg to its
// BEGIN, with room for hundreds of milliseconds of skew. The margin never exceeds it, so it is
// also the most a handeling may be held back for bijhouding's clocks.
const DefaultMaxLead = 2 * time.Second

// leadSlack is added to a lead when the margin is raised to it: leads jitter by about a
// millisecond; more slack would hold every handeling back by that much.
const leadSlack = 5 * time.Millisecond

// leadDecay is how long the margin stays up without a raise before it is halved.
const leadDecay = 10 * time.Minute

// leadHold is how long after a lowering commits the higher margin is still held for
// transactions begun before it: longer than a round takes to commit.
const leadHold = time.Minute

// leadRow is publicatie_toestand as the round read it: the margin, its bound, and the
// margin held for the open transactions (the higher one while a lowering is recent).
type leadRow struct {
	marge, grens, held time.Duration
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// leadWindow is how long the leader counts the leads it learns from: what was recorded late
// (with a lead within MaxLead) against all it took in.
const leadWindow = 10 * time.Second

// leadLateShare is the share of the handelingen taken in during leadWindow that must have been
// late before the margin is raised. Being late costs a record and, should a newer handeling of
// its persons be delivered before it is visible, a fout; a margin costs every handeling its
// size in latency. So the margin follows the bulk of the leads (an application server's
// clock behind, a pool that reads the clock before it begins), not the stragglers (a garbage
// collection between reading the clock and BEGIN).
const leadLateShare = 0.1

// leadSeen is one round's part of the window: how many handelingen it took in, and the leads
// of those recorded late.
type leadSeen struct {
	at    time.Time
	taken int
	leads []time.Duration
}

// learnLead raises the margin to the median lead of the handelingen recorded late in the last
// leadWindow (plus leadSlack, at most MaxLead), when they were more than leadLateShare of what
// the leader took in (and at least three); it halves the margin after leadDecay without a
// raise, and writes MaxLead as the bound when it changed, in the round's transaction. leads
// are those recorded since the last round.
func (w *openWork) learnLead(ctx context.Context, q querier, cur leadRow, leads []time.Duration) error {
	now := time.Now()
	if w.leadSince.IsZero() {
		w.leadSince = now // a new leader: the decay counts from here
	}
	w.leadSeen = append(w.leadSeen, leadSeen{at: now, leads: leads})
	for len(w.leadSeen) > 0 && now.Sub(w.leadSeen[0].at) > leadWindow {
		w.leadSeen = w.leadSeen[1:]
	}
	var late []time.Duration
	taken := 0
	for _, s := range w.leadSeen {
		taken += s.taken
		for _, l := range s.leads {
			// Recorded for a while after a change beyond a lower margin (sinds): only what
			// exceeds this one says it is too small.
			if l > cur.marge {
				late = append(late, l)
			}
		}
	}
	want := cur.marge
	if len(late) >= 3 && float64(len(late)) > leadLateShare*float64(max(taken, len(late))) {
		slices.Sort(late)
		if m := min(w.cfg.MaxLead, late[len(late)/2]+leadSlack); m > cur.marge {
			want = m
		}
	}
	switch {
	case want > cur.marge:
		w.leadSince, w.leadSeen = now, nil // learn the next raise from what comes after this one
	case cur.marge > 0 && now.Sub(w.leadSince) >= leadDecay:
		want = cur.marge / 2
		if want < time.Millisecond {
			want = 0
		}
		w.leadSince, w.leadSeen = now, nil
	}
	if want == cur.marge && cur.grens == w.cfg.MaxLead {
		w.m.leadMargin.Set(cur.held.Seconds())
		return nil
	}
	if _, err := q.ExecContext(ctx, leadSQL, want.Seconds(), w.cfg.MaxLead.Seconds(), leadHold.Seconds()); err != nil {
		return fmt.Errorf("lead margin: %w", err)
	}
	w.dirty = true
	if want != cur.marge {
		w.log.Info("tsreg lead margin changed: the horizon is held back by the lead bijhouding's tsreg may have on its transaction's start",
			slog.Duration("margin", want), slog.Duration("was", cur.marge), slog.Int("late", len(late)), slog.Int("taken_in", taken),
			slog.Duration("max_lead", w.cfg.MaxLead))
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
