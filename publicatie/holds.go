package publicatie

import (
	"cmp"
	"slices"
)

// holds is the leader's knowledge of the unreleased fout handelingen under the strict policy:
// the persons of each, and for each person how many of them hold it back. A view reads them
// all once when it is built (readHolds), then in every round only what changed
// (readFoutChanges: publicatie_fout_changes, filled by migration 0014's triggers), so that a
// round's cost does not grow with the number of fout handelingen. The sweep compares it with
// the database (readHoldsChecksum) and builds the view again when they disagree.
//
// Its memory grows with the unreleased fout handelingen (about 100 bytes each and per person)
// and is not counted in ViewBytes: it is what the view needs to leave their persons' work out
// of its room (view.hold).
type holds struct {
	fout    map[int64][]int64 // unreleased fout handeling -> its persons
	persons map[int64]heldPerson
	xor     int64 // of the ids in fout
}

// heldPerson is a person of an unreleased fout handeling.
type heldPerson struct {
	fout int32 // unreleased fout handelingen of this person
	// parked is the view's generation (view.generation) in which handelingen of this person
	// were left out of the view (view.hold); another value: none were.
	parked uint32
}

func newHolds() *holds {
	return &holds{fout: map[int64][]int64{}, persons: map[int64]heldPerson{}}
}

// foutState is one handeling's fout state as the database has it: held says it is an
// unreleased fout handeling, with these persons.
type foutState struct {
	id       int64
	held     bool
	personen []int64
}

// isHeld says whether p is a person of an unreleased fout handeling.
func (h *holds) isHeld(p int64) bool {
	if h == nil {
		return false
	}
	_, ok := h.persons[p]
	return ok
}

// release is a person no fout holds any more, with the view generation in which handelingen
// of it were parked (heldPerson.parked).
type release struct {
	persoon int64
	parked  uint32
}

// set records s, and returns the persons it made held (none of their fout handelingen was
// known before) and those it released (their last one left), both ordered by person.
func (h *holds) set(s foutState) (newlyHeld []int64, released []release) {
	old, known := h.fout[s.id]
	if !known && !s.held || known && s.held && slices.Equal(old, s.personen) {
		return nil, nil
	}
	delta := map[int64]int32{}
	if known {
		delete(h.fout, s.id)
		h.xor ^= s.id
		for _, p := range old {
			delta[p]--
		}
	}
	if s.held {
		h.fout[s.id] = s.personen
		h.xor ^= s.id
		for _, p := range s.personen {
			delta[p]++
		}
	}
	for p, d := range delta {
		hp, was := h.persons[p]
		hp.fout += d
		switch {
		case hp.fout > 0:
			h.persons[p] = hp
			if !was {
				newlyHeld = append(newlyHeld, p)
			}
		case was:
			delete(h.persons, p)
			released = append(released, release{persoon: p, parked: hp.parked})
		}
	}
	slices.Sort(newlyHeld)
	slices.SortFunc(released, func(a, b release) int { return cmp.Compare(a.persoon, b.persoon) })
	return newlyHeld, released
}
