package levering

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/lib/pq"

	"github.com/brp/levering/broker"
	"github.com/brp/levering/handeling"
	"github.com/brp/levering/internal/prepared"
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

// errBroker marks a failure of the broker connection (as opposed to the database).
var errBroker = errors.New("broker")

// errNewerInFlight says another consumer holds a newer handeling of a person of the batch in
// its transaction right now (holdNewer): the batch is tried again when that one has ended.
var errNewerInFlight = errors.New("a newer handeling of a person of the batch is being delivered by another consumer")

// Verzending is the body of a message on the verzending queue (docs/contract.md section 3).
type Verzending struct {
	ID       int64     `json:"id"`
	Soort    string    `json:"soort"`
	Tsreg    time.Time `json:"tsreg"`
	Tslev    time.Time `json:"tslev"`
	Personen []int64   `json:"personen"`
}

// lockSQL locks a batch's rows in id order, so that two workers holding copies of the same
// handelingen cannot deadlock. It is a statement of its own: a statement's snapshot is taken
// when it starts, and persons another transaction committed while this one waited for a row
// (the insert's foreign key, or migration 0011's trigger, holds the handeling's row) must be
// seen by the check that follows.
const lockSQL = `select id from admhnd where id = any($1) order by id for update`

// checkSQL reads, after lockSQL, what the consumer needs to decide on the handelingen of a
// batch ($1): each handeling's soort, place in delivery order (tsreg, an odd tsreg where the
// database sorts it), status, whether an operator released it and its persons (kind 'b'); and
// the other handelingen of those persons that may bear on them (kind 'h', one row per person
// and handeling): of a soort not excluded ($2), and still to be delivered,
// in levering, geleverd, or ($3: strict policy) fout and not released; of those only what can
// bear on a handeling of the batch: open ones older than the person's newest in the batch, all
// in levering, geleverd ones newer than the person's oldest in the batch (a person with 10,000
// handelingen, most of them delivered or waiting behind, sent all 10,000 for every batch, and
// compared them in Go with each of its handelingen in the batch). Go works out the rest
// (check): comparing there costs about half of what the aggregates and correlated subqueries
// did in SQL (47 against 86 µs a handeling, batches of 50). Each person's handelingen are read
// once (admhnd_persoon by persoon_id, then admhnd by id): the cost grows with the handelingen
// each person has, not with the table. The batch's own handelingen come back as 'h' rows too,
// and check leaves them out: a "<> all($1)" in the statement, evaluated against the array for
// every handeling of the person in the generic plan, cost 7-10 of a check's 20-30 ms for a
// person with 10,000 (EXPLAIN ANALYZE, 25 runs each).
//
// Every table is read by index probes, forced (lateral subqueries the planner cannot flatten,
// offset 0): the statement runs prepared, and a generic plan made while the tables were small
// read all of admhnd_persoon for every batch (measured: 2,086 sequential scans of it in a
// 20 s run at 500 registrations a second, three times the database CPU per handeling).
var checkSQL = `
		with b as (
			select a.* from unnest($1::bigint[]) as i(id) cross join lateral (
				select id, soort, tsreg, statuslev, vrijgegeven from admhnd where id = i.id offset 0) a
		), bp as (
			select b.id, x.persoon_id from b cross join lateral (
				select persoon_id from admhnd_persoon where admhnd_id = b.id offset 0) x
		), bk as (
			select bp.persoon_id, ` + orderSQL("b.tsreg") + ` as k, b.id from bp join b on b.id = bp.id
		), pp as (
			select lo.persoon_id, lo.k as lo_k, lo.id as lo_id, hi.k as hi_k, hi.id as hi_id
			from (select distinct on (persoon_id) persoon_id, k, id from bk order by persoon_id, k, id) lo
			join (select distinct on (persoon_id) persoon_id, k, id from bk order by persoon_id, k desc, id desc) hi
			  on hi.persoon_id = lo.persoon_id
		), h as (
			select pp.persoon_id, h.* from pp
			cross join lateral (select admhnd_id from admhnd_persoon where persoon_id = pp.persoon_id offset 0) op
			cross join lateral (
				select id, soort, tsreg, statuslev, vrijgegeven from admhnd where id = op.admhnd_id offset 0) h
			where h.soort <> all($2::text[])
			  and ((h.statuslev is null or ` + handeling.BlocksSQL("$3") + `) and (` + orderSQL("h.tsreg") + `, h.id) < (pp.hi_k, pp.hi_id)
			    or h.statuslev = ` + handeling.InLeveringSQL + `
			    or h.statuslev = ` + handeling.GeleverdSQL + ` and (` + orderSQL("h.tsreg") + `, h.id) > (pp.lo_k, pp.lo_id))
		)
		select 'b', b.id, b.soort, ` + placeSQL("b.tsreg") + `, b.statuslev::text, b.vrijgegeven is not null, coalesce(p.personen, '{}'),
			exists (select from levering_onderweg where admhnd_id = b.id)
		from b left join (
			select id, array_agg(distinct persoon_id order by persoon_id) as personen from bp group by id) p on p.id = b.id
		union all
		select 'h', h.id, '', ` + placeSQL("h.tsreg") + `, h.statuslev::text, h.vrijgegeven is not null, array[h.persoon_id],
			h.statuslev = ` + handeling.InLeveringSQL + ` and exists (select from levering_onderweg where admhnd_id = h.id)
		from h`

// orderSQL is the tsreg column col as a key that sorts as place.compare does: a tsreg outside
// the accepted range as its end of it (all below it alike, all above it alike).
func orderSQL(col string) string {
	return "least(greatest(" + col + ", '0001-01-01 00:00:00+00'), '9999-12-31 00:00:00+00')"
}

// placeSQL is the tsreg column col as checkSQL returns it: which end of the accepted range it
// lies beyond (-1, 1; 0 inside), and the tsreg if inside (lib/pq reads no infinity).
func placeSQL(col string) string {
	return "case when " + col + " < '0001-01-02 00:00:00+00' then -1 when " + col + " >= '9999-12-31 00:00:00+00' then 1 else 0 end, " +
		"case when " + handeling.TsregAcceptedOn(col) + " then " + col + " end"
}

// holdNewer takes a key share lock on the newer handelingen in levering that checkSQL found
// outside the batch (a publisher never has a person's handelingen in levering in two
// publications at once: this is a forged or misrouted publication, or persons bijhouding
// added late), without waiting, and returns the status of those it locked, as of now. One it
// could not lock another consumer is delivering right now, and may not have seen this
// batch's older handeling (persons committed meanwhile): the batch is tried again once that
// consumer is done (errNewerInFlight), which then holds its newer one back or has delivered
// it. One it locked no consumer can deliver until this transaction ends (their lockSQL waits
// for it), and then they see this batch's handeling delivered before theirs. One that is
// geleverd by now overtook it.
func (c *Consumer) holdNewer(ctx context.Context, q prepared.Tx, rows []row) (map[int64]handeling.Status, error) {
	var ids []int64
	for _, r := range rows {
		ids = append(ids, r.newerInLev...)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	slices.Sort(ids)
	rs, err := q.QueryContext(ctx, holdNewerSQL, pq.Array(slices.Compact(ids)))
	if err != nil {
		return nil, fmt.Errorf("lock newer: %w", err)
	}
	defer rs.Close()
	got := map[int64]handeling.Status{}
	for rs.Next() {
		var id int64
		var s handeling.Status
		if err := rs.Scan(&id, &s); err != nil {
			return nil, fmt.Errorf("lock newer: %w", err)
		}
		got[id] = s
	}
	return got, rs.Err()
}

const holdNewerSQL = `select id, statuslev::text from admhnd where id = any($1) order by id for key share skip locked`

// applySQL writes what the consumer decided, on rows it holds locked and read in levering
// (nothing else can change them, so no status is tested again: a test of statuslev here made
// the planner read every handeling in levering through their index for each batch): geleverd
// ($1, returning their tslev), fout with a reason ($2, $3), back to be delivered ($4: the
// update fires admhnd_teruggezet of migration 0007, so the publisher takes them back before
// anything newer of their persons), and ($5) older handelingen still to be delivered that held
// one back, recorded for the publisher, whose view may lack them (registered late); and it
// removes the levering_onderweg records of those now geleverd ($1, and $6: found geleverd
// already). Each status is assigned as a bare literal: bijhouding's statuslev may be an enum.
var applySQL = `
		with f as (
			update admhnd set statuslev = ` + handeling.FoutSQL + `, foutreden = ($3::text[])[array_position($2::bigint[], id)]
			where id = any($2)
			returning id
		), h as (
			update admhnd set statuslev = null, tslev = null where id = any($4)
			returning id
		), n as (
			insert into publicatie_nakomer (admhnd_id) select x from unnest($5::bigint[]) as x order by x
			on conflict (admhnd_id) do nothing
			returning admhnd_id
		), o as (
			delete from levering_onderweg where admhnd_id = any($1) or admhnd_id = any($6)
			returning admhnd_id
		)
		update admhnd set statuslev = ` + handeling.GeleverdSQL + `, tslev = now() where id = any($1)
		returning id, tslev`

// row is a handeling of a batch as check works it out, under the batch's row locks.
type row struct {
	id          int64
	at          place
	soort       string
	tsreg       sql.NullTime // NULL: outside the accepted range
	status      handeling.Status
	vrijgegeven bool
	personen    []int64
	blocker     int64   // the oldest older handeling outside the batch to be delivered first; 0: none
	blockerNull bool    // that one is still to be delivered (NULL), not in levering or fout
	overtaken   bool    // a newer handeling of one of its persons is geleverd, or may be out (onderweg)
	onderweg    bool    // levering_onderweg records it: a copy of it may be on the verzending queue (migration 0012)
	newerInLev  []int64 // newer handelingen of its persons outside the batch in levering
}

// place is a handeling's place in delivery order: (tsreg, id), where a tsreg outside the
// accepted range sorts where the database sorts it (end -1 before everything, 1 after).
type place struct {
	end   int
	tsreg time.Time
	id    int64
}

func (a place) compare(b place) int {
	if c := cmp.Compare(a.end, b.end); c != 0 {
		return c
	}
	if c := a.tsreg.Compare(b.tsreg); c != 0 {
		return c
	}
	return cmp.Compare(a.id, b.id)
}

// other is a handeling outside the batch that shares a person with it (checkSQL's 'h' rows).
type other struct {
	at                          place
	open, teLeveren, lev, inLev bool // lev: geleverd, or a copy of it may be out (onderweg)
}

// deliver runs the consumer's database transaction for a batch of distinct ids, sorted (the
// order in which their rows are locked): lockSQL, checkSQL, the decision (decide), applySQL,
// then the delivered ones to the verzending queue in delivery order (tsreg, id) in one broker
// transaction confirmed by a receipt, and only then commit. carried are the persons each
// publication of the batch named for each id.
func (w *worker) deliver(ctx context.Context, ids []int64, carried map[int64][][]int64) (map[int64]result, error) {
	// The statements run prepared: their generic plans (primary-key and person probes) are the
	// right plans for every batch. An error is the database being away, which BeginTxx reports.
	w.b.at(stepLock)
	_ = w.stmts.Prepare(ctx, lockSQL, checkSQL, applySQL)
	tx, err := w.db.BeginTxx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit

	q := w.stmts.In(tx.Tx)
	if _, err := q.ExecContext(ctx, batchLocksSQL); err != nil {
		return nil, fmt.Errorf("lock tables: %w", err)
	}
	if _, err := q.ExecContext(ctx, lockSQL, pq.Array(ids)); err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	rows, err := w.check(ctx, q, ids)
	if err != nil {
		return nil, err
	}
	newer, err := w.holdNewer(ctx, q, rows)
	if err != nil {
		return nil, err
	}
	for _, r := range rows {
		if r.status == handeling.InLevering && slices.ContainsFunc(r.newerInLev, func(id int64) bool { _, ok := newer[id]; return !ok }) {
			return nil, fmt.Errorf("handeling %d: %w", r.id, errNewerInFlight)
		}
	}
	res := decide(rows, carried, newer, w.cfg.Excluded, w.cfg.FoutPolicy == handeling.Strict)
	if err := w.markOnderweg(ctx, res); err != nil {
		return nil, err
	}
	found, err := w.apply(ctx, q, res, rows)
	if err != nil {
		return nil, err
	}
	if err := w.cfg.Hooks.AfterLock.Run(ctx, ids); err != nil {
		return nil, fmt.Errorf("%w: %w", errBroker, err)
	}
	msgs, sent, err := verzendingen(found, w.cfg.VerzendingQueue)
	if err != nil {
		return nil, err
	}
	w.b.at(stepVerzending)
	if err := w.send.Send(ctx, msgs...); err != nil {
		return nil, fmt.Errorf("%w: verzending: %w", errBroker, err)
	}
	if len(sent) > 0 {
		if err := w.cfg.Hooks.AfterVerzending.Run(ctx, sent); err != nil {
			return nil, fmt.Errorf("%w: %w", errBroker, err)
		}
	}
	w.b.at(stepCommit)
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	w.logOutcomes(res, ids, sent)
	w.observeDelays(found, sent)
	return res, nil
}

// check runs checkSQL for ids and works out, for each handeling of the batch, what bears on it
// from outside the batch: per person, the oldest handeling still to be delivered first, the
// newest geleverd, and those in levering; then per handeling, over its persons, the oldest
// such older one (row.blocker), whether a newer one is geleverd or onderweg (in the batch too),
// and the newer ones in levering.
func (c *Consumer) check(ctx context.Context, q prepared.Tx, ids []int64) ([]row, error) {
	strict := c.cfg.FoutPolicy == handeling.Strict
	rs, err := q.QueryContext(ctx, checkSQL, pq.Array(ids), pq.Array(c.cfg.Excluded), strict)
	if err != nil {
		return nil, fmt.Errorf("check: %w", err)
	}
	defer rs.Close()
	var out []row
	byPerson := map[int64][]other{}
	inBatch := make(map[int64]bool, len(ids))
	for _, id := range ids {
		inBatch[id] = true
	}
	for rs.Next() {
		var kind string
		var r row
		var personen pq.Int64Array
		var status sql.NullString
		if err := rs.Scan(&kind, &r.id, &r.soort, &r.at.end, &r.tsreg, &status, &r.vrijgegeven, &personen, &r.onderweg); err != nil {
			return nil, fmt.Errorf("check: %w", err)
		}
		r.at.tsreg, r.at.id, r.status = r.tsreg.Time, r.id, handeling.Status(status.String)
		if kind == "b" {
			r.personen = personen
			out = append(out, r)
			if r.status == handeling.Geleverd || r.onderweg && r.status == handeling.InLevering {
				// Out already, or may be: it overtakes the batch's older handelingen of its
				// persons as one outside the batch does (a publication that carried both:
				// forged, misrouted, or a redelivery). The other rows leave the batch out.
				for _, p := range personen {
					byPerson[p] = append(byPerson[p], other{at: r.at, lev: true})
				}
			}
			continue
		}
		if inBatch[r.id] {
			continue // the 'b' rows speak for the batch
		}
		o := other{at: r.at, teLeveren: !status.Valid, lev: r.status == handeling.Geleverd || r.onderweg, inLev: r.status == handeling.InLevering}
		o.open = o.teLeveren || o.inLev || r.status == handeling.Fout && strict && !r.vrijgegeven
		byPerson[personen[0]] = append(byPerson[personen[0]], o)
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("check: %w", err)
	}
	for i := range out {
		r := &out[i]
		var first *other
		for _, p := range r.personen {
			for j := range byPerson[p] {
				o := &byPerson[p][j]
				switch c := o.at.compare(r.at); {
				case c < 0 && o.open && (first == nil || o.at.compare(first.at) < 0):
					first = o
				case c > 0 && o.lev:
					r.overtaken = true
				case c > 0 && o.inLev && !slices.Contains(r.newerInLev, o.at.id):
					r.newerInLev = append(r.newerInLev, o.at.id)
				}
			}
		}
		if first != nil {
			r.blocker, r.blockerNull = first.at.id, first.teLeveren
		}
	}
	return out, nil
}

// decide says what becomes of each handeling of a batch (rows, as checkSQL read them under the
// batch's row locks; carried, the persons its publications named): the order check. A
// handeling is delivered only when it is in levering, its persons are those its publications
// carried, no older handeling of its persons outside the batch must be delivered first
// (row.blocker), none newer is already geleverd (then it was overtaken, and ends fout; newer
// has holdNewer's view of those in levering), and no older one of the batch that shares a person with it is
// left undelivered (in (tsreg, id) order, each undelivered one holds its persons back for the
// rest). Unknown ids (no row) are unknown.
func decide(rows []row, carried map[int64][][]int64, newer map[int64]handeling.Status, excludedSoorten []string, strict bool) map[int64]result {
	res := make(map[int64]result, len(carried))
	for id := range carried {
		res[id] = result{outcome: unknown}
	}
	slices.SortFunc(rows, func(a, b row) int { return a.at.compare(b.at) })
	held := map[int64]string{} // person -> why its later handelingen of the batch wait
	hold := func(reason string, persons ...[]int64) {
		for _, ps := range persons {
			for _, p := range ps {
				if _, ok := held[p]; !ok {
					held[p] = reason
				}
			}
		}
	}
	heldBy := func(ps []int64) string {
		for _, p := range ps {
			if why, ok := held[p]; ok {
				return why
			}
		}
		return ""
	}
	for _, r := range rows {
		var out result
		switch {
		case slices.Contains(excludedSoorten, r.soort):
			// Nobody publishes an excluded soort: this publication was sent by hand, or by a
			// publisher configured otherwise. Delivering it would break the exclusion. It never
			// holds anyone back.
			out = result{outcome: excluded}
		case r.status == handeling.Geleverd:
			out = result{outcome: duplicate}
		case r.status == handeling.Fout:
			out = result{outcome: duplicate}
			if strict && !r.vrijgegeven {
				hold(reasonBehindFout, r.personen)
			}
		case r.status != handeling.InLevering:
			out = result{outcome: heldBack, reason: reasonNotInLevering}
			hold(reasonOlderOpen, r.personen)
		case r.onderweg && len(r.personen) > 0 && r.tsreg.Valid:
			// A batch before sent it and did not commit (killed between the two commits): a
			// copy may be out. Delivered again whatever else holds, even persons added since
			// (set back, it would no longer count as out): a duplicate after that copy; the
			// older handelingen of its persons are overtaken.
			out = result{outcome: delivered}
		case !carriedAre(carried[r.id], r.personen):
			out = result{outcome: heldBack, reason: reasonPersonsChanged}
			hold(reasonOlderOpen, append(slices.Concat(carried[r.id]...), r.personen...))
		case len(r.personen) == 0:
			out = result{outcome: markedFout, reason: handeling.FoutGeenPersonen}
		case !r.tsreg.Valid:
			out = result{outcome: markedFout, reason: handeling.FoutTsreg}
			hold(reasonBehindFout, r.personen)
		case r.overtaken || slices.ContainsFunc(r.newerInLev, func(id int64) bool { return newer[id] == handeling.Geleverd }):
			// A newer handeling of one of its persons already reached afnemers (this one was
			// registered, or got its persons, late): delivered now, it would come after it.
			out = result{outcome: markedFout, reason: handeling.FoutOvertaken}
			hold(reasonBehindFout, r.personen)
		case heldBy(r.personen) != "":
			out = result{outcome: heldBack, reason: heldBy(r.personen)}
			hold(reasonOlderOpen, r.personen)
		case r.blocker != 0:
			out = result{outcome: heldBack, reason: reasonOlderOpen, blocker: r.blocker}
			hold(reasonOlderOpen, r.personen)
		default:
			out = result{outcome: delivered}
		}
		res[r.id] = out
	}
	return res
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

// markOnderweg records, committed on a connection of its own, the handelingen this batch is
// about to send (migration 0012): should the batch not commit after its broker commit, the
// record says a copy of them may be out. applySQL removes it with the commit that sets them
// geleverd. One statement a batch that delivers anything; none on a batch that does not.
func (w *worker) markOnderweg(ctx context.Context, res map[int64]result) error {
	var ids []int64
	for id, r := range res {
		if r.outcome == delivered {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	slices.Sort(ids)
	if _, err := w.db.ExecContext(ctx, markOnderwegSQL, pq.Array(ids)); err != nil {
		return fmt.Errorf("record verzendingen onderweg: %w", err)
	}
	return nil
}

const markOnderwegSQL = `insert into levering_onderweg (admhnd_id) select unnest($1::bigint[]) on conflict do nothing`

// apply runs applySQL for res and returns the delivered handelingen's verzendingen.
func (c *Consumer) apply(ctx context.Context, q prepared.Tx, res map[int64]result, rows []row) (map[int64]*Verzending, error) {
	var lev, foutIDs, back, blockers, gone []int64
	var redenen []string
	for _, r := range rows {
		if r.onderweg && res[r.id].outcome == duplicate {
			gone = append(gone, r.id) // geleverd by now: its record is done with
		}
	}
	for id, r := range res {
		switch r.outcome {
		case delivered:
			lev = append(lev, id)
		case markedFout:
			foutIDs, redenen = append(foutIDs, id), append(redenen, r.reason)
		case heldBack:
			if r.reason != reasonNotInLevering {
				back = append(back, id)
			}
		}
	}
	for _, r := range rows {
		if res[r.id].outcome == heldBack && r.blockerNull && !slices.Contains(blockers, r.blocker) {
			blockers = append(blockers, r.blocker)
		}
	}
	if len(lev)+len(foutIDs)+len(back)+len(gone) == 0 {
		return nil, nil
	}
	rs, err := q.QueryContext(ctx, applySQL, pq.Array(lev), pq.Array(foutIDs), pq.Array(redenen), pq.Array(back), pq.Array(blockers),
		pq.Array(gone))
	if err != nil {
		return nil, fmt.Errorf("deliver: %w", err)
	}
	defer rs.Close()
	byID := make(map[int64]row, len(rows))
	for _, r := range rows {
		byID[r.id] = r
	}
	found := make(map[int64]*Verzending, len(lev))
	for rs.Next() {
		var id int64
		var tslev time.Time
		if err := rs.Scan(&id, &tslev); err != nil {
			return nil, fmt.Errorf("deliver: %w", err)
		}
		r := byID[id]
		found[id] = &Verzending{ID: id, Soort: r.soort, Tsreg: r.tsreg.Time, Tslev: tslev, Personen: r.personen}
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("deliver: %w", err)
	}
	if len(found) != len(lev) {
		// The rows are locked and were read in levering: nothing else can have changed them.
		return nil, fmt.Errorf("deliver: %d of %d handelingen set geleverd", len(found), len(lev))
	}
	return found, nil
}

// verzendingen returns the verzending messages of the delivered handelingen, in delivery order
// (tsreg, id): each person's in order.
func verzendingen(found map[int64]*Verzending, queue string) ([]broker.Message, []int64, error) {
	sent := make([]int64, 0, len(found))
	for id := range found {
		sent = append(sent, id)
	}
	slices.SortFunc(sent, func(a, b int64) int {
		if c := found[a].Tsreg.Compare(found[b].Tsreg); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	msgs := make([]broker.Message, 0, len(sent))
	for _, id := range sent {
		// encoding/json's output is always text (broker.IsText: it escapes control characters
		// and replaces bytes that are not UTF-8), so Send never refuses a verzending with
		// broker.ErrNotText (TestVerzendingIsText).
		body, err := json.Marshal(found[id])
		if err != nil {
			return nil, nil, fmt.Errorf("encode verzending %d: %w", id, err)
		}
		msgs = append(msgs, broker.Message{Destination: queue, Header: handeling.IDHeaders(id), Body: body})
	}
	return msgs, sent, nil
}

// logOutcomes logs a committed batch's deliveries, fouts and held-back handelingen, by admhnd
// id only: persoon ids are personal data.
func (c *Consumer) logOutcomes(res map[int64]result, ids, sent []int64) {
	for _, id := range sent {
		c.log.Debug("handeling geleverd", slog.Int64("admhnd_id", id))
	}
	for _, id := range ids {
		switch r := res[id]; {
		case r.outcome == markedFout:
			c.log.Warn("handeling fout", slog.Int64("admhnd_id", id), slog.String("reason", r.reason))
		case r.outcome == heldBack && r.reason == reasonNotInLevering:
			c.log.Info("publication of a handeling that is not in levering left to the publisher", slog.Int64("admhnd_id", id))
		case r.outcome == heldBack:
			attrs := []any{slog.Int64("admhnd_id", id), slog.String("reason", r.reason)}
			if r.blocker != 0 {
				attrs = append(attrs, slog.Int64("waits_for_admhnd_id", r.blocker))
			}
			c.log.Info("handeling held back: set back to be delivered", attrs...)
		}
	}
}
