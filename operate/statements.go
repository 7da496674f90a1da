package operate

import (
	"embed"

	"github.com/brp/levering/internal/sqltext"
)

// The operator pages' statements, each a complete text in sql/; the rules they apply are the
// schema's SQL functions (migration 0013).
//
//go:embed sql/*.sql
var sqlFiles embed.FS

var statements = sqltext.New(sqlFiles)

var (
	deliveredPerMinuteSQL = statements.Get("delivered_per_minute.sql")
	deliveryDelaySQL      = statements.Get("delivery_delay.sql")
	oldestUndeliveredSQL  = statements.Get("oldest_undelivered.sql")
	firstFutureSQL        = statements.Get("first_future.sql")
	blockedPersonsSQL     = statements.Get("blocked_persons.sql")
	horizonSQL            = statements.Get("horizon.sql")
	listFoutSQL           = statements.Get("list_fout.sql")
	showSQL               = statements.Get("show.sql")
	auditSQL              = statements.Get("audit.sql")
	heldBackSQL           = statements.Get("held_back.sql")
	overtakenSQL          = statements.Get("overtaken.sql")
	retrySQL              = statements.Get("retry.sql")
	releaseSQL            = statements.Get("release.sql")
	lockForActionSQL      = statements.Get("lock_for_action.sql")
	recordActionSQL       = statements.Get("record_action.sql")
	notifySQL             = statements.Get("notify.sql")
)
