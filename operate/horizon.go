package operate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"
)

// Horizon is what holds the publisher's horizon back now (publicatie.readHorizon): the lead
// margin for bijhouding's tsreg, and the oldest open transaction that may still register an
// older handeling (the view publicatie_horizon, which the publisher reads too).
type Horizon struct {
	// WaitSeconds is how far the horizon lies behind the database clock: the margin and the
	// holding transaction's age.
	WaitSeconds float64 `json:"wait_seconds"`
	// MarginSeconds is the lead margin the leader learned, MaxLeadSeconds its bound.
	MarginSeconds  float64 `json:"margin_seconds"`
	MaxLeadSeconds float64 `json:"max_lead_seconds"`
	// MaxWaitSeconds is how long a transaction that registered holds it at most (MAXWAIT);
	// any other transaction holds it for a second.
	MaxWaitSeconds float64 `json:"max_wait_seconds"`
	// Holder is the oldest open transaction that holds it; nil when none does.
	Holder *HorizonTransaction `json:"holder"`
	// OpenWriters are the open transactions that linked handelingen to persons: those
	// persons' work waits until they end (docs/design.md, "Open writers").
	OpenWriters OpenWriters `json:"open_writers"`
}

// OpenWriters counts the open bijhouding transactions that linked handelingen to persons.
type OpenWriters struct {
	Transactions int `json:"transactions"`
	// Persons is how many persons' work waits for them (of a bulk writer only its first 17: it
	// holds the whole horizon).
	Persons int `json:"persons"`
	// OldestSeconds is the age of the oldest of them; 0 when there is none.
	OldestSeconds float64 `json:"oldest_seconds"`
}

// HorizonTransaction is an open transaction of the database as pg_stat_activity shows it.
type HorizonTransaction struct {
	PID             int     `json:"pid"`
	ApplicationName string  `json:"application_name"`
	State           string  `json:"state"`
	WaitEvent       string  `json:"wait_event"`
	AgeSeconds      float64 `json:"age_seconds"`
	// Registers says it has registered a handeling (it holds admhnd in row exclusive mode);
	// nil for a transaction younger than a second, which holds the horizon whatever it does:
	// the horizon does not look it up (publicatie_horizon), so that a round with only young
	// transactions open reads pg_locks once (issue 51).
	Registers *bool `json:"registers"`
	// Bulk says it linked more than 16 persons, or registered more than 16 handelingen in one
	// statement: it holds the horizon until it ends.
	Bulk bool `json:"bulk"`
}

// readHorizon reads the Horizon.
func readHorizon(ctx context.Context, q sqlx.QueryerContext, st *statements) (Horizon, error) {
	var hz Horizon
	var pid sql.NullInt64
	var app, state, wait sql.NullString
	var age sql.NullFloat64
	var registers sql.NullBool
	var bulk bool
	err := q.QueryRowxContext(ctx, st.horizonSQL).Scan(&hz.MarginSeconds, &hz.MaxLeadSeconds, &hz.MaxWaitSeconds,
		&pid, &app, &state, &wait, &age, &registers, &bulk,
		&hz.OpenWriters.Transactions, &hz.OpenWriters.Persons, &hz.OpenWriters.OldestSeconds)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return hz, nil
	case err != nil:
		return hz, fmt.Errorf("overview: horizon: %w", err)
	}
	hz.WaitSeconds = hz.MarginSeconds
	if pid.Valid {
		hz.Holder = &HorizonTransaction{PID: int(pid.Int64), ApplicationName: app.String, State: state.String,
			WaitEvent: wait.String, AgeSeconds: age.Float64, Bulk: bulk}
		if registers.Valid {
			hz.Holder.Registers = &registers.Bool
		}
		hz.WaitSeconds += age.Float64
	}
	return hz, nil
}

// Holding says why the transaction holds the horizon and for how long at most, maxWait being
// MAXWAIT in seconds: the status page's and the text overview's words.
func (t *HorizonTransaction) Holding(maxWait float64) string {
	switch {
	case t.Bulk:
		return "a bulk writer (linked more than 16 persons): holds it until it ends"
	case t.Registers == nil:
		return fmt.Sprintf("begun under a second ago: holds it for 1s, for %s at most if it registers", FormatAge(maxWait))
	case *t.Registers && t.State == "active":
		return fmt.Sprintf("registered handelingen: holds it while it runs a statement, else for %s at most", FormatAge(maxWait))
	case *t.Registers:
		return fmt.Sprintf("registered handelingen: holds it for %s at most", FormatAge(maxWait))
	}
	return "registered nothing yet: holds it for 1s at most"
}
