package publicatie

import (
	"cmp"
	"context"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/lib/pq"

	"github.com/brp/levering/handeling"
	"github.com/brp/levering/internal/brptest"
	"github.com/brp/levering/internal/load"
)

// drain runs rounds, delivering what each published, until one publishes nothing, and returns
// every handeling published.
func (e *roundEnv) drain() []int64 {
	e.t.Helper()
	var all []int64
	for range 50 {
		ids := e.round()
		if len(ids) == 0 {
			return all
		}
		all = append(all, ids...)
		e.setStatus("geleverd", ids...)
	}
	e.t.Fatal("rounds keep publishing")
	return nil
}

// teLeveren returns the ids still to be delivered (soort not excluded), ascending, by the
// contract's definition (on the kern layout through the test views, where status 2 shows as
// NULL with the soort GBA_INITIELE_VULLING).
func (e *roundEnv) teLeveren() []int64 {
	e.t.Helper()
	var ids []int64
	if err := e.db.Select(&ids, `select id from admhnd where statuslev is null and soort <> all($1) order by id`,
		pq.Array(handeling.DefaultExcluded())); err != nil {
		e.t.Fatal(err)
	}
	return ids
}

// held reads handeling.ReadHeld under the default exclusion.
func (e *roundEnv) held(strict bool) handeling.Held {
	e.t.Helper()
	h, err := handeling.ReadHeld(context.Background(), e.db, brptest.Layout(), handeling.DefaultExcluded(), strict)
	if err != nil {
		e.t.Fatal(err)
	}
	return h
}

// A fout of person A, then a handeling of A and B, then 100 of B: 101 held, and the publisher,
// left to run until it publishes nothing more, published none of them (and the others).
func TestHeldBehindFoutIsWhatThePublisherHoldsBack(t *testing.T) {
	t.Parallel()
	const a, b, other = 1, 2, 3
	e := newRoundEnv(t, Config{})
	hs := []load.Handeling{h(1, 1, a), h(2, 2, a, b)}
	for i := range int64(100) {
		hs = append(hs, h(10+i, 10+int(i), b))
	}
	hs = append(hs, h(500, 0, other), h(501, 5, other))
	e.insert(hs...)
	e.setStatus("fout", 1)
	if got := e.held(true); got != (handeling.Held{Handelingen: 101, Personen: 2}) {
		t.Fatalf("held %+v, want 101 handelingen of 2 persons", got)
	}
	published := e.drain()
	slices.Sort(published)
	wantIDs(t, "the rounds", published, 500, 501)
	left := e.teLeveren()
	if len(left) != 101 || left[0] != 2 || e.held(true).Handelingen != int64(len(left)) {
		t.Fatalf("left to be delivered %v, held %+v: want the 101 held", left, e.held(true))
	}
	if got := e.held(false); got != (handeling.Held{}) {
		t.Fatalf("under the skip policy: held %+v, want none", got)
	}
}

// Through a chain of multi-person handelingen, with an earlier handeling of the fout's person
// (the publisher blocks persons, not places), a released fout, an excluded soort (it holds
// nobody) and a person's handeling before the one that holds it: what is held is exactly what
// the publisher leaves.
func TestHeldThroughAChainIsWhatThePublisherHoldsBack(t *testing.T) {
	t.Parallel()
	const a, b, c, d, x = 1, 2, 3, 4, 5
	e := newRoundEnv(t, Config{})
	excl := h(7, 7, a, x)
	excl.Soort = handeling.InitieleVulling
	e.insert(
		h(1, 10, a), // the fout
		h(2, 5, a),  // before it, of its person: held
		h(3, 20, a, b),
		h(4, 21, b), h(5, 22, b), h(6, 23, b),
		excl,        // excluded: holds nobody
		h(8, 30, x), // not held
		h(9, 15, c), // before (b, c): not held
		h(10, 40, b, c),
		h(11, 41, c), h(12, 42, c),
		h(13, 1, d), // a released fout
		h(14, 50, d),
	)
	e.setStatus("fout", 1, 13)
	e.db.MustExec(`update admhnd set vrijgegeven = now() where id = 13`)
	want := []int64{2, 3, 4, 5, 6, 10, 11, 12}
	if got := e.held(true); got != (handeling.Held{Handelingen: int64(len(want)), Personen: 3}) {
		t.Fatalf("held %+v, want %d handelingen of 3 persons", got, len(want))
	}
	published := e.drain()
	slices.Sort(published)
	wantIDs(t, "the rounds", published, 8, 9, 14)
	wantIDs(t, "left to be delivered", e.teLeveren(), want...)
}

// On random states, ReadHeld counts what the rule counts, walked in delivery order: a
// handeling still to be delivered (soort not excluded) is held when one of its persons is of an
// unreleased fout handeling or of a handeling held before it.
func TestHeldMatchesTheRule(t *testing.T) {
	t.Parallel()
	db, _ := brptest.DB(t)
	ctx := context.Background()
	for seed := range uint64(60) {
		r := rand.New(rand.NewPCG(seed, 34))
		hs := randomState(r)
		brptest.ClearHandelingen(t, db)
		for _, h := range hs {
			if _, err := db.ExecContext(ctx, `
				insert into admhnd (id, soort, tsreg, statuslev, vrijgegeven) values ($1, $2, $3, $4, case when $5 then now() end)`,
				h.id, h.soort, h.tsreg, h.status, h.released); err != nil {
				t.Fatal(err)
			}
			if _, err := db.ExecContext(ctx, `insert into admhnd_persoon (admhnd_id, persoon_id) select $1, unnest($2::bigint[])`,
				h.id, pq.Array(h.personen)); err != nil {
				t.Fatal(err)
			}
		}
		for _, excluded := range [][]string{handeling.DefaultExcluded(), {"ANDERE_SOORT", handeling.InitieleVulling}, {}} {
			for _, strict := range []bool{true, false} {
				got, err := handeling.ReadHeld(ctx, db, brptest.Layout(), excluded, strict)
				if err != nil {
					t.Fatal(err)
				}
				if want := heldRule(hs, excluded, strict); got != want {
					t.Fatalf("seed %d, excluded %v, strict %v: held %+v, the rule %+v\nstate: %v", seed, excluded, strict, got, want, hs)
				}
			}
		}
	}
}

// heldRule is ReadHeld written out.
func heldRule(hs []randomHandeling, excluded []string, strict bool) handeling.Held {
	var held handeling.Held
	if !strict {
		return held
	}
	blocked, persons := map[int64]bool{}, map[int64]bool{}
	for _, h := range hs {
		if h.status == handeling.Fout && !h.released {
			for _, p := range h.personen {
				blocked[p] = true
			}
		}
	}
	sorted := slices.SortedFunc(slices.Values(hs), func(a, b randomHandeling) int {
		return cmp.Or(a.tsreg.Compare(b.tsreg), cmp.Compare(a.id, b.id))
	})
	for _, h := range sorted {
		if !h.toDeliver(excluded) || !slices.ContainsFunc(h.personen, func(p int64) bool { return blocked[p] }) {
			continue
		}
		held.Handelingen++
		for _, p := range h.personen {
			blocked[p], persons[p] = true, true
		}
	}
	held.Personen = int64(len(persons))
	return held
}
