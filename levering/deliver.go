package levering

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/brp/levering/broker"
)

type outcome int

const (
	delivered  outcome = iota // geleverd now, verzending sent
	duplicate                 // was already delivered; nothing sent
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

// deliver runs the consumer's database transaction for one handeling.
func (c *Consumer) deliver(ctx context.Context, id int64, send *broker.Conn) (outcome, error) {
	tx, err := c.db.BeginTxx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit

	var v Verzending
	err = tx.QueryRowxContext(ctx, `select soort, tsreg from admhnd where id = $1`, id).Scan(&v.Soort, &v.Tsreg)
	if errors.Is(err, sql.ErrNoRows) {
		return unknown, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read handeling %d: %w", id, err)
	}
	v.ID = id
	v.Personen = []int64{}
	if err := tx.SelectContext(ctx, &v.Personen, `select persoon_id from admhnd_persoon where admhnd_id = $1 order by persoon_id`, id); err != nil {
		return 0, fmt.Errorf("read personen of %d: %w", id, err)
	}
	if len(v.Personen) == 0 {
		return c.markFout(ctx, tx, id, "handeling heeft geen bijgehouden personen")
	}
	err = tx.QueryRowxContext(ctx, `
		update admhnd set statuslev = 'geleverd', tslev = now()
		where id = $1 and (tslev is null or statuslev = 'in_levering')
		returning tslev`, id).Scan(&v.Tslev)
	if errors.Is(err, sql.ErrNoRows) {
		return duplicate, tx.Commit()
	}
	if err != nil {
		return 0, fmt.Errorf("mark %d geleverd: %w", id, err)
	}
	body, err := json.Marshal(v)
	if err != nil {
		return 0, fmt.Errorf("encode verzending %d: %w", id, err)
	}
	if err := send.Send(ctx, broker.Message{Destination: c.cfg.VerzendingQueue, AdmhndID: id, Body: body}); err != nil {
		return 0, fmt.Errorf("%w: verzending %d: %w", errBroker, id, err)
	}
	if err := runHookID(ctx, c.cfg.Hooks.AfterVerzending, id); err != nil {
		return 0, fmt.Errorf("%w: %w", errBroker, err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("commit %d: %w", id, err)
	}
	c.log.Debug("handeling geleverd", slog.Int64("admhnd_id", id))
	return delivered, nil
}

// markFout records a known error, under the same condition as a delivery.
func (c *Consumer) markFout(ctx context.Context, tx *sqlx.Tx, id int64, reason string) (outcome, error) {
	res, err := tx.ExecContext(ctx, `
		update admhnd set statuslev = 'fout', foutreden = $2
		where id = $1 and (tslev is null or statuslev = 'in_levering')`, id, reason)
	if err != nil {
		return 0, fmt.Errorf("mark %d fout: %w", id, err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("commit fout %d: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return duplicate, nil
	}
	c.log.Warn("handeling fout", slog.Int64("admhnd_id", id), slog.String("reason", reason))
	return markedFout, nil
}
