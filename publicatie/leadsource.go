package publicatie

import "time"

// The leads' sources: each application server (a session's client address and
// application_name) has a floor, the lowest lead it showed within leadMemory, which keeps a
// server whose clock is behind in the margin while it registers seldom (leadMargin).

// sourceLead is a source's lowest lead of some observations, and how many there were.
type sourceLead struct {
	source string
	lowest time.Duration
	n      int
}

// addLead adds n observations whose lowest lead is d to source's entry of lowest.
func addLead(lowest []sourceLead, source string, d time.Duration, n int) []sourceLead {
	for i := range lowest {
		if lowest[i].source == source {
			lowest[i].lowest = min(lowest[i].lowest, d)
			lowest[i].n += n
			return lowest
		}
	}
	return append(lowest, sourceLead{source, d, n})
}

// leadFloors is each source's floor: the lowest lead it showed in seen within leadMemory, of
// at least leadMinLate observations (one straggler of a new source sets none), never below 0
// (a clock ahead). A source's leads are its clock's offset plus its wait between reading the
// clock and BEGIN, so its lowest lead is its clock's offset; a straggler's wait does not move
// it.
func leadFloors(seen []leadSeen, now time.Time) map[string]time.Duration {
	return floorsOf(sourcesOf(seen, now))
}

// sourcesOf is each source's lowest lead in seen within leadMemory, and how many it showed.
func sourcesOf(seen []leadSeen, now time.Time) []sourceLead {
	var all []sourceLead
	for i := len(seen) - 1; i >= 0 && now.Sub(seen[i].at) <= leadMemory; i-- {
		for _, l := range seen[i].lowest {
			all = addLead(all, l.source, l.lowest, l.n)
		}
	}
	return all
}

func floorsOf(all []sourceLead) map[string]time.Duration {
	var floors map[string]time.Duration
	for _, l := range all {
		if l.n >= leadMinLate {
			if floors == nil {
				floors = map[string]time.Duration{}
			}
			floors[l.source] = max(0, l.lowest)
		}
	}
	return floors
}

// leadSources keeps leadFloors of the leads seen for the rounds: recomputed from them once a
// second, and merged with each round's newest in between, so that a round pays a few
// comparisons rather than a pass over a minute of rounds (94 µs at 6,000 of them). A floor
// outlives the leads that set it by at most that second.
type leadSources struct {
	all []sourceLead
	at  time.Time // of the last recomputation
}

// floors returns the floors of seen, whose newest entry this round appended.
func (s *leadSources) floors(seen []leadSeen, now time.Time) map[string]time.Duration {
	if now.Sub(s.at) >= time.Second {
		s.all, s.at = sourcesOf(seen, now), now
	} else if k := len(seen); k > 0 {
		for _, l := range seen[k-1].lowest {
			s.all = addLead(s.all, l.source, l.lowest, l.n)
		}
	}
	return floorsOf(s.all)
}
