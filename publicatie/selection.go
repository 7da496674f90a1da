package publicatie

// Candidate is a handeling that is still to be delivered, with its bijgehouden personen.
type Candidate struct {
	ID       int64
	Personen []int64
}

// Select walks candidates oldest first and returns, in that order, at most budget of them that
// may be published now: a handeling is kept only if none of its persons is blocked. Every
// candidate walked, kept or not, blocks its persons for the candidates after it, so a skipped
// multi-person handeling holds back all of its persons. The kept ones are the heads of the
// round's publications; view.groups adds to each the later handelingen that travel with it. blocked holds the persons blocked before the walk (in levering, or
// fout under the strict policy); Select adds to it.
//
// The round gives it the view's ready handelingen, which never share a person, so only the
// blocked persons and the budget hold any back. Over every open handeling it is the reference
// model of publicatie/reference_test.go.
func Select(candidates []Candidate, blocked map[int64]struct{}, budget int) []Candidate {
	var keep []Candidate
	for _, c := range candidates {
		if len(keep) >= budget {
			break
		}
		free := true
		for _, p := range c.Personen {
			if _, ok := blocked[p]; ok {
				free = false
				break
			}
		}
		for _, p := range c.Personen {
			blocked[p] = struct{}{}
		}
		if free {
			keep = append(keep, c)
		}
	}
	return keep
}
