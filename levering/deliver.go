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
	heldBack                  // after a fout one of its persons in its publication: set back to be delivered
)

// errBroker marks a failure of the broker connection (as opposed to the database).
var errBroker = errors.New("broker")

// Verzending is the body of a message on the verzending queue (CONTRACT.md section 3).
type Verzending struct {
	ID       int64     `json:"id"`
	Soort    string    `json:"soort"`
	Tsreg    time.Time `json:"tsreg"`
	Tslev    time.Time `json:"tslev"`
	Personen []int64   `json:"personen"`
}

// deliverSQL is deliver's one statement: lock the rows in id order (two workers holding copies
// of the same handelingen cannot deadlock), read their persons, and set geleverd, or fout when
// a handeling has no persons or ($4) a tsreg outside the accepted range, where not yet
// delivered and its soort is not excluded ($3).
// Two updates of disjoint rows, each
// assigning its status as a bare literal: bijhouding's statuslev may be an enum, and a CASE
// of literals would be text, which PostgreSQL does not assign to an enum. The condition is judged on the locked,
// latest version of each row (l), so a publisher's round that held the lock is seen committed.
// One statement instead of four saves the round trips and plans, and the persons are read in
// the same snapshot as the rows: bijhouding writes a handeling and its persons together.
var deliverSQL = `
		with l as (
			select id, soort, tsreg, statuslev, tslev from admhnd
			where id = any($1) order by id for update
		), p as (
			select admhnd_id, array_agg(distinct persoon_id order by persoon_id) as personen
			from admhnd_persoon where admhnd_id = any($1) group by admhnd_id
		), g as (
			update admhnd a set statuslev = ` + handeling.GeleverdSQL + `, tslev = now()
			from l join p on p.admhnd_id = l.id
			where a.id = l.id and (l.tslev is null or l.statuslev = ` + handeling.InLeveringSQL + `)
			  and l.soort <> all($3::text[]) and ` + handeling.TsregAcceptedOn("l.tsreg") + `
			returning a.id, a.statuslev, a.tslev, a.foutreden
		), o as (
			update admhnd a set statuslev = ` + handeling.FoutSQL + `, foutreden = $4
			from l
			where a.id = l.id and (l.tslev is null or l.statuslev = ` + handeling.InLeveringSQL + `)
			  and l.soort <> all($3::text[]) and not ` + handeling.TsregAcceptedOn("l.tsreg") + `
			returning a.id, a.statuslev, a.tslev, a.foutreden
		), f as (
			update admhnd a set statuslev = ` + handeling.FoutSQL + `, foutreden = $2
			from l left join p on p.admhnd_id = l.id
			where a.id = l.id and p.admhnd_id is null and (l.tslev is null or l.statuslev = ` + handeling.InLeveringSQL + `)
			  and l.soort <> all($3::text[]) and ` + handeling.TsregAcceptedOn("l.tsreg") + `
			returning a.id, a.statuslev, a.tslev, a.foutreden
		), u as (
			select * from g union all select * from f union all select * from o
		)
		select l.id, l.soort, case when ` + handeling.TsregAcceptedOn("l.tsreg") + ` then l.tsreg end,
			coalesce(p.personen, '{}'), u.statuslev, u.tslev, coalesce(u.foutreden, '')
		from l left join p on p.admhnd_id = l.id left join u on u.id = l.id`

// foutGeenPersonen is the foutreden of a handeling without bijgehouden personen.
const foutGeenPersonen = "handeling heeft geen bijgehouden personen"

// deliver runs the consumer's database transaction for a batch of distinct ids, sorted (the
// order in which their rows are locked): deliverSQL, then the delivered ones to the
// verzending queue in delivery order (tsreg, id) in one broker transaction confirmed by a
// receipt, and only then commit. groups are the batch's publications, each its handelingen in
// delivery order: in a publication, a handeling after one that became fout and shares a
// person with it (or with one held back) is held back: set back to be delivered, not sent.
func (c *Consumer) deliver(ctx context.Context, ids []int64, groups [][]int64, send *broker.Conn, b *batch) (map[int64]outcome, error) {
	// deliverSQL runs prepared: its generic plan (primary-key probes) is the right plan for
	// every batch. An error is the database being away, which BeginTxx reports.
	b.at(stepLock)
	_ = c.stmts.Prepare(ctx, deliverSQL)
	tx, err := c.db.BeginTxx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit

	q := c.stmts.In(tx.Tx)
	l, err := c.lock(ctx, q, ids)
	if err != nil {
		return nil, err
	}
	if back := holdBack(groups, l.res, l.personen); len(back) > 0 {
		if _, err := q.ExecContext(ctx, holdBackSQL, pq.Array(back)); err != nil {
			return nil, fmt.Errorf("hold back: %w", err)
		}
	}
	if err := c.cfg.Hooks.AfterLock.Run(ctx, ids); err != nil {
		return nil, fmt.Errorf("%w: %w", errBroker, err)
	}
	msgs, sent, err := l.verzendingen(c.cfg.VerzendingQueue)
	if err != nil {
		return nil, err
	}
	b.at(stepVerzending)
	if err := send.Send(ctx, msgs...); err != nil {
		return nil, fmt.Errorf("%w: verzending: %w", errBroker, err)
	}
	if len(sent) > 0 {
		if err := c.cfg.Hooks.AfterVerzending.Run(ctx, sent); err != nil {
			return nil, fmt.Errorf("%w: %w", errBroker, err)
		}
	}
	b.at(stepCommit)
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	c.logOutcomes(l, ids, sent)
	c.observeDelays(l.found, sent)
	return l.res, nil
}

// locked is what deliverSQL did to a batch's handelingen, read in its transaction.
type locked struct {
	res      map[int64]outcome
	found    map[int64]*Verzending // the delivered ones
	personen map[int64][]int64
	reasons  map[int64]string // the fout ones' foutreden
}

// lock runs deliverSQL for ids and reads what it did.
func (c *Consumer) lock(ctx context.Context, q prepared.Tx, ids []int64) (*locked, error) {
	l := &locked{res: make(map[int64]outcome, len(ids)), found: make(map[int64]*Verzending, len(ids)),
		personen: make(map[int64][]int64, len(ids)), reasons: map[int64]string{}}
	for _, id := range ids {
		l.res[id] = unknown
	}
	rows, err := q.QueryContext(ctx, deliverSQL, pq.Array(ids), foutGeenPersonen, pq.Array(c.cfg.Excluded), handeling.FoutTsreg)
	if err != nil {
		return nil, fmt.Errorf("deliver: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		v := &Verzending{}
		var personen pq.Int64Array
		var status handeling.Status
		var tsreg, tslev sql.NullTime // tsreg NULL: outside the accepted range, set fout
		var reason string
		if err := rows.Scan(&v.ID, &v.Soort, &tsreg, &personen, &status, &tslev, &reason); err != nil {
			return nil, fmt.Errorf("deliver: %w", err)
		}
		v.Tsreg, v.Personen = tsreg.Time, []int64(personen)
		l.personen[v.ID] = v.Personen
		switch {
		case slices.Contains(c.cfg.Excluded, v.Soort):
			// Nobody publishes an excluded soort: this publication was sent by hand, or by a
			// publisher configured otherwise. Delivering it would break the exclusion.
			l.res[v.ID] = excluded
		case status == handeling.Geleverd:
			l.res[v.ID] = delivered
			v.Tslev = tslev.Time
			l.found[v.ID] = v
		case status == handeling.Fout:
			l.res[v.ID] = markedFout
			l.reasons[v.ID] = reason
		default:
			l.res[v.ID] = duplicate
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("deliver: %w", err)
	}
	return l, nil
}

// verzendingen returns the verzending messages of the delivered handelingen, in delivery order
// (tsreg, id): each person's in order.
func (l *locked) verzendingen(queue string) ([]broker.Message, []int64, error) {
	var sent []int64
	for id, o := range l.res {
		if o == delivered {
			sent = append(sent, id)
		}
	}
	slices.SortFunc(sent, func(a, b int64) int {
		if c := l.found[a].Tsreg.Compare(l.found[b].Tsreg); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	msgs := make([]broker.Message, 0, len(sent))
	for _, id := range sent {
		// encoding/json's output is always text (broker.IsText: it escapes control characters
		// and replaces bytes that are not UTF-8), so Send never refuses a verzending with
		// broker.ErrNotText (TestVerzendingIsText).
		body, err := json.Marshal(l.found[id])
		if err != nil {
			return nil, nil, fmt.Errorf("encode verzending %d: %w", id, err)
		}
		msgs = append(msgs, broker.Message{Destination: queue, Header: handeling.IDHeaders(id), Body: body})
	}
	return msgs, sent, nil
}

// logOutcomes logs a committed batch's deliveries, fouts and held-back handelingen.
func (c *Consumer) logOutcomes(l *locked, ids, sent []int64) {
	for _, id := range sent {
		c.log.Debug("handeling geleverd", slog.Int64("admhnd_id", id))
	}
	for _, id := range ids {
		switch l.res[id] {
		case markedFout:
			c.log.Warn("handeling fout", slog.Int64("admhnd_id", id), slog.String("reason", l.reasons[id]))
		case heldBack:
			c.log.Info("handeling held back behind a fout one of its persons; set back to be delivered", slog.Int64("admhnd_id", id))
		}
	}
}

// holdBack marks, in res, the delivered handelingen that must wait: in a publication, those
// after a fout one (or one held back) that share a person with it. It returns their ids.
func holdBack(groups [][]int64, res map[int64]outcome, personen map[int64][]int64) []int64 {
	var back []int64
	for _, g := range groups {
		var held map[int64]bool
		for _, id := range g {
			hit := slices.ContainsFunc(personen[id], func(p int64) bool { return held[p] })
			switch {
			case res[id] == markedFout, res[id] == heldBack:
			case res[id] == delivered && hit:
				res[id] = heldBack
				back = append(back, id)
			default:
				continue
			}
			if held == nil {
				held = map[int64]bool{}
			}
			for _, p := range personen[id] {
				held[p] = true
			}
		}
	}
	return back
}

// holdBackSQL sets held-back handelingen, which deliverSQL has just set geleverd, back to be
// delivered; the update fires admhnd_teruggezet (migration 0007), so the publisher takes them
// back, before anything newer of their persons.
const holdBackSQL = `update admhnd set statuslev = null, tslev = null where id = any($1)`
