package operate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/brp/levering/handeling"
)

// Errors of the operator actions; test with errors.Is.
var (
	// ErrNotFound: no handeling has the given id.
	ErrNotFound = errors.New("operate: handeling not found")
	// ErrNotFout: the handeling is not in fout, so it cannot be retried or released.
	ErrNotFout = errors.New("operate: handeling is not in fout")
	// ErrAlreadyReleased: the fout handeling was released before.
	ErrAlreadyReleased = errors.New("operate: handeling already released")
	// ErrActorRequired: an action needs the name of the operator taking it.
	ErrActorRequired = errors.New("operate: door (who takes the action) is required")
)

// Action is one recorded operator action (a row of admhnd_beheer).
type Action struct {
	ID   int64     `json:"id" db:"id"`
	Kind string    `json:"actie" db:"actie"` // "retry" or "release"
	By   string    `json:"door" db:"door"`   // the operator who took it
	At   time.Time `json:"op" db:"op"`
	Note string    `json:"toelichting" db:"toelichting"` // "" when none was given
}

// Waiting is a handeling still to be delivered.
type Waiting struct {
	ID    int64     `json:"id"`
	Soort string    `json:"soort"`
	Tsreg time.Time `json:"tsreg"`
}

// FoutDetail is one handeling as ShowFout sees it.
type FoutDetail struct {
	Fout
	// Statuslev is the handeling's status now: handeling.Fout, or after a retry TeLeveren ("",
	// NULL), InLevering or Geleverd.
	Statuslev handeling.Status `json:"statuslev"`
	// Audit is the handeling's operator actions, oldest first.
	Audit []Action `json:"audit"`
	// HeldBack lists (up to maxHeldBack, oldest first) the later handelingen of its persons,
	// soort not excluded and still to be delivered, that it holds back now: non-empty only
	// while it is in fout, not released and the policy is strict.
	HeldBack []Waiting `json:"held_back"`
	// HeldBackTotal counts them all.
	HeldBackTotal int64 `json:"held_back_total"`
	// Overtaken counts later handelingen of its persons already in levering or geleverd: if
	// non-zero, a retry delivers this handeling after them (out of per-person order).
	Overtaken int64 `json:"overtaken"`
}

// maxHeldBack is the most held-back handelingen FoutDetail lists.
const maxHeldBack = 100

// ListFout returns up to limit fout handelingen (released or not) of layout l's tables,
// newest (tsreg, id) first; limit <= 0 means maxFouten.
func ListFout(ctx context.Context, db *sqlx.DB, l handeling.Layout, limit int) ([]Fout, error) {
	if limit <= 0 {
		limit = maxFouten
	}
	return listFout(ctx, db, statementsFor(l), limit)
}

func listFout(ctx context.Context, q sqlx.QueryerContext, st *statements, limit int) ([]Fout, error) {
	rows, err := q.QueryContext(ctx, st.listFoutSQL, limit)
	if err != nil {
		return nil, fmt.Errorf("list fout: %w", err)
	}
	out := []Fout{}
	for rows.Next() {
		var f Fout
		if err := rows.Scan(&f.ID, &f.Soort, &f.Tsreg, &f.Foutreden, &f.Vrijgegeven, pq.Array(&f.Personen)); err != nil {
			rows.Close()
			return nil, fmt.Errorf("list fout: %w", err)
		}
		out = append(out, f)
	}
	if err := closeRows(rows); err != nil {
		return nil, fmt.Errorf("list fout: %w", err)
	}
	return out, nil
}

// ShowFout returns handeling id with its persons, foutreden, release, current status, audit
// history and what it holds back. It works for any handeling (so a retried one still shows its
// history); ErrNotFound when id does not exist. cfg is the publisher's configuration: its
// Layout the tables read, the rest what counts as held back.
func ShowFout(ctx context.Context, db *sqlx.DB, id int64, cfg OverviewConfig) (FoutDetail, error) {
	var d FoutDetail
	cfg, err := cfg.withDefaults()
	if err != nil {
		return d, err
	}
	tx, err := db.BeginTxx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return d, fmt.Errorf("show %d: begin: %w", id, err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only
	st := statementsFor(cfg.Layout)
	err = tx.QueryRowxContext(ctx, st.showSQL, id).
		Scan(&d.ID, &d.Soort, &d.Tsreg, &d.Foutreden, &d.Vrijgegeven, &d.Statuslev, pq.Array(&d.Personen))
	if errors.Is(err, sql.ErrNoRows) {
		return d, fmt.Errorf("show %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return d, fmt.Errorf("show %d: %w", id, err)
	}
	d.Audit = []Action{}
	if err := tx.SelectContext(ctx, &d.Audit, st.auditSQL, id); err != nil {
		return d, fmt.Errorf("show %d: audit: %w", id, err)
	}
	d.HeldBack = []Waiting{}
	if d.Statuslev == handeling.Fout && d.Vrijgegeven == nil && cfg.FoutPolicy == handeling.Strict {
		rows, err := tx.QueryContext(ctx, st.heldBackSQL, id, d.Tsreg, pq.Array(cfg.Excluded), maxHeldBack)
		if err != nil {
			return d, fmt.Errorf("show %d: held back: %w", id, err)
		}
		for rows.Next() {
			var w Waiting
			if err := rows.Scan(&w.ID, &w.Soort, &w.Tsreg, &d.HeldBackTotal); err != nil {
				rows.Close()
				return d, fmt.Errorf("show %d: held back: %w", id, err)
			}
			d.HeldBack = append(d.HeldBack, w)
		}
		if err := closeRows(rows); err != nil {
			return d, fmt.Errorf("show %d: held back: %w", id, err)
		}
	}
	if err := tx.GetContext(ctx, &d.Overtaken, st.overtakenSQL,
		id, d.Tsreg, pq.Array(cfg.Excluded)); err != nil {
		return d, fmt.Errorf("show %d: overtaken: %w", id, err)
	}
	return d, nil
}

// Retry puts fout handeling id of layout l's tables back to be delivered: statuslev,
// foutreden, vrijgegeven and tspub become NULL (kern: statuslev 1, its admhnd_levering row
// deleted), so the publisher delivers it again in its (tsreg, id) place, and a 'retry' row
// records door and note (empty: none). All in one transaction. Errors: ErrActorRequired (door
// blank), ErrNotFound, ErrNotFout (any other status).
func Retry(ctx context.Context, db *sqlx.DB, l handeling.Layout, id int64, door, note string) error {
	st := statementsFor(l)
	return act(ctx, db, st, id, door, note, "retry", func(ctx context.Context, tx *sqlx.Tx, released bool) error {
		_, err := tx.ExecContext(ctx, st.retrySQL, id)
		return err
	})
}

// Release marks fout handeling id of layout l's tables released (vrijgegeven = now(); kern: in
// admhnd_levering): under the strict policy it no longer holds back later handelingen of its
// persons; it stays in fout. A 'release' row records door and note. All in one transaction,
// which also wakes the publisher. Errors: ErrActorRequired, ErrNotFound, ErrNotFout,
// ErrAlreadyReleased.
func Release(ctx context.Context, db *sqlx.DB, l handeling.Layout, id int64, door, note string) error {
	st := statementsFor(l)
	return act(ctx, db, st, id, door, note, "release", func(ctx context.Context, tx *sqlx.Tx, released bool) error {
		if released {
			return ErrAlreadyReleased
		}
		if _, err := tx.ExecContext(ctx, st.releaseSQL, id); err != nil {
			return err
		}
		// The schema's trigger wakes the publisher only on a statuslev change; release does not
		// change it, so notify its channel here.
		_, err := tx.ExecContext(ctx, st.notifySQL, handeling.NotifyChannel)
		return err
	})
}

// act runs an operator action on a fout handeling, locked, with its audit row, in one
// transaction.
func act(ctx context.Context, db *sqlx.DB, st *statements, id int64, door, note, actie string,
	change func(ctx context.Context, tx *sqlx.Tx, released bool) error) error {
	door = strings.TrimSpace(door)
	if door == "" {
		return fmt.Errorf("%s %d: %w", actie, id, ErrActorRequired)
	}
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return fmt.Errorf("%s %d: begin: %w", actie, id, err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	var status handeling.Status
	var released bool
	err = tx.QueryRowxContext(ctx, st.lockForActionSQL, id).
		Scan(&status, &released)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%s %d: %w", actie, id, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("%s %d: %w", actie, id, err)
	}
	if status != handeling.Fout {
		s := string(status)
		if status == handeling.TeLeveren {
			s = "te leveren (NULL)"
		}
		return fmt.Errorf("%s %d: %w: it is %s", actie, id, ErrNotFout, s)
	}
	if err := change(ctx, tx, released); err != nil {
		return fmt.Errorf("%s %d: %w", actie, id, err)
	}
	var toelichting sql.NullString
	if note = strings.TrimSpace(note); note != "" {
		toelichting = sql.NullString{String: note, Valid: true}
	}
	if _, err := tx.ExecContext(ctx, st.recordActionSQL,
		id, actie, door, toelichting); err != nil {
		return fmt.Errorf("%s %d: audit: %w", actie, id, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%s %d: commit: %w", actie, id, err)
	}
	return nil
}
