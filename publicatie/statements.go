package publicatie

import (
	"embed"

	"github.com/brp/levering/handeling"
	"github.com/brp/levering/internal/sqltext"
)

// The publisher's statements, each a complete text in sql/ that a reader can paste into psql;
// what the file's comment says of it is not repeated here. The rules they share (what is to be
// delivered, what blocks, the accepted tsreg) are SQL functions of the schema (migration 0013).
// The statements on publicatie_lease are package handeling's, shared with the status page.
//
//go:embed sql/*.sql
var sqlFiles embed.FS

var statements = sqltext.New(sqlFiles)

var (
	horizonSQL          = statements.Get("horizon.sql")
	horizonPrivilegeSQL = statements.Get("horizon_privilege.sql")
	roundTimeoutSQL     = statements.Get("round_timeout.sql")
	roundLocksSQL       = statements.Get("round_locks.sql")
	latePersonsSQL      = statements.Get("late_persons.sql")
	herleesSQL          = statements.Get("herlees.sql")
	leadSQL             = statements.Get("lead.sql")
	sleepingSQL         = statements.Get("set_sleeping.sql")
	intakeSQL           = statements.Get("intake.sql")
	intakeDefaultSQL    = statements.Get("intake_default.sql")
	checksumSQL         = statements.Get("checksum.sql")
	checksumDefaultSQL  = statements.Get("checksum_default.sql")
	blockedSQL          = statements.Get("blocked.sql")
	holdsSQL            = statements.Get("holds.sql")
	holdsChecksumSQL    = statements.Get("holds_checksum.sql")
	foutChangesSQL      = statements.Get("fout_changes.sql")
	countInLeveringSQL  = statements.Get("count_in_levering.sql")
	staleSQL            = statements.Get("stale.sql")
	touchStaleSQL       = statements.Get("touch_stale.sql")
	markSQL             = statements.Get("mark.sql")
	setBackSQL          = statements.Get("set_back.sql")
	refuseOddTsregSQL   = statements.Get("refuse_odd_tsreg.sql")
	futureSQL           = statements.Get("future.sql")
)

// roundSQL are the statements of a round that run prepared (see package prepared): not
// intakeSQL and checksumSQL, whose plans depend on their exclusion list, nor roundLocksSQL,
// which must be planned each time.
var roundSQL = []string{handeling.LeaseRenewSQL, roundTimeoutSQL, horizonSQL, countInLeveringSQL, staleSQL, herleesSQL, intakeDefaultSQL,
	foutChangesSQL, blockedSQL, touchStaleSQL, markSQL, latePersonsSQL}
