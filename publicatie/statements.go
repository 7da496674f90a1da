package publicatie

import (
	"embed"

	"github.com/brp/levering/handeling"
	"github.com/brp/levering/internal/sqltext"
)

// The publisher's statements, each a complete text in sql/ that a reader can paste into psql;
// what the file's comment says of it is not repeated here. The rules they share (what is to be
// delivered, what blocks, the accepted tsreg) are SQL functions of the schema (migration 0013;
// the kern layout's in schema/kern). The statements on publicatie_lease are package
// handeling's, shared with the status page. sql/kern/ holds the kern layout's own statements
// (package sqltext): those on kern.admhnd and its persons.
//
//go:embed sql/*.sql sql/kern/*.sql
var sqlDir embed.FS

var files = sqltext.New(sqlDir)

// statements are the publisher's statements in one layout.
type statements struct {
	layout handeling.Layout

	horizonSQL          string
	horizonPrivilegeSQL string
	roundTimeoutSQL     string
	roundLocksSQL       string
	recordsSQL          string
	leadSQL             string
	sleepingSQL         string
	heldCountsSQL       string
	intakeSQL           string
	intakeDefaultSQL    string
	checksumSQL         string
	checksumDefaultSQL  string
	blockedSQL          string
	holdsSQL            string
	holdsChecksumSQL    string
	foutChangesSQL      string
	inLeveringSQL       string
	touchStaleSQL       string
	markSQL             string
	setBackSQL          string
	refuseOddTsregSQL   string
	futureSQL           string
	healSQL             string
}

func loadStatements(l handeling.Layout) *statements {
	get := func(name string) string { return files.GetIn(l.Dir(), name) }
	return &statements{
		layout:              l.Or(),
		horizonSQL:          get("horizon.sql"),
		horizonPrivilegeSQL: get("horizon_privilege.sql"),
		roundTimeoutSQL:     get("round_timeout.sql"),
		roundLocksSQL:       get("round_locks.sql"),
		recordsSQL:          get("records.sql"),
		leadSQL:             get("lead.sql"),
		sleepingSQL:         get("set_sleeping.sql"),
		heldCountsSQL:       get("held_counts.sql"),
		intakeSQL:           get("intake.sql"),
		intakeDefaultSQL:    get("intake_default.sql"),
		checksumSQL:         get("checksum.sql"),
		checksumDefaultSQL:  get("checksum_default.sql"),
		blockedSQL:          get("blocked.sql"),
		holdsSQL:            get("holds.sql"),
		holdsChecksumSQL:    get("holds_checksum.sql"),
		foutChangesSQL:      get("fout_changes.sql"),
		inLeveringSQL:       get("in_levering.sql"),
		touchStaleSQL:       get("touch_stale.sql"),
		markSQL:             get("mark.sql"),
		setBackSQL:          get("set_back.sql"),
		refuseOddTsregSQL:   get("refuse_odd_tsreg.sql"),
		futureSQL:           get("future.sql"),
		healSQL:             get("heal.sql"),
	}
}

var byLayout = handeling.LoadPerLayout(loadStatements)

// statementsFor returns the statements of layout l (zero: the contract's).
func statementsFor(l handeling.Layout) *statements { return byLayout.For(l) }

// roundSQL are the statements of a round that run prepared (see package prepared): not
// intakeSQL and checksumSQL, whose plans depend on their exclusion list, nor roundLocksSQL,
// which must be planned each time. refuseOddTsregSQL finds its rows at the two ends of an
// index of open work whatever the exclusion list (it only filters by it): planned every round,
// it cost more than it ran.
func (s *statements) roundSQL() []string {
	return []string{handeling.LeaseRenewSQL, s.roundTimeoutSQL, s.horizonSQL, s.inLeveringSQL, s.recordsSQL,
		s.refuseOddTsregSQL, s.intakeDefaultSQL, s.foutChangesSQL, s.blockedSQL, s.touchStaleSQL, s.markSQL}
}
