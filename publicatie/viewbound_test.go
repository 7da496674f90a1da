package publicatie

import (
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/brp/levering/handeling"
	"github.com/brp/levering/internal/brptest"
	"github.com/brp/levering/internal/load"
)

// TestViewBoundedInBytes is issue 22's "2,000 handelingen of 500 persons each": the view took
// them all in (ViewSize counts handelingen, not persons). With ViewBytes it holds only what
// fits, at most one handeling more, and still publishes them oldest first as they are
// delivered.
//
// An eighth of issue 22's handelingen against an eighth of the default ViewBytes: still four
// times what fits, each of 500 persons, and 125,000 rows of admhnd_persoon instead of a
// million, which on the kern layout each went through the test views' triggers and made this
// the lane's costliest test (docs/performance.md, "The full lane").
// TestPublisherMemoryBoundedByViewBytes fills the default 32 MiB.
func TestViewBoundedInBytes(t *testing.T) {
	t.Parallel()
	const handelingen = 250
	e := newRoundEnv(t, Config{MaxInLevering: 1, ViewBytes: DefaultViewBytes / 8})
	fits := e.pub.cfg.ViewBytes / intakeCost(500)
	if 2*fits >= handelingen {
		t.Fatalf("%d handelingen of 500 persons are not more than twice the %d that %d bytes hold", handelingen, fits, e.pub.cfg.ViewBytes)
	}
	// A bed, as bijhouding registers (on the kern layout on the kern tables themselves: the
	// test views write a person at a time, 125,000 trigger calls there).
	hs := make([]load.Handeling, handelingen)
	now := time.Now()
	for g := range hs {
		hs[g] = load.Handeling{ID: int64(g + 1), Soort: "VERHUIZING", Tsreg: now.Add(time.Duration(g) * time.Microsecond)}
		for p := range 500 {
			hs[g].Personen = append(hs[g].Personen, int64(g*500+p+1))
		}
	}
	brptest.Bed(t, e.db, hs)
	bound := e.pub.cfg.ViewBytes + intakeCost(500)
	check := func(when string) {
		t.Helper()
		v := e.pub.work.view
		if v.bytes > bound {
			t.Fatalf("%s: the view takes %d bytes (%d handelingen), more than ViewBytes %d and one handeling", when, v.bytes, v.size(), e.pub.cfg.ViewBytes)
		}
	}
	for i := int64(1); i <= 5; i++ {
		wantIDs(t, "round", e.round(), i)
		check("after a round")
		for range 3 { // rounds that publish nothing take in what fits
			e.round()
			check("after a round without room in levering")
		}
		e.setStatus("geleverd", i)
	}
	v := e.pub.work.view
	t.Logf("view: %d handelingen, %d bytes estimated (bound %d)", v.size(), v.bytes, e.pub.cfg.ViewBytes)
	if v.size() < fits/5 || v.size() > 2*fits {
		t.Errorf("view holds %d of %d handelingen of 500 persons; want what %d bytes hold (about %d)", v.size(), handelingen, e.pub.cfg.ViewBytes, fits)
	}
	if got := testutil.ToFloat64(e.pub.m.viewBytes); int(got) != v.bytes {
		t.Errorf("publicatie_view_bytes = %v, want %d", got, v.bytes)
	}
}

// TestBlockedPersonDoesNotFillTheView is issue 22's "view full of one blocked person's work":
// under the strict policy a fout handeling holds its person back, and the person's later
// handelingen filled the view, so that nobody else's were taken in until an operator acted.
// With PersonCap the view holds only a few of them; the rest are parked, the others are
// published, and once the fout is released the person's handelingen come in order.
func TestBlockedPersonDoesNotFillTheView(t *testing.T) {
	t.Parallel()
	e := newRoundEnv(t, Config{ViewSize: 100, PersonCap: 10, Limit: 50, MaxInLevering: 1000, FoutPolicy: handeling.Strict})
	e.db.MustExec(`insert into admhnd (id, soort, tsreg)
		select g, 'VERHUIZING', $1::timestamptz + g * interval '1 ms' from generate_series(1, 500) g`, t0)
	e.setStatus("fout", 1)
	// Person 7 has 1 (fout) to 300; 301 to 500 are others', one of them shared with person 7.
	e.db.MustExec(`insert into admhnd_persoon (admhnd_id, persoon_id)
		select g, case when g <= 300 then 7 else 1000 + g end from generate_series(1, 500) g
		union all select 400, 7`)
	var published []int64
	for range 30 {
		published = append(published, e.round()...)
		if v := e.pub.work.view; v != nil && len(v.queues[7]) > 10 {
			t.Fatalf("the view holds %d handelingen of the blocked person, PersonCap is 10", len(v.queues[7]))
		}
	}
	var others []int64
	for id := int64(301); id <= 500; id++ {
		if id != 400 {
			others = append(others, id)
		}
	}
	slices.Sort(published)
	if !slices.Equal(published, others) {
		t.Fatalf("published %v; want everyone else's (301 to 500 but 400, which waits behind the blocked person)", published)
	}
	if n := testutil.ToFloat64(e.pub.m.viewParked); n == 0 {
		t.Errorf("publicatie_view_parked_handelingen = 0 while the blocked person's handelingen wait")
	}
	e.db.MustExec(`update admhnd set vrijgegeven = now() where id = 1`)
	e.setStatus("geleverd", others...)
	// Released: the person's handelingen one at a time, in order, 400 after 300.
	for want := int64(2); want <= 300; want++ {
		wantIDs(t, "after the release", e.round(), want)
		e.setStatus("geleverd", want)
	}
	wantIDs(t, "the shared one last", e.round(), 400)
	if n := testutil.ToFloat64(e.pub.m.viewRebuilds.WithLabelValues(rebuildPersonCap)); n == 0 {
		t.Errorf("no rewind to the parked handelingen counted")
	}
}
