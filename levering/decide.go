package levering

import (
	"slices"

	"github.com/brp/levering/handeling"
)

type outcome int

const (
	delivered  outcome = iota // geleverd now, verzending sent
	duplicate                 // was already delivered (or fout); nothing sent
	markedFout                // a known error: statuslev fout
	unknown                   // no such handeling
	excluded                  // its soort is excluded from delivery: set aside, untouched
	heldBack                  // not delivered now (result.reason says why); the publisher publishes it again
)

// Why a handeling was held back: the label of brp_levering_held_back_total.
const (
	// reasonOlderOpen: an older handeling of one of its persons is still to be delivered (NULL,
	// in levering outside this batch, or fout and unreleased under the strict policy).
	reasonOlderOpen = "older_open"
	// reasonBehindFout: an older handeling of one of its persons in this batch ended fout.
	reasonBehindFout = "behind_fout"
	// reasonPersonsChanged: its persons in the database are not those its publication carried.
	reasonPersonsChanged = "persons_changed"
	// reasonNotInLevering: it is still to be delivered, not in levering: a publication of a
	// round whose database commit failed, or one the publisher did not send. Left untouched.
	reasonNotInLevering = "not_in_levering"
)

// heldBackReasons are every reason, so the counter shows each from the start.
var heldBackReasons = []string{reasonOlderOpen, reasonBehindFout, reasonPersonsChanged, reasonNotInLevering}

// result is what a batch's transaction did to one handeling.
type result struct {
	outcome
	reason  string // heldBack: why; markedFout: the foutreden
	blocker int64  // heldBack for reasonOlderOpen: the older handeling it waits for (0: one of the batch)
}

// decide says what becomes of each handeling of a batch (rows, as relate worked them out under
// the batch's row locks; carried, the persons its publications named): the order check. A
// handeling is delivered only when it is in levering, its persons are those its publications
// carried, no older handeling of its persons outside the batch must be delivered first
// (row.blocker), none newer is already geleverd (then it was overtaken, and ends fout; newer
// has holdNewer's view of those in levering), and no older one of the batch that shares a
// person with it is left undelivered (in (tsreg, id) order, each undelivered one holds its
// persons back for the rest). Unknown ids (no row) are unknown. It sorts rows in delivery
// order.
func decide(rows []row, carried map[int64][][]int64, newer map[int64]handeling.Status, excludedSoorten []string, strict bool) map[int64]result {
	res := make(map[int64]result, len(carried))
	for id := range carried {
		res[id] = result{outcome: unknown}
	}
	slices.SortFunc(rows, func(a, b row) int { return a.at.Compare(b.at) })
	held := holds{}
	for _, r := range rows {
		res[r.id] = decideOne(r, carried[r.id], newer, excludedSoorten, strict, held)
	}
	return res
}

// decideOne decides on r, after the handelingen of the batch before it in delivery order,
// which left in held the persons they hold back; it adds those r holds back.
func decideOne(r row, carried [][]int64, newer map[int64]handeling.Status, excludedSoorten []string, strict bool, held holds) result {
	switch {
	case slices.Contains(excludedSoorten, r.soort):
		// Nobody publishes an excluded soort: this publication was sent by hand, or by a
		// publisher configured otherwise. Delivering it would break the exclusion. It never
		// holds anyone back.
		return result{outcome: excluded}
	case r.status == handeling.Geleverd:
		return result{outcome: duplicate}
	case r.status == handeling.Fout:
		if handeling.Blocks(r.status, r.vrijgegeven, strict) {
			held.add(reasonBehindFout, r.personen)
		}
		return result{outcome: duplicate}
	case r.status != handeling.InLevering:
		held.add(reasonOlderOpen, r.personen)
		return result{outcome: heldBack, reason: reasonNotInLevering}
	case r.onderweg && len(r.personen) > 0 && r.tsreg.Valid:
		// A batch before sent it and did not commit (killed between the two commits): a copy
		// may be out. Delivered again whatever else holds, even persons added since (set back,
		// it would no longer count as out): a duplicate after that copy; the older handelingen
		// of its persons are overtaken.
		return result{outcome: delivered}
	case !carriedAre(carried, r.personen):
		held.add(reasonOlderOpen, append(slices.Concat(carried...), r.personen...))
		return result{outcome: heldBack, reason: reasonPersonsChanged}
	case len(r.personen) == 0:
		return result{outcome: markedFout, reason: handeling.FoutGeenPersonen}
	case !r.tsreg.Valid:
		held.add(reasonBehindFout, r.personen)
		return result{outcome: markedFout, reason: handeling.FoutTsreg}
	case r.overtaken || slices.ContainsFunc(r.newerInLevering, func(id int64) bool { return newer[id] == handeling.Geleverd }):
		// A newer handeling of one of its persons already reached afnemers (this one was
		// registered, or got its persons, late): delivered now, it would come after it.
		held.add(reasonBehindFout, r.personen)
		return result{outcome: markedFout, reason: handeling.FoutOvertaken}
	case held.of(r.personen) != "":
		why := held.of(r.personen)
		held.add(reasonOlderOpen, r.personen)
		return result{outcome: heldBack, reason: why}
	case r.blocker != 0:
		held.add(reasonOlderOpen, r.personen)
		return result{outcome: heldBack, reason: reasonOlderOpen, blocker: r.blocker}
	}
	return result{outcome: delivered}
}

// holds are the persons whose later handelingen of the batch wait, each with the reason of the
// first handeling that held it back.
type holds map[int64]string

// add holds back the persons of each list for reason, unless one holds them already.
func (h holds) add(reason string, persons ...[]int64) {
	for _, ps := range persons {
		for _, p := range ps {
			if _, ok := h[p]; !ok {
				h[p] = reason
			}
		}
	}
}

// of returns why the first of ps that is held is held, "" if none is.
func (h holds) of(ps []int64) string {
	for _, p := range ps {
		if why, ok := h[p]; ok {
			return why
		}
	}
	return ""
}

// carriedAre says whether every person list the publications carried for a handeling is the
// set personen (sorted, distinct), in whatever order or repetition it came.
func carriedAre(carried [][]int64, personen []int64) bool {
	for _, ps := range carried {
		ps = slices.Compact(slices.Sorted(slices.Values(ps)))
		if !slices.Equal(ps, personen) {
			return false
		}
	}
	return true
}
