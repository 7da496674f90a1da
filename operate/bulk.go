package operate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/brp/levering/handeling"
)

// Selection chooses the fout handelingen of a bulk retry or release (RetryMany, ReleaseMany).
// Each field that is set narrows it; All says that no field narrowing it is meant: an empty
// Selection without All selects nothing, so that a forgotten flag never acts on every fout.
type Selection struct {
	// All selects every fout handeling the other fields leave in.
	All bool `json:"all,omitempty"`
	// Reason keeps those whose foutreden contains it, in any case.
	Reason string `json:"reason,omitempty"`
	// Since keeps those with a tsreg at or after it; Until those before it (zero: no bound).
	Since time.Time `json:"since,omitzero"`
	Until time.Time `json:"until,omitzero"`
	// Person keeps those of this persoon (0: any).
	Person int64 `json:"person,omitempty"`
}

// ErrEmptySelection is returned for a Selection that names nothing (no field set, All not set).
var ErrEmptySelection = errors.New("the selection names nothing: give --all, or --reason, --since, --until or --person")

// Narrowed reports whether a field other than All is set.
func (s Selection) Narrowed() bool {
	return s.Reason != "" || !s.Since.IsZero() || !s.Until.IsZero() || s.Person != 0
}

func (s Selection) validate() error {
	if !s.All && !s.Narrowed() {
		return ErrEmptySelection
	}
	if !s.Since.IsZero() && !s.Until.IsZero() && !s.Since.Before(s.Until) {
		return fmt.Errorf("the selection's since %s is not before its until %s", s.Since.Format(time.RFC3339), s.Until.Format(time.RFC3339))
	}
	return nil
}

// String describes the selection for people (the CLI's output): no persoon id, which the
// operator typed and knows.
func (s Selection) String() string {
	var parts []string
	if s.Reason != "" {
		parts = append(parts, fmt.Sprintf("reason containing %q", s.Reason))
	}
	if !s.Since.IsZero() {
		parts = append(parts, "tsreg from "+s.Since.Format(time.RFC3339))
	}
	if !s.Until.IsZero() {
		parts = append(parts, "tsreg before "+s.Until.Format(time.RFC3339))
	}
	if s.Person != 0 {
		parts = append(parts, "of the person given")
	}
	if len(parts) == 0 {
		return "every fout handeling"
	}
	return "fout handelingen with " + strings.Join(parts, ", ")
}

// BulkResult is what a bulk retry or release did, or with DryRun would do.
type BulkResult struct {
	// Selected is how many fout handelingen the selection held as the action went through
	// them (by id, a page at a time).
	Selected int64 `json:"selected"`
	// Done is how many were retried or released (0 on a dry run). It can be below Selected:
	// one that left fout (or was released) meanwhile is left alone.
	Done int64 `json:"done"`
	// Batches is how many transactions the action took.
	Batches int `json:"batches"`
	// First lists up to maxShown of the selected ones, by id.
	First  []Fout `json:"first"`
	DryRun bool   `json:"dry_run"`
}

// BulkBatch is how many handelingen one transaction of a bulk action changes: each holds their
// rows' locks for a moment only (0.1 to 0.3 s measured), and nothing bijhouding does waits for
// those (its inserts take none of them; persons added late take a key-share lock, which an
// update of these columns leaves free).
const BulkBatch = 1000

// maxShown is how many selected handelingen a bulk result lists.
const maxShown = 20

// RetryMany retries every fout handeling of layout l's tables that sel selects (see Retry), in
// transactions of BulkBatch, each handeling with its own audit row (door, note). With dryRun
// it changes nothing and says how many, and which first, it would retry.
func RetryMany(ctx context.Context, db *sqlx.DB, l handeling.Layout, sel Selection, door, note string, dryRun bool) (BulkResult, error) {
	st := statementsFor(l)
	return bulk(ctx, db, st, sel, "retry", door, note, dryRun, false, st.retryManySQL)
}

// ReleaseMany releases every fout handeling of layout l's tables that sel selects and that is
// not released yet (see Release), as RetryMany does.
func ReleaseMany(ctx context.Context, db *sqlx.DB, l handeling.Layout, sel Selection, door, note string, dryRun bool) (BulkResult, error) {
	st := statementsFor(l)
	return bulk(ctx, db, st, sel, "release", door, note, dryRun, true, st.releaseManySQL)
}

// bulk pages through the selection by id and applies change (retry_many.sql or
// release_many.sql) to each page in a transaction of its own. A page is read outside the
// transaction: change itself skips whatever is no longer fout (or released).
func bulk(ctx context.Context, db *sqlx.DB, st *statements, sel Selection, actie, door, note string,
	dryRun, unreleased bool, change string) (BulkResult, error) {
	res := BulkResult{DryRun: dryRun, First: []Fout{}}
	if err := sel.validate(); err != nil {
		return res, fmt.Errorf("%s: %w", actie, err)
	}
	door = strings.TrimSpace(door)
	if door == "" && !dryRun {
		return res, fmt.Errorf("%s: %w", actie, ErrActorRequired)
	}
	var toelichting *string
	if note = strings.TrimSpace(note); note != "" {
		toelichting = &note
	}
	// Page through the selection by id. A dry run reads every page and changes nothing; an
	// action changes each page in a transaction of its own before it reads the next.
	var after int64
	for {
		page, err := selectFout(ctx, db, st, sel, unreleased, after, BulkBatch)
		if err != nil {
			return res, fmt.Errorf("%s: select: %w", actie, err)
		}
		if len(page) == 0 {
			return res, nil
		}
		res.Selected += int64(len(page))
		if len(res.First) < maxShown {
			res.First = append(res.First, page[:min(len(page), maxShown-len(res.First))]...)
		}
		ids := make([]int64, len(page))
		for i, f := range page {
			ids[i] = f.ID
		}
		after = ids[len(ids)-1]
		if dryRun {
			continue
		}
		n, err := applyBatch(ctx, db, st, change, ids, actie, door, toelichting)
		if err != nil {
			return res, fmt.Errorf("%s: after %d of %d: %w", actie, res.Done, res.Selected, err)
		}
		res.Done += n
		res.Batches++
	}
}

// applyBatch changes ids in one transaction and returns how many it changed. A release wakes
// the publisher itself: it changes no statuslev, whose trigger would.
func applyBatch(ctx context.Context, db *sqlx.DB, st *statements, change string, ids []int64, actie, door string, note *string) (int64, error) {
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	var done []int64
	if err := tx.SelectContext(ctx, &done, change, pq.Array(ids), door, note); err != nil {
		return 0, err
	}
	if actie == "release" && len(done) > 0 {
		if _, err := tx.ExecContext(ctx, st.notifySQL, handeling.NotifyChannel); err != nil {
			return 0, err
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("commit: %w", err)
	}
	return int64(len(done)), nil
}

// selectFout reads up to limit fout handelingen of sel after id after.
func selectFout(ctx context.Context, q sqlx.QueryerContext, st *statements, sel Selection, unreleased bool, after int64, limit int) ([]Fout, error) {
	var reason, since, until, person any
	if sel.Reason != "" {
		reason = sel.Reason
	}
	if !sel.Since.IsZero() {
		since = sel.Since
	}
	if !sel.Until.IsZero() {
		until = sel.Until
	}
	if sel.Person != 0 {
		person = sel.Person
	}
	rows, err := q.QueryContext(ctx, st.selectFoutSQL, unreleased, reason, since, until, person, after, limit)
	if err != nil {
		return nil, err
	}
	var out []Fout
	for rows.Next() {
		var f Fout
		if err := rows.Scan(&f.ID, &f.Soort, &f.Tsreg, &f.Foutreden, &f.Vrijgegeven); err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, f)
	}
	return out, closeRows(rows)
}
