package handeling_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lib/pq"

	"github.com/brp/levering/handeling"
	"github.com/brp/levering/internal/brptest"
)

// Each rule in Go (rules.go) says what its SQL function (migration 0013) says, on generated
// cases: every status, released or not, both policies, soorten in and out of three exclusion
// lists, and tsreg around both ends of the accepted range and in between. The functions run
// on the statuslev form of BRP_TEST_STATUSLEV (text or enum), or on kern's codes
// (BRP_TEST_LAYOUT=kern).
func TestRulesInGoAreTheSchemasFunctions(t *testing.T) {
	t.Parallel()
	db, _ := brptest.DB(t)
	ctx := context.Background()
	statuses := []handeling.Status{handeling.TeLeveren, handeling.InLevering, handeling.Geleverd, handeling.Fout}
	layout := brptest.Layout()
	initieel := layout.DefaultExcluded()[0]
	soorten := []string{"VERHUIZING", initieel, "ANDERE_SOORT"}
	exclusions := [][]string{layout.DefaultExcluded(), {}, {"ANDERE_SOORT", initieel}}
	// The contract's functions take admhnd's columns; kern's take its codes and soort ids.
	rules := `select publicatie_to_deliver($1, $2, $3), coalesce(publicatie_unreleased_fout($1, $4), false),
			publicatie_blocks($1, $4, $5)`
	if layout == handeling.Kern {
		rules = `select publicatie_to_deliver(publicatie_status_code($1), (select id from kern.srtadmhnd where naam = $2), publicatie_srt_ids($3)),
			coalesce(publicatie_unreleased_fout(publicatie_status_code($1), $4), false),
			publicatie_blocks(publicatie_status_code($1), $4, $5)`
	}
	r := rand.New(rand.NewPCG(41, 13))
	for range 400 {
		s := statuses[r.IntN(len(statuses))]
		released, strict := r.IntN(2) == 0, r.IntN(2) == 0
		soort, excluded := soorten[r.IntN(len(soorten))], exclusions[r.IntN(len(exclusions))]
		var vrijgegeven *time.Time
		if released {
			now := time.Now()
			vrijgegeven = &now
		}
		var toDeliver, unreleased bool
		var blocks *bool // NULL for a handeling still to be delivered
		if err := db.QueryRowContext(ctx, rules, s, soort, pq.Array(excluded), vrijgegeven, strict).Scan(&toDeliver, &unreleased, &blocks); err != nil {
			t.Fatal(err)
		}
		if toDeliver != handeling.ToDeliver(s, soort, excluded) || unreleased != handeling.UnreleasedFout(s, released) ||
			(blocks != nil && *blocks) != handeling.Blocks(s, released, strict) {
			t.Fatalf("status %q, released %v, strict %v, soort %s, excluded %v: SQL says to deliver %v, unreleased fout %v, blocks %v; Go %v, %v, %v",
				s, released, strict, soort, excluded, toDeliver, unreleased, blocks,
				handeling.ToDeliver(s, soort, excluded), handeling.UnreleasedFout(s, released), handeling.Blocks(s, released, strict))
		}
	}
	edges := []time.Time{handeling.TsregFrom, handeling.TsregUntil}
	var cases []time.Time
	for _, e := range edges {
		for _, d := range []time.Duration{-time.Hour, -time.Microsecond, 0, time.Microsecond, time.Hour} {
			cases = append(cases, e.Add(d))
		}
	}
	for range 200 {
		cases = append(cases, time.Date(1+r.IntN(9999), time.Month(1+r.IntN(12)), 1+r.IntN(28), r.IntN(24), 0, 0, r.IntN(1e9)/1000*1000, time.UTC))
	}
	for _, ts := range cases {
		var accepted bool
		if err := db.QueryRowContext(ctx, `select publicatie_tsreg_accepted($1)`, ts).Scan(&accepted); err != nil {
			t.Fatal(err)
		}
		if accepted != handeling.TsregAccepted(ts) {
			t.Fatalf("tsreg %v: SQL says accepted %v, Go %v", ts, accepted, handeling.TsregAccepted(ts))
		}
	}
	var from, until time.Time
	if err := db.QueryRowContext(ctx, `select publicatie_tsreg_from(), publicatie_tsreg_until()`).Scan(&from, &until); err != nil {
		t.Fatal(err)
	}
	if !from.Equal(handeling.TsregFrom) || !until.Equal(handeling.TsregUntil) {
		t.Fatalf("the schema's range [%v, %v), Go's [%v, %v)", from, until, handeling.TsregFrom, handeling.TsregUntil)
	}
	for _, inf := range []string{"-infinity", "infinity"} {
		var accepted bool
		if err := db.QueryRowContext(ctx, `select publicatie_tsreg_accepted($1::timestamptz)`, inf).Scan(&accepted); err != nil || accepted {
			t.Fatalf("tsreg %s accepted %v (%v)", inf, accepted, err)
		}
	}
}
