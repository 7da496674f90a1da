package publicatie

import (
	"context"
	"fmt"
	"log/slog"
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
// lead exceeds the margin, with its lead (publicatie_nakomer.voorsprong), and the next round
// raises the margin to that lead plus leadSlack, at most Config.MaxLead (the documented bound,
// publicatie_toestand.grens: leads beyond it never raise the margin, so a load of last
// month's handelingen does not hold back today's). Such a late handeling is taken into the
// view at its place behind the stand; the consumer's order check (package levering) keeps it
// from reaching afnemers after a newer handeling of its persons.
// After leadDecay without a raise the margin is halved, so that one application server whose
// clock jumped back does not hold publication back for good; if the leads are still that
// large, the next late one raises it again.
//
// The triggers read the margin in their own transactions: a lowered margin is held (as
// vorige) for every transaction begun before sinds, which lies a minute after the lowering
// commits, since such a transaction may have compared its leads with the higher one.

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

// learnLead raises the margin to lead (plus leadSlack, at most MaxLead) when lead exceeds it,
// halves it after leadDecay without a raise, and writes MaxLead as the bound when it changed,
// in the round's transaction. lead is the largest lead of the handelingen recorded late since
// the last round (0: none).
func (w *openWork) learnLead(ctx context.Context, q querier, cur leadRow, lead time.Duration) error {
	now := time.Now()
	if w.leadSince.IsZero() {
		w.leadSince = now // a new leader: the decay counts from here
	}
	want := cur.marge
	switch {
	case lead > cur.marge:
		want = min(w.cfg.MaxLead, lead+leadSlack)
		w.leadSince = now
	case cur.marge > 0 && now.Sub(w.leadSince) >= leadDecay:
		want = cur.marge / 2
		if want < time.Millisecond {
			want = 0
		}
		w.leadSince = now
	}
	if want == cur.marge && cur.grens == w.cfg.MaxLead {
		w.m.leadMargin.Set(cur.held.Seconds())
		return nil
	}
	query, args := leadRaiseSQL, []any{want.Seconds(), w.cfg.MaxLead.Seconds()}
	if want < cur.marge {
		query, args = leadLowerSQL, append(args, leadHold.Seconds())
	}
	if _, err := q.ExecContext(ctx, query, args...); err != nil {
		return fmt.Errorf("lead margin: %w", err)
	}
	w.dirty = true
	if want != cur.marge {
		w.log.Info("tsreg lead margin changed: the horizon is held back by the lead bijhouding's tsreg may have on its transaction's start",
			slog.Duration("margin", want), slog.Duration("was", cur.marge), slog.Duration("observed_lead", lead),
			slog.Duration("max_lead", w.cfg.MaxLead))
	}
	w.m.leadMargin.Set(max(want, cur.held).Seconds())
	return nil
}

// leadRaiseSQL sets the margin ($1, seconds) and its bound ($2). Raising needs nothing held:
// a transaction that read the lower margin recorded more, not less.
const leadRaiseSQL = `
		update publicatie_toestand set marge = make_interval(secs => $1), grens = make_interval(secs => $2)`

// leadLowerSQL lowers the margin to $1 and holds the margin in force until then ($3 seconds
// after now) for transactions begun before.
const leadLowerSQL = `
		update publicatie_toestand set
			vorige = case when sinds > now() then greatest(marge, vorige) else marge end,
			sinds = clock_timestamp() + make_interval(secs => $3),
			marge = make_interval(secs => $1), grens = make_interval(secs => $2)`
