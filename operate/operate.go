// Package operate is what operators see and do without writing SQL: an overview of the
// publication (backlog, in levering, delivered and how long deliveries take, fout and what it
// holds back, the oldest undelivered handeling, those registered in the future, the persons
// held up and why, the cluster's lease), the fout handelingen with their history, and
// the two actions on a fout handeling (retry, release), each recorded in admhnd_beheer. Handler
// serves it all as a self-refreshing HTML page and JSON; CLI is the same on the command line
// (publicatie status, publicatie fout ...): it parses the operator's arguments and writes text.
//
// Every query reads open work through the schema's partial indexes (statuslev is null,
// in_levering, fout; kern: 1, 3, 5), so its cost does not grow with the delivered history; the
// two exceptions are marked where they are made. The statements are those of the configured
// database layout (OverviewConfig.Layout; statements.go).
package operate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/brp/levering/handeling"
)

// OverviewConfig says how the publisher is configured: the overview judges backlog and blocked
// persons by the same rules. The zero value is the publisher's default configuration.
type OverviewConfig struct {
	// Layout says which tables hold the handelingen (BRP_DATABASE_LAYOUT): the publisher's
	// publicatie.Config.Layout. Zero means handeling.Contract.
	Layout handeling.Layout
	// Excluded are the soorten never delivered: not backlog, never blocking, by the names they
	// have in Layout (kern: kern.srtadmhnd.naam). Nil means Layout.DefaultExcluded(); an empty
	// non-nil slice excludes nothing. (In the kern layout bijhouding registers the initial load
	// as niet leveren, status 2, which is never delivered whatever is excluded.)
	Excluded []string
	// FoutPolicy is handeling.Strict (an unreleased fout handeling holds back its persons) or
	// handeling.Skip. Empty means Strict.
	FoutPolicy handeling.FoutPolicy
	// Cluster is the polling cluster whose lease is shown. Empty means handeling.Cluster.
	Cluster string
	// Budget is how long each of the overview's dear reads may take: the delivered count (the
	// whole history), what is held behind fout and the blocked persons (with 100,000 held,
	// seconds on a busy machine). Past it the overview shows the leading publisher's own count
	// of what is held, or says that a number was not counted: it answers within about a second
	// whatever the tables hold, never by timing out. Zero means DefaultBudget.
	Budget time.Duration

	// slowReads, a fault seam for tests (export_test.go), makes every read within the budget
	// wait past it first.
	slowReads bool
}

// DefaultBudget is OverviewConfig.Budget's default.
const DefaultBudget = 300 * time.Millisecond

// ErrConfig is wrapped by errors about an invalid OverviewConfig.
var ErrConfig = errors.New("operate: invalid config")

// withDefaults fills in the defaults and checks the layout and the policy.
func (c OverviewConfig) withDefaults() (OverviewConfig, error) {
	if !c.Layout.Valid() {
		return c, fmt.Errorf("%w: Layout %q must be %s or %s", ErrConfig, c.Layout, handeling.Contract, handeling.Kern)
	}
	c.Layout = c.Layout.Or()
	if c.Excluded == nil {
		c.Excluded = c.Layout.DefaultExcluded()
	}
	if c.FoutPolicy == "" {
		c.FoutPolicy = handeling.Strict
	}
	if c.Cluster == "" {
		c.Cluster = handeling.Cluster
	}
	if c.Budget <= 0 {
		c.Budget = DefaultBudget
	}
	if !c.FoutPolicy.Valid() {
		return c, fmt.Errorf("%w: FoutPolicy %q must be %s or %s", ErrConfig, c.FoutPolicy, handeling.Strict, handeling.Skip)
	}
	return c, nil
}

// Overview is the state of the publication at one moment (one database snapshot).
type Overview struct {
	// GeneratedAt is the database clock at the snapshot; every age is measured from it.
	GeneratedAt time.Time            `json:"generated_at"`
	Cluster     string               `json:"cluster"`
	FoutPolicy  handeling.FoutPolicy `json:"fout_policy"`
	Excluded    []string             `json:"excluded"`
	// Backlog counts handelingen still to be delivered: statuslev NULL, soort not excluded.
	Backlog int64 `json:"backlog"`
	// InLevering counts handelingen published and not yet confirmed by a consumer.
	InLevering int64 `json:"in_levering"`
	// Geleverd counts every delivered handeling (exact), or is -1 when counting them took
	// longer than the budget.
	Geleverd int64 `json:"geleverd"`
	// DeliveredLastMinute counts handelingen with tslev in the last minute; it equals the last
	// element of DeliveredPerMinute.
	DeliveredLastMinute int64 `json:"delivered_last_minute"`
	// DeliveredPerMinute holds the deliveries of the last 10 minutes, one count per minute,
	// oldest first; the last element is the minute up to GeneratedAt.
	DeliveredPerMinute []int64 `json:"delivered_per_minute"`
	// DeliveryDelay is registration to delivery (tslev - tsreg) of the handelingen delivered in
	// the last delayWindow; nil when none was.
	DeliveryDelay *DeliveryDelay `json:"delivery_delay"`
	// Fout counts handelingen in fout, released or not.
	Fout int64 `json:"fout"`
	// HeldBehindFout counts the handelingen still to be delivered that unreleased fout
	// handelingen hold back under the strict policy, also through multi-person handelingen
	// (handeling.ReadHeld): what the publisher cannot publish because of them. 0 under skip.
	HeldBehindFout int64 `json:"held_behind_fout"`
	// HeldBehindFoutPersonen counts the persons of those handelingen: who waits.
	HeldBehindFoutPersonen int64 `json:"held_behind_fout_personen"`
	// HeldCounted says where the two held numbers come from: HeldExact (counted from the
	// tables in this snapshot), HeldByLeader (counting them took longer than the budget: the
	// leading publisher's count of its view, at HeldCountedAt), or HeldUnknown (neither: both
	// numbers are -1).
	HeldCounted   string     `json:"held_counted"`
	HeldCountedAt *time.Time `json:"held_counted_at,omitempty"`
	// BlockedOmitted says the blocked persons took longer than the budget to list: Blocked is
	// empty and BlockedTotal -1.
	BlockedOmitted bool `json:"blocked_omitted,omitempty"`
	// Budget is OverviewConfig.Budget in seconds: what a dear read may take.
	BudgetSeconds float64 `json:"budget_seconds"`
	// Future counts handelingen still to be delivered registered more than
	// handeling.FutureSkew ahead of the database clock: each waits until its tsreg has passed.
	Future int64 `json:"future"`
	// FirstFuture is the earliest of them; nil when there is none.
	FirstFuture *FutureHandeling `json:"first_future"`
	// Oldest is the oldest undelivered handeling (te leveren or in levering) by (tsreg, id) of
	// those not registered in the future (tsreg <= GeneratedAt), so its age is never
	// negative; nil when there is none.
	Oldest *Undelivered `json:"oldest_undelivered"`
	// Blocked lists up to maxBlocked persons that cannot receive a new handeling now and have at
	// least one waiting; longest-blocked (oldest blocking handeling) first.
	Blocked []BlockedPerson `json:"blocked"`
	// BlockedTotal counts all such persons, also those beyond the list.
	BlockedTotal int64 `json:"blocked_total"`
	// Fouten lists up to maxFouten fout handelingen, newest (tsreg, id) first.
	Fouten []Fout `json:"fouten"`
	// Lease is the cluster's publication lease.
	Lease handeling.Lease `json:"lease"`
	// Horizon is what the publisher's horizon waits for: a handeling registered after it is not
	// published before it has passed.
	Horizon Horizon `json:"horizon"`
}

// Undelivered is a handeling not yet delivered.
type Undelivered struct {
	ID    int64     `json:"id"`
	Soort string    `json:"soort"`
	Tsreg time.Time `json:"tsreg"`
	// AgeSeconds is GeneratedAt - Tsreg.
	AgeSeconds float64 `json:"age_seconds"`
	// Statuslev is handeling.TeLeveren ("", NULL) or handeling.InLevering.
	Statuslev handeling.Status `json:"statuslev"`
}

// DeliveryDelay is how long the recent deliveries took from registration (tsreg) to delivery
// (tslev), a tsreg after its tslev counting 0: what afnemers feel.
type DeliveryDelay struct {
	// Deliveries counts the handelingen delivered in the window.
	Deliveries int64 `json:"deliveries"`
	// P50Seconds and P99Seconds are the median and the 99th percentile, in seconds.
	P50Seconds float64 `json:"p50_seconds"`
	P99Seconds float64 `json:"p99_seconds"`
}

// delayWindow is how far back DeliveryDelay looks.
const delayWindow = 5 * time.Minute

// FutureHandeling is a handeling still to be delivered with a tsreg in the future.
type FutureHandeling struct {
	ID    int64     `json:"id"`
	Soort string    `json:"soort"`
	Tsreg time.Time `json:"tsreg"`
	// AheadSeconds is Tsreg - GeneratedAt.
	AheadSeconds float64 `json:"ahead_seconds"`
}

// BlockedPerson is a person that cannot receive new handelingen now while some wait.
type BlockedPerson struct {
	PersoonID int64 `json:"persoon_id"`
	// BlockingID is the person's oldest handeling in levering or (strict policy) unreleased fout.
	BlockingID int64 `json:"blocking_id"`
	// BlockingStatus is handeling.InLevering or handeling.Fout.
	BlockingStatus handeling.Status `json:"blocking_status"`
	// Why reads "in levering since 12s" or "fout: <foutreden>".
	Why string `json:"why"`
	// Waiting counts the person's handelingen still to be delivered (soort not excluded).
	Waiting int64 `json:"waiting"`
}

// Fout is a handeling in fout.
type Fout struct {
	ID        int64     `json:"id"`
	Soort     string    `json:"soort"`
	Tsreg     time.Time `json:"tsreg"`
	Foutreden string    `json:"foutreden"`
	// Vrijgegeven is when an operator released it; nil while not released.
	Vrijgegeven *time.Time `json:"vrijgegeven"`
	Personen    []int64    `json:"personen"`
}

// Limits of the overview's lists.
const (
	maxBlocked = 50
	maxFouten  = 200
)

// ReadOverview reads the overview in one read-only repeatable-read transaction, so all numbers
// belong to the same snapshot. cfg must describe the running publisher; an invalid Layout or
// FoutPolicy is an error wrapping ErrConfig.
func ReadOverview(ctx context.Context, db *sqlx.DB, cfg OverviewConfig) (Overview, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return Overview{}, err
	}
	o := Overview{Cluster: cfg.Cluster, FoutPolicy: cfg.FoutPolicy, Excluded: cfg.Excluded, BudgetSeconds: cfg.Budget.Seconds()}
	tx, err := db.BeginTxx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return o, fmt.Errorf("overview: begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only

	st := statementsFor(cfg.Layout)
	excluded := pq.Array(cfg.Excluded)
	n, err := handeling.ReadCounts(ctx, tx, cfg.Layout, cfg.Excluded, false)
	if err != nil {
		return o, fmt.Errorf("overview: %w", err)
	}
	o.GeneratedAt, o.Backlog, o.InLevering, o.Fout = n.At, n.Backlog, n.InLevering, n.Fout
	o.Future = n.Future
	o.Geleverd = -1
	if _, err := withinBudget(ctx, tx, cfg, func() error {
		return tx.GetContext(ctx, &o.Geleverd, st.geleverdSQL)
	}); err != nil {
		return o, fmt.Errorf("overview: geleverd: %w", err)
	}

	// Deliveries per minute, through the index on tslev of the delivered ones (migration 0005):
	// only the last 10 minutes are read, never the delivered history.
	o.DeliveredPerMinute = make([]int64, 10)
	rows, err := tx.QueryContext(ctx, st.deliveredPerMinuteSQL)
	if err != nil {
		return o, fmt.Errorf("overview: deliveries per minute: %w", err)
	}
	for rows.Next() {
		var ago int
		var n int64
		if err := rows.Scan(&ago, &n); err != nil {
			rows.Close()
			return o, fmt.Errorf("overview: deliveries per minute: %w", err)
		}
		o.DeliveredPerMinute[9-ago] = n
	}
	if err := closeRows(rows); err != nil {
		return o, fmt.Errorf("overview: deliveries per minute: %w", err)
	}
	o.DeliveredLastMinute = o.DeliveredPerMinute[9]
	if o.DeliveryDelay, err = readDeliveryDelay(ctx, tx, st); err != nil {
		return o, err
	}

	var old Undelivered
	err = tx.QueryRowxContext(ctx, st.oldestUndeliveredSQL, excluded).
		Scan(&old.ID, &old.Soort, &old.Tsreg, &old.AgeSeconds, &old.Statuslev)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return o, fmt.Errorf("overview: oldest undelivered: %w", err)
	default:
		o.Oldest = &old
	}
	if o.Future > 0 {
		// The earliest: the first entry of the index of open work after now() + FutureSkew.
		var f FutureHandeling
		err = tx.QueryRowxContext(ctx, st.firstFutureSQL, excluded, handeling.FutureSkew.Seconds()).Scan(&f.ID, &f.Soort, &f.Tsreg, &f.AheadSeconds)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return o, fmt.Errorf("overview: first in the future: %w", err)
		default:
			o.FirstFuture = &f
		}
	}
	if err := readHeld(ctx, tx, cfg, st, &o); err != nil {
		return o, err
	}
	o.BlockedTotal = -1
	over, err := withinBudget(ctx, tx, cfg, func() error {
		var err error
		o.Blocked, o.BlockedTotal, err = readBlocked(ctx, tx, cfg, maxBlocked)
		return err
	})
	if err != nil {
		return o, err
	}
	if over {
		o.Blocked, o.BlockedTotal, o.BlockedOmitted = nil, -1, true
	}
	if o.Fouten, err = listFout(ctx, tx, st, maxFouten); err != nil {
		return o, err
	}
	if o.Lease, err = handeling.ReadLease(ctx, tx, cfg.Cluster); err != nil {
		return o, fmt.Errorf("overview: %w", err)
	}
	if o.Horizon, err = readHorizon(ctx, tx, st); err != nil {
		return o, err
	}
	return o, nil
}

// readDeliveryDelay reads DeliveryDelay over the handelingen delivered in the last
// delayWindow, through the index on tslev of the delivered ones (migration 0005): it reads
// the window only, never the delivered history.
func readDeliveryDelay(ctx context.Context, q sqlx.QueryerContext, st *statements) (*DeliveryDelay, error) {
	var d DeliveryDelay
	var p50, p99 sql.NullFloat64
	err := q.QueryRowxContext(ctx, st.deliveryDelaySQL, delayWindow.Seconds()).Scan(&d.Deliveries, &p50, &p99)
	if err != nil {
		return nil, fmt.Errorf("overview: delivery delay: %w", err)
	}
	if d.Deliveries == 0 {
		return nil, nil
	}
	d.P50Seconds, d.P99Seconds = p50.Float64, p99.Float64
	return &d, nil
}

// readBlocked lists the persons held up now: those of a handeling that holds back its persons
// by the publisher's own rule (publicatie_blocks: in levering, or under the strict policy an
// unreleased fout one) with at least one waiting handeling. The blocking handelingen are few
// (at most MAXINLEVERING plus the fout ones); each person's waiting ones are counted through
// admhnd_persoon's persoon index (kern: kern.his_persafgeleidadministrati's). cfg has its
// defaults.
func readBlocked(ctx context.Context, q sqlx.QueryerContext, cfg OverviewConfig, limit int) ([]BlockedPerson, int64, error) {
	rows, err := q.QueryContext(ctx, statementsFor(cfg.Layout).blockedPersonsSQL, pq.Array(cfg.Excluded), cfg.FoutPolicy == handeling.Strict, limit)
	if err != nil {
		return nil, 0, fmt.Errorf("overview: blocked persons: %w", err)
	}
	var out []BlockedPerson
	var total int64
	for rows.Next() {
		var b BlockedPerson
		var reden string
		var since float64
		if err := rows.Scan(&b.PersoonID, &b.BlockingID, &b.BlockingStatus, &reden, &since, &b.Waiting, &total); err != nil {
			rows.Close()
			return nil, 0, fmt.Errorf("overview: blocked persons: %w", err)
		}
		switch {
		case b.BlockingStatus == handeling.Fout && reden != "":
			b.Why = "fout: " + reden
		case b.BlockingStatus == handeling.Fout:
			b.Why = "fout"
		case since >= 0:
			b.Why = "in levering since " + FormatAge(since)
		default:
			b.Why = "in levering"
		}
		out = append(out, b)
	}
	if err := closeRows(rows); err != nil {
		return nil, 0, fmt.Errorf("overview: blocked persons: %w", err)
	}
	return out, total, nil
}

func closeRows(rows *sql.Rows) error {
	err := rows.Err()
	if cerr := rows.Close(); err == nil {
		err = cerr
	}
	return err
}

// FormatAge renders a number of seconds for people: "850ms", "42s", "3m05s", "2h07m", "3d04h";
// a negative number reads "never".
func FormatAge(seconds float64) string {
	if seconds < 0 {
		return "never"
	}
	d := time.Duration(seconds * float64(time.Second))
	switch {
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%02dh", int(d.Hours())/24, int(d.Hours())%24)
}
