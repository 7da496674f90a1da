package publicatie

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/brp/levering/handeling"
	"github.com/brp/levering/internal/brptest"
)

// TestSelectionMatchesReferenceOnRandomHistories runs random histories (registrations with
// ties, several persons, none, the excluded soort, a late writer whose transaction is open
// across rounds, deliveries, fout, an operator's retry and release, both fout policies and
// three exclusion lists, views dropped as by a new leader, sweeps) and checks before every round what the reference model says it must
// publish: Select, the straightforward walk, over every candidate below the horizon. Any
// difference fails, with the history's seed and step.
func TestSelectionMatchesReferenceOnRandomHistories(t *testing.T) {
	t.Parallel()
	runHistories(t, 77, func(r *rand.Rand) Config { return Config{Limit: 100_000} }, false, nil)
}

// TestSelectionMatchesReferenceWithManyBlocked runs them after a start with hundreds of
// persons held behind an unreleased fout (a few released) and hundreds blocked by a
// handeling in levering, each with a later handeling still to be delivered, and a few fouts
// of the histories' own persons: more blocked work than a round's window (window), older than
// anything the histories register. Every round must still publish what the reference model
// says, and the operator's retries and releases fall mostly on those fouts.
func TestSelectionMatchesReferenceWithManyBlocked(t *testing.T) {
	t.Parallel()
	runHistories(t, 80, func(r *rand.Rand) Config {
		return Config{Limit: 100_000, PersonCap: []int{0, 1 + r.IntN(3)}[r.IntN(2)]}
	}, false, manyBlocked)
}

// manyBlocked registers the blocked work of TestSelectionMatchesReferenceWithManyBlocked, an
// hour before the history's own, and sets MaxInLevering so that the budget's window is smaller
// than what is blocked by handelingen in levering.
func manyBlocked(h *history) {
	h.t.Helper()
	fout, inLevering := 550+h.r.IntN(200), 550+h.r.IntN(100)
	// Fouts 1000001 and up, in levering 2000001 and up, each with a later handeling 500000
	// ids on. (Separate statements: the kern layout's test views cannot see a handeling
	// inserted by another part of the same statement.)
	h.e.db.MustExec(`insert into admhnd (id, soort, tsreg, statuslev, foutreden, vrijgegeven)
		select 1000000 + i, 'VERHUIZING', now() - interval '1 hour' + make_interval(secs => i / 1000.0), 'fout', 'test',
		       case when i % 10 = 0 then now() end
		from generate_series(1, $1::int) i`, fout)
	h.e.db.MustExec(`insert into admhnd (id, soort, tsreg, statuslev, tspub)
		select 2000000 + i, 'VERHUIZING', now() - interval '1 hour' + make_interval(secs => i / 1000.0), 'in_levering', now()
		from generate_series(1, $1::int) i`, inLevering)
	h.e.db.MustExec(`insert into admhnd (id, soort, tsreg)
		select id + 500000, 'VERHUIZING', now() - interval '30 minutes' + make_interval(secs => (id % 1000000) / 1000.0)
		from admhnd where id between 1000001 and 1499999 or id between 2000001 and 2499999`)
	h.e.db.MustExec(`insert into admhnd_persoon (admhnd_id, persoon_id)
		select id, id % 500000 from admhnd where id between 1000001 and 1499999 or id between 2000001 and 2499999
		union all
		select id, (id - 500000) % 500000 from admhnd where id between 1500001 and 1999999 or id between 2500001 and 2999999`)
	// Fouts of the histories' own persons (1 to 6), a minute before their registrations.
	for i, p := range h.r.Perm(6)[:1+h.r.IntN(2)] {
		id := int64(3000000 + i)
		h.e.db.MustExec(`insert into admhnd (id, soort, tsreg, statuslev, foutreden)
			values ($1, 'VERHUIZING', now() - interval '1 minute', 'fout', 'test')`, id)
		h.e.db.MustExec(`insert into admhnd_persoon (admhnd_id, persoon_id) values ($1, $2)`, id, p+1)
	}
	h.e.pub.cfg.MaxInLevering = inLevering + 2 + h.r.IntN(40)
	h.cfg.MaxInLevering = h.e.pub.cfg.MaxInLevering
	if b := h.cfg.MaxInLevering - inLevering; window(b) >= inLevering {
		h.t.Fatalf("a window of %d (budget %d) holds the %d blocked by handelingen in levering", window(b), b, inLevering)
	}
	h.did("%d persons held behind fout, %d blocked by handelingen in levering, max in levering %d", fout, inLevering, h.cfg.MaxInLevering)
}

// TestSelectionMatchesReferenceWithPersonCap runs them with one to three handelingen of a
// person in the view: parking and rewinding must not change what a round publishes, since a
// parked handeling is never ready (view.park) and a rewind reads everything again before the
// round selects.
func TestSelectionMatchesReferenceWithPersonCap(t *testing.T) {
	t.Parallel()
	runHistories(t, 79, func(r *rand.Rand) Config { return Config{Limit: 100_000, PersonCap: 1 + r.IntN(3)} }, false, nil)
}

// TestSelectionKeepsOrderWithASmallView runs the same random histories with a view that
// holds only a few handelingen (by count or by bytes), one to three of a person (parking the
// rest, and rewinding), and takes in one to three per round. A round then publishes
// less than the reference model, which reads everything; what must hold is that every
// handeling it publishes is the oldest open one of each of its persons (nothing older of
// theirs to be delivered, in levering, or fout under the strict policy), and that in the
// end everything is delivered.
func TestSelectionKeepsOrderWithASmallView(t *testing.T) {
	t.Parallel()
	runHistories(t, 78, func(r *rand.Rand) Config {
		return Config{Limit: 1 + r.IntN(3), ViewSize: 2 + r.IntN(5), PersonCap: 1 + r.IntN(3),
			ViewBytes: []int{DefaultViewBytes, intakeCost(1) + r.IntN(4*intakeCost(2))}[r.IntN(2)]}
	}, true, nil)
}

// runHistories runs BRP_REFERENCE_SEEDS (default 24) random histories of a publisher
// configured by base and checked by h.round, each begun by setup (nil: none). More seeds
// search longer. scripts/test.sh runs 8 on the statuslev enum and on the kern layout: there
// the histories look for a statement that fails on that column type or layout, while the
// rules themselves are searched by the main run's 24. Eight still park and rewind (checked
// from 8 on).
func runHistories(t *testing.T, stream uint64, base func(*rand.Rand) Config, small bool, setup func(*history)) {
	brptest.NeedsServices(t)
	seeds := uint64(24)
	if n, err := strconv.ParseUint(os.Getenv("BRP_REFERENCE_SEEDS"), 10, 64); err == nil {
		seeds = n
	}
	var rewinds atomic.Int64 // to person_cap, over all histories
	capped := base(rand.New(rand.NewPCG(0, stream))).PersonCap > 0
	t.Cleanup(func() {
		if capped && seeds >= 8 && rewinds.Load() == 0 {
			t.Errorf("no history parked and rewound: the person caps were never reached")
		}
	})
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			r := rand.New(rand.NewPCG(seed, stream))
			cfg := base(r)
			cfg.MaxInLevering, cfg.RedeliveryTimeout, cfg.MaxWait = 2+r.IntN(8), time.Hour, time.Minute
			// The model publishes a handeling without persons at once: the grace for its persons
			// has a test of its own (TestPersonlessHandelingWaitsForItsPersons).
			cfg.PersonlessGrace = time.Nanosecond
			cfg.GroupSize = []int{1, 2, 3, 100}[r.IntN(4)]
			cfg.GroupBytes = []int{DefaultGroupBytes, 100, 150}[r.IntN(3)]
			cfg.FoutPolicy = []handeling.FoutPolicy{handeling.Strict, handeling.Skip}[r.IntN(2)]
			switch r.IntN(3) {
			case 1:
				cfg.Excluded = []string{}
			case 2:
				cfg.Excluded = []string{"ANDERE_SOORT", brptest.Layout().DefaultExcluded()[0]}
			}
			e := newRoundEnv(t, cfg)
			h := &history{t: t, e: e, r: r, cfg: e.pub.Config(), small: small}
			if setup != nil {
				setup(h)
			}
			for step := range 120 {
				h.step = step
				if r.IntN(10) == 0 {
					e.pub.work.lastSweep = time.Time{} // the next round compares the view with the database
				}
				if r.IntN(25) == 0 {
					e.pub.work.view = nil // a new leader, or a failed round: the view is built again
					h.did("view dropped")
				}
				switch x := r.IntN(100); {
				case x < 30:
					h.register(nil)
				case x < 35:
					h.lateWriter()
				case x < 65:
					h.round()
				case x < 85:
					h.finish("geleverd")
				case x < 90:
					h.finish("fout")
				case x < 95:
					h.operator("retry")
				default:
					h.operator("release")
				}
			}
			if h.late != nil {
				if err := h.late.Commit(); err != nil {
					t.Fatal(err)
				}
			}
			drain := 30
			if small {
				drain = 400 // a few handelingen per round
				// Under the strict policy a fout handeling holds its persons back until an
				// operator acts: release them all, so that everything can be delivered.
				e.db.MustExec(`update admhnd set vrijgegeven = now() where statuslev = 'fout'`)
			}
			for i := range drain { // deliver everything, checking every round
				h.round()
				h.finish("geleverd")
				if small && i%10 == 9 {
					var open int
					if err := e.db.Get(&open, `select count(*) from `+state()+` a where statuslev = 'in_levering'
						or statuslev is null and soort <> all($1)`, pq.Array(h.cfg.Excluded)); err != nil {
						t.Fatal(err)
					}
					if open == 0 {
						break
					}
				}
			}
			if small {
				var open int
				if err := e.db.Get(&open, `select count(*) from `+state()+` a where statuslev is null and soort <> all($1)`,
					pq.Array(h.cfg.Excluded)); err != nil || open > 0 {
					t.Fatalf("%d handelingen still to be delivered after the drain (%v)", open, err)
				}
			}
			n := int64(testutil.ToFloat64(e.pub.m.viewRebuilds.WithLabelValues(rebuildPersonCap)))
			rewinds.Add(n)
			t.Logf("policy %s, excluded %v, max in levering %d, limit %d, view size %d, %d bytes, person cap %d, groups of %d (%d bytes): %d rounds checked, %d published (%d in groups), %d rewinds",
				cfg.FoutPolicy, h.cfg.Excluded, cfg.MaxInLevering, h.cfg.Limit, h.cfg.ViewSize, h.cfg.ViewBytes, h.cfg.PersonCap,
				h.cfg.GroupSize, h.cfg.GroupBytes, h.rounds, h.published, h.grouped, n)
		})
	}
}

// state is admhnd as the reference model reads it. On the kern layout it reads the kern tables
// (the test views show status 2 as NULL and soort 37 by the contract's name): status 2, niet
// leveren, is 'niet_leveren' (never to be delivered, never blocking) and a soort is its
// kern.srtadmhnd.naam, the name Excluded uses there.
func state() string {
	if brptest.Layout() == handeling.Kern {
		return `(select a.id, s.naam::text as soort, a.tsreg, publicatie_status_name(a.statuslev) as statuslev, l.vrijgegeven
			from kern.admhnd a join kern.srtadmhnd s on s.id = a.srt left join admhnd_levering l on l.admhnd_id = a.id)`
	}
	return `admhnd`
}

type history struct {
	t      *testing.T
	e      *roundEnv
	r      *rand.Rand
	cfg    Config
	step   int
	nextID int64
	small  bool     // check order only (a small view), not equality with the reference
	late   *sqlx.Tx // a bijhouding transaction left open across rounds
	lateAt int      // step at which it commits

	rounds, published, grouped int
	ops                        []string // what happened, for a failure message
}

func (h *history) did(format string, args ...any) {
	h.ops = append(h.ops, fmt.Sprintf("%d: ", h.step)+fmt.Sprintf(format, args...))
}

func (h *history) fail(format string, args ...any) {
	h.t.Helper()
	h.t.Fatalf("step %d: "+format, append([]any{h.step}, args...)...)
}

// register inserts one to three handelingen in one transaction (same tsreg: ties by id), of
// tx if given, else of a new one.
func (h *history) register(tx *sqlx.Tx) {
	h.t.Helper()
	if tx == nil {
		var err error
		if tx, err = h.e.db.Beginx(); err != nil {
			h.fail("%v", err)
		}
		defer func() {
			if err := tx.Commit(); err != nil {
				h.fail("register: %v", err)
			}
		}()
	}
	for range 1 + h.r.IntN(3) {
		h.nextID++
		soort := "VERHUIZING"
		switch kern := brptest.Layout() == handeling.Kern; {
		case h.r.IntN(10) == 0:
			soort = brptest.Layout().DefaultExcluded()[0] // kern: soort 37 in status 1
		case h.r.IntN(15) == 0:
			soort = "ANDERE_SOORT"
		case kern && h.r.IntN(15) == 0:
			soort = handeling.InitieleVulling // the test views register it as bijhouding does: status 2
		}
		var personen []int64
		for range h.r.IntN(4) { // 0 to 3 persons of 6: chains, multi-person, none
			if p := int64(1 + h.r.IntN(6)); !slices.Contains(personen, p) {
				personen = append(personen, p)
			}
		}
		if _, err := tx.Exec(`insert into admhnd (id, soort, tsreg) values ($1, $2, now())`, h.nextID, soort); err != nil {
			h.fail("register: %v", err)
		}
		if _, err := tx.Exec(`insert into admhnd_persoon (admhnd_id, persoon_id) select $1, unnest($2::bigint[])`,
			h.nextID, pq.Array(personen)); err != nil {
			h.fail("register: %v", err)
		}
		h.did("register %d %s %v (late: %v)", h.nextID, soort, personen, tx == h.late)
	}
}

// lateWriter begins a bijhouding transaction that registers later (its handelingen get its
// start as tsreg, older than what others register meanwhile), or commits the open one.
func (h *history) lateWriter() {
	h.t.Helper()
	if h.late == nil {
		tx, err := h.e.db.Beginx()
		if err != nil {
			h.fail("%v", err)
		}
		// The transaction starts now and holds admhnd as a registering one does, so it holds
		// back the horizon for MaxWait (its bound, a minute, here: late_test.go tests it, and writers
		// that register nothing).
		if _, err := tx.Exec(`lock table admhnd in row exclusive mode`); err != nil {
			h.fail("%v", err)
		}
		h.late, h.lateAt = tx, h.step+5+h.r.IntN(20)
		h.did("late writer begins")
		return
	}
	if h.step < h.lateAt {
		return
	}
	h.register(h.late)
	if err := h.late.Commit(); err != nil {
		h.fail("late writer: %v", err)
	}
	h.late = nil
}

// pick returns up to n ids of query's result (ordered by id), chosen by the history's seed.
func (h *history) pick(n int, query string) []int64 {
	h.t.Helper()
	var ids []int64
	if err := h.e.db.Select(&ids, query+` order by id`); err != nil {
		h.fail("%v", err)
	}
	h.r.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	return ids[:min(n, len(ids))]
}

// finish sets some handelingen in levering to status, as a consumer would.
func (h *history) finish(status string) {
	h.t.Helper()
	ids := h.pick(1+h.r.IntN(3), `select id from admhnd where statuslev = 'in_levering'`)
	if _, err := h.e.db.Exec(`
		update admhnd set statuslev = $1, tslev = case when $3 = 'geleverd' then now() end,
		       foutreden = case when $3 = 'fout' then 'test' end
		where id = any($2)`, status, pq.Array(ids), status); err != nil {
		h.fail("finish: %v", err)
	}
	h.did("%s %v", status, ids)
}

// operator retries or releases a fout handeling as operate does.
func (h *history) operator(action string) {
	h.t.Helper()
	query := `update admhnd set statuslev = null, foutreden = null, vrijgegeven = null, tspub = null where id = any($1)`
	ids := h.pick(1, `select id from admhnd where statuslev = 'fout'`)
	if action == "release" {
		query = `update admhnd set vrijgegeven = now() where id = any($1)`
		ids = h.pick(1, `select id from admhnd where statuslev = 'fout' and vrijgegeven is null`)
	}
	if _, err := h.e.db.Exec(query, pq.Array(ids)); err != nil {
		h.fail("%s: %v", action, err)
	}
	h.did("%s %v", action, ids)
}

// round runs the next round and checks what it published against the reference, over the
// database as it was before the round. With a person cap the view may hold only the first
// handelingen of a person: a parked one cannot join a group, so the reference leaves out of
// groups what the round's view lacked after its intake (inView).
func (h *history) round() {
	h.t.Helper()
	var ref func(inView map[int64]bool) [][]int64
	if !h.small {
		ref = h.reference()
	}
	var inView map[int64]bool
	h.e.pub.cfg.Hooks.AfterIntake = func(context.Context) error {
		inView = map[int64]bool{}
		for id := range h.e.pub.work.view.byID {
			inView[id] = true
		}
		return nil
	}
	got := h.e.round()
	h.e.pub.cfg.Hooks.AfterIntake = nil
	var want [][]int64
	if ref != nil {
		want = ref(inView)
	}
	groups := h.e.published()
	h.did("round published %v", groups)
	h.rounds++
	h.published += len(got)
	for _, g := range groups {
		if len(g) > 1 {
			h.grouped += len(g)
		}
	}
	switch {
	case h.small:
		if overtook := h.overtaking(got); len(overtook) > 0 {
			h.fail("round published %v overtaking older open handelingen of their persons: %v\n%s\nhistory:\n%s",
				groups, overtook, h.dump(), strings.Join(h.ops, "\n"))
		}
		h.disjoint(groups)
		h.disjoint(groups)
	default:
		if !slices.EqualFunc(groups, want, slices.Equal) {
			h.fail("round published %v, the reference model says %v\n%s\nhistory:\n%s", groups, want, h.dump(),
				strings.Join(h.ops, "\n"))
		}
	}
}

// disjoint fails when two publications of a round share a person: two consumers could then
// deliver that person's handelingen at once.
func (h *history) disjoint(groups [][]int64) {
	h.t.Helper()
	owner := map[int64]int{}
	for i, g := range groups {
		var persons []int64
		if err := h.e.db.Select(&persons, `select distinct persoon_id from admhnd_persoon where admhnd_id = any($1)`, pq.Array(g)); err != nil {
			h.fail("%v", err)
		}
		for _, p := range persons {
			if j, ok := owner[p]; ok && j != i {
				h.fail("publications %v and %v share person %d", groups[j], g, p)
			}
			owner[p] = i
		}
	}
}

// overtaking returns "published>older" for every handeling of published that has an older
// open handeling of one of its persons: to be delivered, in levering (published in an
// earlier round), or fout and not released under the strict policy.
func (h *history) overtaking(published []int64) []string {
	h.t.Helper()
	var out []string
	if err := h.e.db.Select(&out, `
		select distinct a.id || '>' || b.id
		from `+state()+` a
		join admhnd_persoon ap on ap.admhnd_id = a.id
		join admhnd_persoon bp on bp.persoon_id = ap.persoon_id and bp.admhnd_id <> a.id
		join `+state()+` b on b.id = bp.admhnd_id
		where a.id = any($1) and (b.tsreg, b.id) < (a.tsreg, a.id)
		  and ((b.statuslev is null and b.soort <> all($2))
		       or (b.statuslev = 'in_levering' and b.id <> all($1))
		       or ($3 and b.statuslev = 'fout' and b.vrijgegeven is null))`,
		pq.Array(published), pq.Array(h.cfg.Excluded), h.cfg.FoutPolicy == handeling.Strict); err != nil {
		h.fail("%v", err)
	}
	return out
}

// reference reads every handeling still to be delivered below the horizon, with the persons
// blocked by handelingen in levering and by fout ones that hold their persons back, and
// returns referenceGroups over them, given which of them were in the round's view.
func (h *history) reference() func(inView map[int64]bool) [][]int64 {
	h.t.Helper()
	ctx := context.Background()
	horizon, _, err := h.e.pub.sql.readHorizon(ctx, h.e.db)
	if err != nil {
		h.fail("%v", err)
	}
	type row struct {
		ID       int64          `db:"id"`
		Soort    string         `db:"soort"`
		Status   sql.NullString `db:"statuslev"`
		Released bool           `db:"released"`
		Personen pq.Int64Array  `db:"personen"`
	}
	var rows []row
	if err := h.e.db.Select(&rows, `
		select a.id, a.soort, a.statuslev, a.vrijgegeven is not null as released, coalesce(p.personen, '{}') as personen
		from `+state()+` a
		left join (select admhnd_id, array_agg(persoon_id order by persoon_id) as personen from admhnd_persoon group by admhnd_id) p
		    on p.admhnd_id = a.id
		where a.tsreg < $1 or a.statuslev is not null
		order by a.tsreg, a.id`, horizon); err != nil {
		h.fail("%v", err)
	}
	var candidates []Candidate
	blocked := map[int64]struct{}{}
	behindFout := map[int64]bool{} // persons of unreleased fout handelingen, and of candidates held behind them
	inLevering := 0
	for _, x := range rows {
		switch {
		case x.Status.String == "in_levering":
			inLevering++
			for _, p := range x.Personen {
				blocked[p] = struct{}{}
			}
		case x.Status.String == "fout" && h.cfg.FoutPolicy == handeling.Strict && !x.Released:
			for _, p := range x.Personen {
				blocked[p] = struct{}{}
				behindFout[p] = true
			}
		case !x.Status.Valid && !slices.Contains(h.cfg.Excluded, x.Soort):
			candidates = append(candidates, Candidate{ID: x.ID, Personen: x.Personen})
		}
	}
	// Held behind fout, in delivery order: a candidate one of whose persons is of an
	// unreleased fout handeling, or of a candidate held before it.
	held := map[int64]bool{}
	for _, c := range candidates {
		if slices.ContainsFunc(c.Personen, func(p int64) bool { return behindFout[p] }) {
			held[c.ID] = true
			for _, p := range c.Personen {
				behindFout[p] = true
			}
		}
	}
	return func(inView map[int64]bool) [][]int64 {
		if inView != nil && !(h.cfg.PersonCap > 0 && h.cfg.PersonCap < 100) {
			// Nothing is parked for its cap: the view holds every candidate but those held
			// behind fout, and none of those (they take no room in it).
			for _, c := range candidates {
				if inView[c.ID] == held[c.ID] {
					h.fail("handeling %d is to be delivered, held behind fout %v, in the round's view %v\n%s\nhistory:\n%s",
						c.ID, held[c.ID], inView[c.ID], h.dump(), strings.Join(h.ops, "\n"))
				}
			}
		}
		return referenceGroups(candidates, blocked, inView, h.cfg.MaxInLevering-inLevering, h.cfg.GroupSize, h.cfg.GroupBytes)
	}
}

// referenceGroups is what a round publishes, by the rule written out over every candidate
// (oldest first) instead of the view: the heads Select keeps start groups, and the walk
// over the candidates in delivery order takes, while the budget lasts, each such head and
// each later candidate c that shares a person with a group and of whose persons r each either
// is the group's, with every older candidate of r in the group, or is new: not blocked in the
// database, not another group's, and with no older candidate. A candidate past the group's
// size or bytes, or not in inView (parked: the view lacked it), is left out (and so are, by
// the rule, the later ones of its persons). The groups come in the order of their heads.
func referenceGroups(candidates []Candidate, blocked map[int64]struct{}, inView map[int64]bool, budget, size, bytes int) [][]int64 {
	used := maps.Clone(blocked) // Select adds the persons of every candidate it walks
	heads := Select(candidates, blocked, budget)
	isHead := map[int64]bool{}
	for _, c := range heads {
		isHead[c.ID] = true
		for _, p := range c.Personen {
			used[p] = struct{}{}
		}
	}
	blocked = used
	type group struct {
		ids     []int64
		in      map[int64]bool
		persons map[int64]bool
		bytes   int
	}
	var gs []*group
	taken := 0
	for i, c := range candidates {
		if taken >= budget {
			break
		}
		if isHead[c.ID] {
			g := &group{ids: []int64{c.ID}, in: map[int64]bool{c.ID: true}, persons: map[int64]bool{}, bytes: memberBytes(c)}
			for _, p := range c.Personen {
				g.persons[p] = true
			}
			gs = append(gs, g)
			taken++
			continue
		}
		for _, g := range gs {
			if len(g.ids) >= size || !slices.ContainsFunc(c.Personen, func(p int64) bool { return g.persons[p] }) {
				continue
			}
			ok := g.bytes+memberBytes(c) <= bytes && inView[c.ID]
			for _, r := range c.Personen {
				for _, older := range candidates[:i] {
					if slices.Contains(older.Personen, r) && (!g.persons[r] || !g.in[older.ID]) {
						ok = false
					}
				}
				if _, b := blocked[r]; !g.persons[r] && b {
					ok = false
				}
			}
			if !ok {
				continue
			}
			g.ids = append(g.ids, c.ID)
			g.in[c.ID] = true
			g.bytes += memberBytes(c)
			taken++
			for _, r := range c.Personen {
				g.persons[r] = true
				blocked[r] = struct{}{}
			}
			break
		}
	}
	out := make([][]int64, len(gs))
	for i, g := range gs {
		out[i] = g.ids
	}
	return out
}

// dump shows the handelingen and the publisher's view of them, for a failure message.
func (h *history) dump() string {
	type row struct {
		ID   int64  `db:"id"`
		Line string `db:"line"`
	}
	var rows []row
	if err := h.e.db.Select(&rows, `
		select a.id, format('%s %s %s rel=%s persons=%s', a.id, a.soort, coalesce(a.statuslev::text, 'NULL'),
		       a.vrijgegeven is not null,
		       (select array_agg(persoon_id order by persoon_id) from admhnd_persoon where admhnd_id = a.id)) as line
		from `+state()+` a order by a.tsreg, a.id`); err != nil {
		return err.Error()
	}
	var lines []string
	for _, r := range rows {
		state := "not in the view"
		if v := h.e.pub.work.view; v != nil {
			if e, ok := v.byID[r.ID]; ok {
				state = fmt.Sprintf("in the view: heads %d of %d", e.heads, len(e.personen))
			}
		}
		lines = append(lines, r.Line+" | "+state)
	}
	return strings.Join(lines, "\n")
}
