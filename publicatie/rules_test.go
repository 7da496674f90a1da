package publicatie

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/brp/levering/handeling"
	"github.com/brp/levering/internal/setting"
)

// ms are leads of n milliseconds each.
func ms(n ...int) []time.Duration {
	var out []time.Duration
	for _, x := range n {
		out = append(out, time.Duration(x)*time.Millisecond)
	}
	return out
}

// The margin follows the leads of leadWindow (leadMargin): raised on leadMinLate late ones to
// the highest lead seen plus its cushion, lowered on leadMinObservations, never above MaxLead.
func TestLeadMargin(t *testing.T) {
	t.Parallel()
	times := func(n, x int) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = x
		}
		return out
	}
	now := time.Now()
	from := func(source string, ds []time.Duration) []leadObs {
		var out []leadObs
		for _, d := range ds {
			out = append(out, leadObs{d, source})
		}
		return out
	}
	at := func(ago time.Duration, late, samples []time.Duration) leadSeen {
		return newLeadSeen(now.Add(-ago), from("", late), from("", samples))
	}
	// sampled is what a round saw of sources: their sampled leads.
	sampled := func(ago time.Duration, sources map[string][]time.Duration) leadSeen {
		var samples []leadObs
		for src, ds := range sources {
			samples = append(samples, from(src, ds)...)
		}
		return newLeadSeen(now.Add(-ago), nil, samples)
	}
	taking := func(n int, s leadSeen) leadSeen { s.taken = n; return s }
	for _, tc := range []struct {
		name   string
		seen   []leadSeen
		margin time.Duration
		want   time.Duration
		cover  float64 // Config.LeadCover; 0: 1, every lead covered
	}{
		{"nothing seen: as it is", nil, 40 * time.Millisecond, 40 * time.Millisecond, 0},
		{"three late ones raise it from zero", []leadSeen{at(0, ms(1, 1, 1), nil)}, 0, 6 * time.Millisecond, 0},
		{"two late ones do not", []leadSeen{at(0, ms(100, 100), ms(times(30, 1)...))}, 6 * time.Millisecond, 6 * time.Millisecond, 0},
		{"a straggler does not", []leadSeen{at(time.Second, ms(200), ms(times(99, 1)...))}, 6 * time.Millisecond, 6 * time.Millisecond, 0},
		{"three late ones raise it to the highest, with a tenth more",
			[]leadSeen{at(0, ms(200, 300, 150), ms(times(97, 1)...))}, 6 * time.Millisecond, 325 * time.Millisecond, 0},
		{"cover 1: a busy host's stragglers raise it to the highest",
			[]leadSeen{taking(2500, at(0, ms(50, 80, 340, 90, 60), ms(times(250, 2)...)))}, 7 * time.Millisecond, 365 * time.Millisecond, 0},
		{"cover 0.99: of a hundred registrations, the one with the highest lead is left out",
			[]leadSeen{at(0, ms(200, 300, 150), ms(times(97, 1)...))}, 6 * time.Millisecond, 220 * time.Millisecond, 0.99},
		{"cover 0.99: a busy host's stragglers, fewer than one in a hundred of what was taken in, do not raise it",
			[]leadSeen{taking(2500, at(0, ms(50, 80, 120, 200, 340, 90, 60, 150, 70, 110, 300, 55, 65, 75, 85, 95, 105, 115, 125, 135), ms(times(250, 2)...)))},
			7 * time.Millisecond, 7 * time.Millisecond, 0.99},
		{"cover 0.99: more than one in a hundred raise it to the lead the others stayed within",
			[]leadSeen{taking(1000, at(0, ms(append(times(10, 300), times(5, 100)...)...), ms(times(100, 2)...)))}, 7 * time.Millisecond, 110 * time.Millisecond, 0.99},
		{"cover 0.99: an application server 0.5 s behind, one in twenty registrations, raises it",
			[]leadSeen{taking(2500, at(0, ms(times(125, 500)...), ms(times(250, 2)...)))}, 7 * time.Millisecond, 525 * time.Millisecond, 0.99},
		{"cover 0.99: a covered lead within the margin does not raise it for its cushion",
			[]leadSeen{taking(2500, at(0, ms(append(times(20, 60), times(20, 47)...)...), ms(times(250, 2)...)))}, 51 * time.Millisecond, 51 * time.Millisecond, 0.99},
		{"cover 0.99: a covered lead beyond the margin raises it, with its cushion",
			[]leadSeen{taking(2500, at(0, ms(append(times(20, 60), times(20, 53)...)...), ms(times(250, 2)...)))}, 51 * time.Millisecond, 58300 * time.Microsecond, 0.99},
		{"cover 0.99: the busy host's stragglers do not hold a raised margin up",
			[]leadSeen{taking(2500, at(0, ms(340, 300, 200), ms(times(250, 2)...)))}, 340 * time.Millisecond, 7 * time.Millisecond, 0.99},
		{"the cushion is at most 25 ms: half the registrations 1.5 s behind",
			[]leadSeen{at(0, ms(times(50, 1500)...), ms(times(50, 1)...))}, 6 * time.Millisecond, 1525 * time.Millisecond, 0},
		{"never above MaxLead", []leadSeen{at(0, ms(5000, 5000, 5000), nil)}, 0, DefaultMaxLead, 0},
		{"a clock steadily 0.5 s behind keeps the margin it learned",
			[]leadSeen{at(2*time.Second, nil, ms(times(10, 500)...)), at(0, nil, ms(append(times(30, 1), 510, 505)...))}, 555 * time.Millisecond, 555 * time.Millisecond, 0},
		{"the leads fell: lowered on twenty",
			[]leadSeen{at(8*time.Second, ms(times(50, 1500)...), nil), at(0, nil, ms(times(20, 1)...))}, 1525 * time.Millisecond, 6 * time.Millisecond, 0},
		{"fewer than twenty: kept",
			[]leadSeen{at(8*time.Second, ms(times(50, 1500)...), nil), at(0, nil, ms(times(10, 1)...))}, 1525 * time.Millisecond, 1525 * time.Millisecond, 0},
		{"few come: looks back past the window, up to what it keeps",
			[]leadSeen{at(30*time.Second, nil, ms(times(15, 2)...)), at(0, nil, ms(times(10, 2)...))}, 900 * time.Millisecond, 7 * time.Millisecond, 0},
		{"a small fall is not worth a change", []leadSeen{at(0, nil, ms(times(30, 3)...))}, 9 * time.Millisecond, 9 * time.Millisecond, 0},
		{"a server 0.5 s behind that registers seldom keeps its margin after the window",
			[]leadSeen{sampled(30*time.Second, map[string][]time.Duration{"b": ms(500, 510, 530)}), sampled(0, map[string][]time.Duration{"a": ms(times(30, 1)...)})},
			555 * time.Millisecond, 555 * time.Millisecond, 0},
		{"its floor goes a minute after its last registration",
			[]leadSeen{sampled(61*time.Second, map[string][]time.Duration{"b": ms(500, 510, 530)}), sampled(0, map[string][]time.Duration{"a": ms(times(30, 1)...)})},
			555 * time.Millisecond, 6 * time.Millisecond, 0},
		{"two leads of a source set no floor: a new source's straggler does not hold the margin",
			[]leadSeen{sampled(30*time.Second, map[string][]time.Duration{"b": ms(500, 510)}), sampled(0, map[string][]time.Duration{"a": ms(times(30, 1)...)})},
			555 * time.Millisecond, 6 * time.Millisecond, 0},
		{"the highest floor plus the highest wait over a floor: the server behind may wait as long as the others did",
			[]leadSeen{sampled(30*time.Second, map[string][]time.Duration{"b": ms(500, 510, 530)}),
				newLeadSeen(now, from("a", ms(561, 571, 591)), from("a", ms(times(30, 1)...)))},
			555 * time.Millisecond, 1115 * time.Millisecond, 0},
		{"waits over the floor of their own source: the server behind's waits are no more than the others'",
			[]leadSeen{sampled(30*time.Second, map[string][]time.Duration{"b": ms(500, 510, 530)}),
				newLeadSeen(now, from("b", ms(561, 571, 591)), from("a", ms(times(30, 1)...)))},
			555 * time.Millisecond, 616 * time.Millisecond, 0},
		{"a busy host's stragglers do not raise its floor: lowered as before",
			[]leadSeen{sampled(8*time.Second, map[string][]time.Duration{"a": ms(300, 250, 400)}), sampled(0, map[string][]time.Duration{"a": ms(times(30, 2)...)})},
			425 * time.Millisecond, 7 * time.Millisecond, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, _, _ := leadMargin(tc.seen, leadFloors(tc.seen, now), now, tc.margin, DefaultMaxLead, cmp.Or(tc.cover, 1)); got != tc.want {
				t.Fatalf("margin %v, want %v", got, tc.want)
			}
		})
	}
}

// coveredLead is leadCover's covered lead of late and samples (not both empty).
func coveredLead(late, samples []time.Duration, taken int, uncovered float64) time.Duration {
	c := newLeadCover(taken, len(late), len(samples), uncovered)
	for _, d := range late {
		c.add(d, false)
	}
	for _, d := range samples {
		c.add(d, true)
	}
	return c.lead()
}

// leadCover leaves out the leads of the share uncovered of the registrations with the highest
// ones, a sample weighing for the registrations it stands for.
func TestCoveredLead(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name          string
		late, samples []time.Duration
		taken         int
		uncovered     float64
		want          time.Duration
	}{
		{"nothing left out: the highest, late or sampled", ms(30, 90), ms(5, 120), 0, 0, 120 * time.Millisecond},
		{"fewer than a hundred registrations: the highest", ms(300), ms(1, 2, 3), 0, 0.01, 300 * time.Millisecond},
		{"the one in a hundred with the highest lead left out", ms(300, 40), ms(1, 1, 1, 1, 1, 1, 1, 1, 1, 1), 100, 0.01, 40 * time.Millisecond},
		{"a sample stands for ten: the highest sample is one in ten, and covered", ms(300), ms(50, 1, 1, 1, 1, 1, 1, 1, 1, 1), 100, 0.01, 50 * time.Millisecond},
		{"at a tenth left out, the highest sample's ten registrations are too", ms(300), ms(50, 1, 1, 1, 1, 1, 1, 1, 1, 1), 100, 0.11, time.Millisecond},
		{"taken counts what was not sampled: two late of a thousand are left out", ms(400, 300), ms(2, 2, 2, 2), 1000, 0.01, 2 * time.Millisecond},
		{"everything above the share: the lowest lead", ms(400, 300, 200), nil, 3, 0.9, 200 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := coveredLead(tc.late, tc.samples, tc.taken, tc.uncovered); got != tc.want {
				t.Fatalf("coveredLead %v, want %v", got, tc.want)
			}
		})
	}
}

// leadCover (one pass, a heap of the highest leads) agrees with its definition: sort the
// leads, highest first, and take the first at which their weight exceeds the share uncovered.
func TestCoveredLeadIsTheSortedOnes(t *testing.T) {
	t.Parallel()
	sorted := func(late, samples []time.Duration, taken int, uncovered float64) time.Duration {
		weight := 1.0
		if len(samples) > 0 {
			weight = max(1, float64(taken-len(late))/float64(len(samples)))
		}
		type lead struct {
			d      time.Duration
			sample bool
		}
		var all []lead
		for _, d := range late {
			all = append(all, lead{d, false})
		}
		for _, d := range samples {
			all = append(all, lead{d, true})
		}
		slices.SortFunc(all, func(a, b lead) int { return cmp.Compare(b.d, a.d) })
		allowed := uncovered * max(float64(taken), float64(len(late))+weight*float64(len(samples)))
		nLate, nSamples := 0, 0 // the weight above, counted: a float sum's order would decide ties
		for _, l := range all {
			if l.sample {
				nSamples++
			} else {
				nLate++
			}
			if float64(nLate)+weight*float64(nSamples) > allowed {
				return l.d
			}
		}
		return all[len(all)-1].d
	}
	r := rand.New(rand.NewPCG(51, 99))
	leads := func(n int) []time.Duration {
		out := make([]time.Duration, n)
		for i := range out {
			out[i] = time.Duration(r.IntN(400)-20) * time.Millisecond // a few below the floor, many alike
		}
		return out
	}
	for i := range 2000 {
		late, samples := leads(r.IntN(30)), leads(r.IntN(300))
		if len(late)+len(samples) == 0 {
			continue
		}
		taken := len(late) + r.IntN(5000)
		uncovered := []float64{0, 0.001, 0.01, 0.05, 0.5}[r.IntN(5)]
		if got, want := coveredLead(late, samples, taken, uncovered), sorted(late, samples, taken, uncovered); got != want {
			t.Fatalf("case %d (%d late, %d samples, %d taken, %g uncovered): %v, want %v", i, len(late), len(samples), taken, uncovered, got, want)
		}
	}
}

// The sample rate asks for about leadSamplesPerSecond samples a second of what comes in.
func TestSampleRate(t *testing.T) {
	t.Parallel()
	now := time.Now()
	for _, tc := range []struct {
		taken int
		want  float64
	}{{0, 1}, {100, 1}, {250, 1}, {2500, 0.1}, {10_000, 0.025}, {100_000_000, 0.001}} {
		seen := []leadSeen{{at: now, taken: tc.taken}, {at: now.Add(-time.Minute), taken: 1_000_000}} // the old one is outside the window
		if got := sampleRate(seen, now); got != tc.want {
			t.Errorf("%d taken in over %v: rate %v, want %v", tc.taken, leadWindow, got, tc.want)
		}
	}
}

// The round's window walks past the ready handelingen of blocked persons without counting them
// (issue 39): behind any number of those, the free ones are found.
func TestReadyCandidatesWalkPastTheBlocked(t *testing.T) {
	t.Parallel()
	var cs []Candidate
	blocked := map[int64]struct{}{}
	for i := range int64(2000) {
		cs = append(cs, Candidate{ID: i + 1, Personen: []int64{i + 1}})
		blocked[i+1] = struct{}{}
	}
	cs = append(cs, Candidate{ID: 5000, Personen: []int64{5000}}, Candidate{ID: 5001, Personen: []int64{5001, 7}}, Candidate{ID: 5002, Personen: []int64{5002}})
	v := viewOf(cs...)
	for _, tc := range []struct {
		n    int
		want []int64
	}{{1, []int64{5000}}, {2, []int64{5000, 5002}}, {10, []int64{5000, 5002}}} {
		if got := ids(v.readyCandidates(tc.n, blocked)); !slices.Equal(got, tc.want) {
			t.Errorf("window of %d: %v, want %v", tc.n, got, tc.want)
		}
	}
	if got := len(v.readyCandidates(window(10), nil)); got != window(10) {
		t.Errorf("nothing blocked: a window of %d holds %d", window(10), got)
	}
}

// A round's groups are bundled into publications of whole groups, oldest first, up to
// GroupSize handelingen and GroupBytes; a larger group travels alone.
func TestBundler(t *testing.T) {
	t.Parallel()
	g := func(ids ...int64) []Candidate {
		var out []Candidate
		for _, id := range ids {
			out = append(out, Candidate{ID: id, Personen: []int64{id}})
		}
		return out
	}
	for _, tc := range []struct {
		name        string
		groups      [][]Candidate
		size, bytes int
		want        [][]int64
	}{
		{"one publication", [][]Candidate{g(1), g(2, 3), g(4)}, 100, DefaultGroupBytes, [][]int64{{1, 2, 3, 4}}},
		{"cut at the size, whole groups", [][]Candidate{g(1), g(2, 3), g(4)}, 2, DefaultGroupBytes, [][]int64{{1}, {2, 3}, {4}}},
		{"a group larger than the size travels alone", [][]Candidate{g(1, 2, 3), g(4)}, 2, DefaultGroupBytes, [][]int64{{1, 2, 3}, {4}}},
		{"cut at the bytes", [][]Candidate{g(1), g(2), g(3)}, 100, 2 * memberBytes(g(1)[0]), [][]int64{{1, 2}, {3}}},
		{"empty groups add nothing", [][]Candidate{nil, g(1), nil}, 100, DefaultGroupBytes, [][]int64{{1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bundler
			for _, gr := range tc.groups {
				b.add(gr, tc.size, tc.bytes)
			}
			var got [][]int64
			for _, p := range b.pubs {
				got = append(got, ids(p))
			}
			if !slices.EqualFunc(got, tc.want, slices.Equal) {
				t.Fatalf("publications %v, want %v", got, tc.want)
			}
		})
	}
}

// Config.Validate names the field of every bad value, and the defaults pass.
func TestConfigBounds(t *testing.T) {
	t.Parallel()
	if err := (Config{}).Validate(); err != nil {
		t.Fatalf("the defaults: %v", err)
	}
	d := Config{}.WithDefaults()
	if d.MaxWait != DefaultMaxWait || d.MaxLead != DefaultMaxLead || d.LeadCover != DefaultLeadCover || d.GroupSize != DefaultGroupSize || d.LeaseTimeout != MinLeaseTimeout ||
		d.Limit != 5000 || d.MaxInLevering != 1000 || d.FoutPolicy != handeling.Strict || !handeling.IsDefaultExcluded(d.Excluded) {
		t.Fatalf("defaults %+v", d)
	}
	for _, tc := range []struct {
		field string
		cfg   Config
	}{
		{"Delay", Config{Delay: -time.Second}},
		{"Limit", Config{Limit: -1}},
		{"ViewSize", Config{ViewSize: -1}},
		{"ViewBytes", Config{ViewBytes: -1}},
		{"PersonCap", Config{PersonCap: -1}},
		{"MaxInLevering", Config{MaxInLevering: -1}},
		{"GroupSize", Config{GroupSize: -1}},
		{"GroupBytes", Config{GroupBytes: -1}},
		{"MaxLead", Config{MaxLead: -time.Millisecond}},
		{"LeadCover", Config{LeadCover: 0.4}},
		{"LeadCover", Config{LeadCover: 1.01}},
		{"MaxWait", Config{MaxWait: LateWriterGrace - time.Millisecond}},
		{"RedeliveryTimeout", Config{RedeliveryTimeout: -time.Second}},
		{"FoutPolicy", Config{FoutPolicy: "lenient"}},
		{"Cluster", Config{Cluster: string(make([]byte, maxCluster+1))}},
		{"LeaseTimeout", Config{LeaseTimeout: MinLeaseTimeout - time.Second}},
	} {
		t.Run(tc.field, func(t *testing.T) {
			err := tc.cfg.Validate()
			var se *setting.Error
			if !errors.Is(err, ErrConfig) || !errors.As(err, &se) || se.Field != tc.field {
				t.Fatalf("Validate: %v, want an error naming %s", err, tc.field)
			}
		})
	}
}

// The floors a round uses (leadSources, recomputed once a second) are those of the leads seen,
// but for a floor that expired within the last second.
func TestLeadSourcesFollowTheLeadsSeen(t *testing.T) {
	t.Parallel()
	start := time.Now()
	var seen []leadSeen
	var cache leadSources
	for i := range 800 { // a round every 100 ms for 80 s
		now := start.Add(time.Duration(i) * 100 * time.Millisecond)
		var samples []leadObs
		if i%3 == 0 {
			samples = append(samples, leadObs{time.Duration(1+i%7) * time.Millisecond, "a"})
		}
		if i < 200 && i%50 == 0 { // b registers every 5 s for 20 s, its lead falling
			samples = append(samples, leadObs{time.Duration(600-i) * time.Millisecond, "b"})
		}
		seen = append(seen, newLeadSeen(now, nil, samples))
		got, want := cache.floors(seen, now), leadFloors(seen, now)
		for src, f := range want {
			if got[src] != f {
				t.Fatalf("round %d: source %s's floor %v, want %v", i, src, got[src], f)
			}
		}
		for src, f := range got {
			if _, ok := want[src]; !ok && leadFloors(seen, now.Add(-time.Second))[src] != f {
				t.Fatalf("round %d: source %s has floor %v, which expired more than a second ago", i, src, f)
			}
		}
		if i == 150 && want["b"] != 450*time.Millisecond {
			t.Fatalf("b's floor %v after its fourth registration, want 450ms", want["b"])
		}
		if i == 799 && got["b"] != 0 {
			t.Fatalf("b's floor %v a minute after its last registration", got["b"])
		}
	}
}

// BenchmarkLeadMargin is a round's margin rule over 5 s of rounds 10 ms apart, each with five
// leads of an application server 0.5 s behind (all of them recorded: 2,500 leads), at cover 1
// and 0.99 (docs/performance.md, "The default: LEADCOVER 0.99").
func BenchmarkLeadMargin(b *testing.B) {
	now := time.Now()
	var seen []leadSeen
	for i := range 500 {
		var obs []leadObs
		for j := range 5 {
			obs = append(obs, leadObs{time.Duration(500+(i*7+j*13)%40) * time.Millisecond, "b"})
		}
		s := newLeadSeen(now.Add(-time.Duration(500-i)*10*time.Millisecond), nil, obs)
		s.taken = len(obs)
		seen = append(seen, s)
	}
	floors := leadFloors(seen, now)
	for _, cover := range []float64{1, 0.99} {
		b.Run(fmt.Sprintf("cover=%g", cover), func(b *testing.B) {
			for b.Loop() {
				leadMargin(seen, floors, now, 540*time.Millisecond, DefaultMaxLead, cover)
			}
		})
	}
}
