package publicatie

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/lib/pq"

	"github.com/brp/levering/handeling"
	"github.com/brp/levering/internal/brptest"
	"github.com/brp/levering/operate"
)

// TestOperateBlockedEqualsSelectionBlocked checks, on random states, that the persons the
// status page lists as blocked (operate.ReadOverview) are exactly the persons the round's
// selection holds back (readBlocked and the view's holds) that have a handeling waiting, and that both follow the
// rule written out here: a person is blocked by a handeling in levering or, under the strict
// policy, by a fout one no operator released. States mix every status, fout released and not,
// handelingen without persons or of excluded soorten, ties in tsreg; each is read under both
// fout policies and three exclusion lists.
func TestOperateBlockedEqualsSelectionBlocked(t *testing.T) {
	db, _ := brptest.DB(t)
	ctx := context.Background()
	exclusions := [][]string{nil, {"ANDERE_SOORT", handeling.InitieleVulling}, {}}
	for seed := range uint64(40) {
		r := rand.New(rand.NewPCG(seed, 16))
		hs := randomState(r)
		brptest.ClearHandelingen(t, db)
		for _, h := range hs {
			if _, err := db.ExecContext(ctx, `
				insert into admhnd (id, soort, tsreg, statuslev, tslev, vrijgegeven, tspub, foutreden)
				values ($1, $2, $3, $4, case when $6 = 'geleverd' then now() end,
				        case when $5 then now() end, case when $6 <> '' then now() end,
				        case when $6 = 'fout' then 'reden' end)`,
				h.id, h.soort, h.tsreg, h.status, h.released, string(h.status)); err != nil {
				t.Fatal(err)
			}
			if _, err := db.ExecContext(ctx, `insert into admhnd_persoon (admhnd_id, persoon_id) select $1, unnest($2::bigint[])`,
				h.id, pq.Array(h.personen)); err != nil {
				t.Fatal(err)
			}
		}
		// Registered with a tsreg in the past, they were recorded for the publisher (migration
		// 0011), and the fout ones in publicatie_fout_changes (migration 0014): as if a round
		// had read them.
		if _, err := db.ExecContext(ctx, `delete from publicatie_nakomer; delete from publicatie_fout_changes`); err != nil {
			t.Fatal(err)
		}
		var records int
		if err := db.GetContext(ctx, &records, `select (select count(*) from publicatie_nakomer) + (select count(*) from publicatie_fout_changes)`); err != nil || records != 0 {
			t.Fatalf("seed %d: the records hold %d rows (%v); this test compares states without them", seed, records, err)
		}
		for _, policy := range []handeling.FoutPolicy{handeling.Strict, handeling.Skip} {
			strict := policy == handeling.Strict
			// What a round holds back: the persons readBlocked reads and, under the strict
			// policy, those its view's holds keep (readHolds).
			selection, err := statementsFor(brptest.Layout()).readBlocked(ctx, db, strict)
			if err != nil {
				t.Fatal(err)
			}
			if strict {
				holds, err := statementsFor(brptest.Layout()).readHolds(ctx, db)
				if err != nil {
					t.Fatal(err)
				}
				for p := range holds.persons {
					selection[p] = struct{}{}
				}
			}
			want := blockingModel(hs, strict)
			if got := slices.Sorted(maps.Keys(selection)); !slices.Equal(got, slices.Sorted(maps.Keys(want))) {
				t.Fatalf("seed %d, %s: the selection blocks persons %v, the rule %v\nstate: %v", seed, policy, got, slices.Sorted(maps.Keys(want)), hs)
			}
			for _, excluded := range exclusions {
				o, err := operate.ReadOverview(ctx, db, operate.OverviewConfig{Layout: brptest.Layout(), Excluded: excluded, FoutPolicy: policy})
				if err != nil {
					t.Fatal(err)
				}
				what := fmt.Sprintf("seed %d, %s, excluded %v", seed, policy, excluded)
				checkOverviewBlocked(t, what, o, selection, want, waitingPersons(hs, o.Excluded), hs)
			}
		}
	}
}

// checkOverviewBlocked compares the overview's blocked persons with the selection's blocked
// set restricted to persons with a waiting handeling, and each person's blocking handeling
// with the oldest one the rule names.
func checkOverviewBlocked(t *testing.T, what string, o operate.Overview, selection map[int64]struct{},
	rule map[int64]randomHandeling, waiting map[int64]bool, hs []randomHandeling) {
	t.Helper()
	var want []int64
	for p := range selection {
		if waiting[p] {
			want = append(want, p)
		}
	}
	slices.Sort(want)
	var got []int64
	for _, b := range o.Blocked {
		got = append(got, b.PersoonID)
		h := rule[b.PersoonID]
		if b.BlockingID != h.id || b.BlockingStatus != h.status {
			t.Errorf("%s: person %d blocked by %d (%q), want %d (%q)", what, b.PersoonID, b.BlockingID, b.BlockingStatus, h.id, h.status)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, want) || o.BlockedTotal != int64(len(want)) {
		t.Fatalf("%s: the overview lists blocked persons %v (total %d), the selection %v\nstate: %v", what, got, o.BlockedTotal, want, hs)
	}
}

// randomHandeling is one row of a random state.
type randomHandeling struct {
	id       int64
	soort    string
	tsreg    time.Time
	status   handeling.Status
	released bool // vrijgegeven set (fout only)
	personen []int64
}

// toDeliver says whether h is still to be delivered with excluded. On the kern layout the test
// views register the contract's excluded soort as bijhouding does, in status 2 (niet leveren):
// never to be delivered, whatever is excluded.
func (h randomHandeling) toDeliver(excluded []string) bool {
	nietLeveren := brptest.Layout() == handeling.Kern && h.soort == handeling.InitieleVulling
	return h.status == handeling.TeLeveren && !slices.Contains(excluded, h.soort) && !nietLeveren
}

func (h randomHandeling) String() string {
	return fmt.Sprintf("{%d %s %s %q released=%v %v}", h.id, h.soort, h.tsreg.Format("15:04:05"), h.status, h.released, h.personen)
}

// randomState makes up to 40 handelingen over 12 persons: every status, fout released or not,
// some without persons, some of an excluded soort, tsreg with ties.
func randomState(r *rand.Rand) []randomHandeling {
	n := r.IntN(41)
	soorten := []string{"VERHUIZING", "GEBOORTE", handeling.InitieleVulling, "ANDERE_SOORT"}
	statuses := []handeling.Status{handeling.TeLeveren, handeling.InLevering, handeling.Geleverd, handeling.Fout}
	var hs []randomHandeling
	for i := range n {
		h := randomHandeling{
			id:     int64(i + 1),
			soort:  soorten[r.IntN(len(soorten))],
			tsreg:  t0.Add(time.Duration(r.IntN(20)) * time.Second),
			status: statuses[r.IntN(len(statuses))],
		}
		h.released = h.status == handeling.Fout && r.IntN(2) == 0
		for _, p := range r.Perm(12)[:r.IntN(4)] {
			h.personen = append(h.personen, int64(p+1))
		}
		hs = append(hs, h)
	}
	return hs
}

// blockingModel is the rule: each blocked person with its oldest (tsreg, id) blocking
// handeling.
func blockingModel(hs []randomHandeling, strict bool) map[int64]randomHandeling {
	sorted := slices.SortedFunc(slices.Values(hs), func(a, b randomHandeling) int {
		return cmp.Or(a.tsreg.Compare(b.tsreg), cmp.Compare(a.id, b.id))
	})
	out := map[int64]randomHandeling{}
	for _, h := range sorted {
		if h.status != handeling.InLevering && (!strict || h.status != handeling.Fout || h.released) {
			continue
		}
		for _, p := range h.personen {
			if _, ok := out[p]; !ok {
				out[p] = h
			}
		}
	}
	return out
}

// waitingPersons are the persons with a handeling still to be delivered.
func waitingPersons(hs []randomHandeling, excluded []string) map[int64]bool {
	out := map[int64]bool{}
	for _, h := range hs {
		if h.toDeliver(excluded) {
			for _, p := range h.personen {
				out[p] = true
			}
		}
	}
	return out
}
