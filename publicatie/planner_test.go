package publicatie

import (
	"context"
	"database/sql"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/brp/levering/handeling"
)

// The planner's tests: the open work's intake, its records and sweeps, and the round's choice,
// on memStore's plain data, in the -short lane. What the statements do on PostgreSQL (and that
// the planner and the reference model agree on random histories) is round_test.go's and
// reference_test.go's.

// memStore is a roundStore of plain data: the handelingen still to be delivered and what the
// triggers would have recorded. It answers as sqlStore's statements do, in the small: the
// intake reads after the stand and before the horizon, oldest first, and the recorded ones up
// to the new stand.
type memStore struct {
	open    []memHandeling // to be delivered (statuslev NULL) or in levering
	sent    map[int64]bool // in levering
	nakomer []int64        // publicatie_nakomer
	herlees []place        // publicatie_herlees
	changes []foutState    // publicatie_fout_changes
	fout    []foutState    // every unreleased fout handeling (readHolds)
	blocked []int64        // persons blocked otherwise (recorded since the intake)
	extra   int            // handelingen the database has that the view cannot know of (the sweep)
	dirty   bool
	lead    leadRow // publicatie_state's margin
}

type memHandeling struct {
	place
	personen []int64
}

func (m *memStore) add(id int64, tsreg time.Time, personen ...int64) {
	m.open = append(m.open, memHandeling{place{Tsreg: tsreg, ID: id}, personen})
	slices.SortFunc(m.open, func(a, b memHandeling) int { return a.Compare(b.place) })
}

func (m *memStore) find(id int64) (memHandeling, bool) {
	for _, h := range m.open {
		if h.ID == id {
			return h, true
		}
	}
	return memHandeling{}, false
}

func (m *memStore) changed() bool                              { return m.dirty }
func (m *memStore) start(context.Context, time.Duration) error { return nil }
func (m *memStore) readHorizon(context.Context) (time.Time, roundState, error) {
	return time.Now(), roundState{lead: m.lead}, nil
}

func (m *memStore) readInLevering(context.Context, time.Duration, int) (int, []Candidate, error) {
	return 0, nil, nil
}

func (m *memStore) refuseOddTsreg(context.Context, []string) ([]int64, error) { return nil, nil }

func (m *memStore) readRecords(context.Context) (records, error) {
	var rec records
	if len(m.nakomer) > 0 {
		rec.nakomer, m.nakomer, m.dirty = m.nakomer, nil, true
	}
	if len(m.herlees) > 0 {
		rec.oldest, rec.herlees = slices.MinFunc(m.herlees, func(a, b place) int { return a.Compare(b) }), true
		m.herlees, m.dirty = nil, true
	}
	return rec, nil
}

func (m *memStore) setLead(_ context.Context, l leadWrite) error {
	m.lead = leadRow{margin: l.margin, bound: l.bound, held: max(l.margin, m.lead.held), maxWait: l.maxWait,
		sampleRate: l.sampleRate, sampleLeft: l.sampleLease}
	m.dirty = true
	return nil
}

func (m *memStore) readIntake(_ context.Context, _ []string, horizon time.Time, stand place, limit, _ int, recorded []int64) ([]intakeRow, bool, error) {
	var out []intakeRow
	rows := func(h memHandeling, nakomer bool) {
		if len(h.personen) == 0 {
			out = append(out, intakeRow{place: h.place, nakomer: nakomer})
		}
		for _, p := range h.personen {
			out = append(out, intakeRow{place: h.place, persoon: sql.NullInt64{Int64: p, Valid: true}, nakomer: nakomer})
		}
	}
	newStand, read := stand, 0
	for _, h := range m.open {
		if read < limit && !m.sent[h.ID] && stand.Before(h.place) && h.Tsreg.Before(horizon) {
			rows(h, false)
			newStand, read = h.place, read+1
		}
	}
	// The recorded ones up to the new stand; the others are read in their turn.
	for _, id := range recorded {
		if h, ok := m.find(id); ok && !m.sent[id] && !newStand.Before(h.place) {
			rows(h, true)
		}
	}
	slices.SortStableFunc(out, func(a, b intakeRow) int { return a.Compare(b.place) })
	return out, false, nil
}

func (m *memStore) readHolds(context.Context) (*holds, error) {
	h := newHolds()
	for _, s := range m.fout {
		h.set(s)
	}
	return h, nil
}

func (m *memStore) readFoutChanges(context.Context) ([]foutState, error) {
	out := m.changes
	m.changes, m.dirty = nil, m.dirty || len(out) > 0
	return out, nil
}

// readChecksum counts what is to be delivered up to the stand, as the view should hold it
// (in it or parked), and extra handelingen it cannot know of.
func (m *memStore) readChecksum(_ context.Context, _ []string, stand place) (checksum, error) {
	sum := checksum{n: m.extra}
	for _, h := range m.open {
		if !m.sent[h.ID] && !stand.Before(h.place) {
			sum.n, sum.xor = sum.n+1, sum.xor^h.ID
		}
	}
	return sum, nil
}

func (m *memStore) readHoldsChecksum(context.Context) (checksum, error) {
	var sum checksum
	for _, s := range m.fout {
		sum.n, sum.xor = sum.n+1, sum.xor^s.id
	}
	return sum, nil
}

func (m *memStore) readBlocked(context.Context, bool) (map[int64]struct{}, error) {
	b := map[int64]struct{}{}
	for _, p := range m.blocked {
		b[p] = struct{}{}
	}
	for _, h := range m.open {
		for _, p := range h.personen {
			if m.sent[h.ID] {
				b[p] = struct{}{}
			}
		}
	}
	return b, nil
}

func (m *memStore) touchStale(context.Context, []int64) (map[int64]bool, error) {
	return map[int64]bool{}, nil
}

func (m *memStore) markInLevering(_ context.Context, ids []int64) (map[int64]bool, error) {
	marked := map[int64]bool{}
	for _, id := range ids {
		marked[id], m.sent[id] = true, true
	}
	return marked, nil
}

func (m *memStore) setBack(context.Context, []int64) error { return nil }

func (m *memStore) setSleeping(context.Context, bool) error {
	m.dirty = true
	return nil
}

func (m *memStore) writeHeldCounts(context.Context, int, int) error {
	m.dirty = true
	return nil
}

func (m *memStore) heal(context.Context) ([]int64, error) { return nil, nil }

var _ roundStore = (*memStore)(nil)

// planner is a publisher's open work and its choice, on a memStore, without a database or a
// broker. Its configuration is the open work's (w.cfg).
type planner struct {
	t  *testing.T
	w  *openWork
	st *memStore
}

func newPlanner(t *testing.T, cfg Config) *planner {
	t.Helper()
	cfg.Standalone = true
	cfg = cfg.WithDefaults()
	return &planner{t: t, w: newOpenWork(cfg, newMetrics(nil), slog.New(slog.NewTextHandler(io.Discard, nil))), st: &memStore{sent: map[int64]bool{},
		lead: leadRow{bound: cfg.MaxLead, maxWait: cfg.MaxWait, sampleRate: 1, sampleLeft: leadSampleLease}}}
}

// round takes in what the store holds and returns the ids a round publishes, as
// Publisher.plan, choose, mark and finish do (budget MaxInLevering), and whether the store
// changed (a round that publishes nothing commits only then). What it publishes is in
// levering until deliver.
func (pl *planner) round() (chosen []int64, changed bool) {
	pl.t.Helper()
	ctx := context.Background()
	pl.st.dirty = false
	horizon, st, _ := pl.st.readHorizon(ctx)
	r := &round{epoch: 0, store: pl.st, horizon: horizon, st: st, budget: pl.w.cfg.MaxInLevering}
	v, _, _, err := pl.w.takeIn(ctx, pl.st, 0, horizon, st.lead)
	if err != nil {
		pl.t.Fatal(err)
	}
	p := &Publisher{cfg: pl.w.cfg}
	if err := p.choose(ctx, r, v); err != nil {
		pl.t.Fatal(err)
	}
	for _, c := range r.keep {
		chosen = append(chosen, c.ID)
	}
	if _, err := pl.st.markInLevering(ctx, chosen); err != nil {
		pl.t.Fatal(err)
	}
	pl.w.done(r.keep)
	slices.Sort(chosen)
	return chosen, pl.st.changed()
}

// deliver sets handelingen in levering geleverd, as the consumers do.
func (pl *planner) deliver(ids ...int64) {
	for _, id := range ids {
		if !pl.st.sent[id] {
			pl.t.Fatalf("delivering %d, which is not in levering", id)
		}
		delete(pl.st.sent, id)
		pl.st.open = slices.DeleteFunc(pl.st.open, func(h memHandeling) bool { return h.ID == id })
	}
}

func TestPlannerRounds(t *testing.T) {
	t.Parallel()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	for _, c := range []struct {
		name string
		run  func(t *testing.T, pl *planner)
	}{
		{"the oldest of each person, whatever else is ready", func(t *testing.T, pl *planner) {
			pl.st.add(1, at(1), 10)
			pl.st.add(2, at(2), 10, 20)
			pl.st.add(3, at(3), 30)
			pl.st.add(4, at(4))
			wantRound(t, pl, []int64{1, 3, 4}, false)
			wantRound(t, pl, nil, false) // 2 waits for 1's delivery
			pl.deliver(1, 3, 4)
			wantRound(t, pl, []int64{2}, false)
		}},
		{"persons in levering hold back their handelingen", func(t *testing.T, pl *planner) {
			pl.st.add(1, at(1), 10)
			pl.st.add(2, at(2), 20)
			pl.st.blocked = []int64{10}
			wantRound(t, pl, []int64{2}, false)
			pl.st.blocked = nil
			wantRound(t, pl, []int64{1}, false)
		}},
		{"a recorded handeling behind the stand comes before its person's newer ones", func(t *testing.T, pl *planner) {
			pl.st.add(1, at(1), 10)
			pl.st.add(3, at(3), 20)
			wantRound(t, pl, []int64{1, 3}, false)
			pl.deliver(1, 3)
			// 2 commits late, behind the stand (3), with 4 of its person after it.
			pl.st.add(2, at(2), 20)
			pl.st.add(4, at(4), 20)
			pl.st.nakomer = []int64{2}
			wantRound(t, pl, []int64{2}, true) // emptied publicatie_nakomer: the round commits
			pl.deliver(2)
			wantRound(t, pl, []int64{4}, false)
		}},
		{"a recorded handeling after the stand waits for the intake's turn", func(t *testing.T, pl *planner) {
			pl.w.cfg.Limit = 1
			pl.st.add(1, at(1), 10)
			pl.st.add(2, at(2), 20)
			pl.st.nakomer = []int64{2}
			// The round empties publicatie_nakomer; 2, after the new stand, is the intake's next.
			wantRound(t, pl, []int64{1}, true)
			wantRound(t, pl, []int64{2}, false)
		}},
		{"a handeling registered behind the stand rebuilds the view", func(t *testing.T, pl *planner) {
			pl.st.add(2, at(2), 10)
			wantRound(t, pl, []int64{2}, false)
			pl.deliver(2)
			pl.st.add(1, at(1), 20)
			pl.st.herlees = []place{{Tsreg: at(1), ID: 1}}
			wantRound(t, pl, []int64{1}, true)
			if n := testutil.ToFloat64(pl.w.m.viewRebuilds.WithLabelValues(rebuildLate)); n != 1 {
				t.Errorf("rebuilds for a late registration: %v, want 1", n)
			}
		}},
		{"the sweep rebuilds the view on its second disagreement in a row", func(t *testing.T, pl *planner) {
			pl.st.add(1, at(1), 10)
			pl.st.add(2, at(2), 10)
			wantRound(t, pl, []int64{1}, false)
			pl.st.extra = 1 // a handeling the triggers did not record
			pl.w.lastSweep = time.Time{}
			pl.round()
			rebuilds := pl.w.m.viewRebuilds.WithLabelValues(rebuildSweep)
			if n := testutil.ToFloat64(rebuilds); n != 0 {
				t.Fatalf("rebuilt on the first disagreement")
			}
			pl.round()
			if n := testutil.ToFloat64(rebuilds); n != 1 {
				t.Fatalf("rebuilds after two disagreements: %v, want 1", n)
			}
		}},
		{"a fout parks its persons' work under the strict policy, and its release frees it", func(t *testing.T, pl *planner) {
			pl.st.add(2, at(2), 10, 20)
			pl.st.add(3, at(3), 30)
			pl.st.fout = []foutState{{id: 1, held: true, personen: []int64{10}}}
			wantRound(t, pl, []int64{3}, false)
			if v := pl.w.view; v.heldN != 1 {
				t.Errorf("held: %d, want 1", v.heldN)
			}
			pl.st.fout = nil
			pl.st.changes = []foutState{{id: 1, held: false, personen: []int64{10}}} // released
			wantRound(t, pl, []int64{2}, true)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, newPlanner(t, Config{FoutPolicy: handeling.Strict, GroupSize: 1}))
		})
	}
}

// wantRound runs a round and checks what it chose and whether it must commit without
// publishing anything.
func wantRound(t *testing.T, pl *planner, want []int64, changed bool) {
	t.Helper()
	got, ch := pl.round()
	if !slices.Equal(got, want) {
		t.Fatalf("round chose %v, want %v", got, want)
	}
	if ch != changed {
		t.Fatalf("round changed the database: %v, want %v", ch, changed)
	}
}
