package levering

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/brp/levering/broker"
)

type outcome int

const (
	delivered  outcome = iota // geleverd now, verzending sent
	duplicate                 // was already delivered (or fout); nothing sent
	markedFout                // a known error: statuslev fout
	unknown                   // no such handeling
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

// deliver runs the consumer's database transaction for a batch of distinct ids, sorted: lock
// the rows in id order (two workers holding copies of the same handelingen cannot deadlock),
// set geleverd where not yet delivered, send those to the verzending queue in one broker
// transaction confirmed by a receipt, and only then commit.
func (c *Consumer) deliver(ctx context.Context, ids []int64, send *broker.Conn) (map[int64]outcome, error) {
	tx, err := c.db.BeginTxx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit

	res := make(map[int64]outcome, len(ids))
	found := map[int64]*Verzending{}
	rows, err := tx.QueryxContext(ctx, `select id, soort, tsreg from admhnd where id = any($1) order by id for update`, pq.Array(ids))
	if err != nil {
		return nil, fmt.Errorf("read handelingen: %w", err)
	}
	for rows.Next() {
		v := &Verzending{Personen: []int64{}}
		if err := rows.Scan(&v.ID, &v.Soort, &v.Tsreg); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read handelingen: %w", err)
		}
		found[v.ID] = v
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read handelingen: %w", err)
	}
	if err := c.readPersonen(ctx, tx, ids, found); err != nil {
		return nil, err
	}
	var withPersonen, without []int64
	for _, id := range ids {
		switch v := found[id]; {
		case v == nil:
			res[id] = unknown
		case len(v.Personen) == 0:
			without = append(without, id)
		default:
			withPersonen = append(withPersonen, id)
		}
	}
	fout, err := updateReturning(ctx, tx, `
		update admhnd set statuslev = 'fout', foutreden = 'handeling heeft geen bijgehouden personen'
		where id = any($1) and (tslev is null or statuslev = 'in_levering')
		returning id, now()`, without)
	if err != nil {
		return nil, fmt.Errorf("mark fout: %w", err)
	}
	geleverd, err := updateReturning(ctx, tx, `
		update admhnd set statuslev = 'geleverd', tslev = now()
		where id = any($1) and (tslev is null or statuslev = 'in_levering')
		returning id, tslev`, withPersonen)
	if err != nil {
		return nil, fmt.Errorf("mark geleverd: %w", err)
	}
	var msgs []broker.Message
	var sent []int64
	for _, id := range ids {
		switch {
		case res[id] == unknown:
		case !fout[id].IsZero():
			res[id] = markedFout
		case !geleverd[id].IsZero():
			res[id] = delivered
			v := found[id]
			v.Tslev = geleverd[id]
			body, err := json.Marshal(v)
			if err != nil {
				return nil, fmt.Errorf("encode verzending %d: %w", id, err)
			}
			msgs = append(msgs, broker.Message{Destination: c.cfg.VerzendingQueue, AdmhndID: id, Body: body})
			sent = append(sent, id)
		default:
			res[id] = duplicate
		}
	}
	if err := send.Send(ctx, msgs...); err != nil {
		return nil, fmt.Errorf("%w: verzending: %w", errBroker, err)
	}
	if len(sent) > 0 {
		if err := runHook(ctx, c.cfg.Hooks.AfterVerzending, sent); err != nil {
			return nil, fmt.Errorf("%w: %w", errBroker, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	for _, id := range sent {
		c.log.Debug("handeling geleverd", slog.Int64("admhnd_id", id))
	}
	for _, id := range ids {
		if res[id] == markedFout {
			c.log.Warn("handeling fout", slog.Int64("admhnd_id", id), slog.String("reason", "handeling heeft geen bijgehouden personen"))
		}
	}
	return res, nil
}

func (c *Consumer) readPersonen(ctx context.Context, tx *sqlx.Tx, ids []int64, found map[int64]*Verzending) error {
	rows, err := tx.QueryContext(ctx, `select admhnd_id, persoon_id from admhnd_persoon where admhnd_id = any($1) order by admhnd_id, persoon_id`, pq.Array(ids))
	if err != nil {
		return fmt.Errorf("read personen: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, p int64
		if err := rows.Scan(&id, &p); err != nil {
			return fmt.Errorf("read personen: %w", err)
		}
		if v := found[id]; v != nil {
			v.Personen = append(v.Personen, p)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read personen: %w", err)
	}
	return nil
}

// updateReturning runs a conditional status update over ids and returns the time each
// changed row got, by id. No ids, no statement.
func updateReturning(ctx context.Context, tx *sqlx.Tx, query string, ids []int64) (map[int64]time.Time, error) {
	out := map[int64]time.Time{}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := tx.QueryContext(ctx, query, pq.Array(ids))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var ts time.Time
		if err := rows.Scan(&id, &ts); err != nil {
			return nil, err
		}
		out[id] = ts
	}
	return out, rows.Err()
}
