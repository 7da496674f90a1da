package operate

import (
	"embed"

	"github.com/brp/levering/handeling"
	"github.com/brp/levering/internal/sqltext"
)

// The operator pages' statements, each a complete text in sql/; the rules they apply are the
// schema's SQL functions (migration 0013; the kern layout's in schema/kern). sql/kern/ holds
// the kern layout's own statements (package sqltext): those on kern.admhnd and its persons;
// the others touch only the service's own tables and serve both layouts.
//
//go:embed sql/*.sql sql/kern/*.sql
var sqlDir embed.FS

var files = sqltext.New(sqlDir)

// statements are the operator pages' statements in one layout.
type statements struct {
	deliveredPerMinuteSQL string
	deliveryDelaySQL      string
	oldestUndeliveredSQL  string
	firstFutureSQL        string
	blockedPersonsSQL     string
	horizonSQL            string
	listFoutSQL           string
	showSQL               string
	auditSQL              string
	heldBackSQL           string
	overtakenSQL          string
	retrySQL              string
	releaseSQL            string
	lockForActionSQL      string
	recordActionSQL       string
	notifySQL             string
	selectFoutSQL         string
	retryManySQL          string
	releaseManySQL        string
	geleverdSQL           string
	leaderHeldSQL         string
}

func loadStatements(l handeling.Layout) *statements {
	get := func(name string) string { return files.GetIn(l.Dir(), name) }
	return &statements{
		deliveredPerMinuteSQL: get("delivered_per_minute.sql"),
		deliveryDelaySQL:      get("delivery_delay.sql"),
		oldestUndeliveredSQL:  get("oldest_undelivered.sql"),
		firstFutureSQL:        get("first_future.sql"),
		blockedPersonsSQL:     get("blocked_persons.sql"),
		horizonSQL:            get("horizon.sql"),
		listFoutSQL:           get("list_fout.sql"),
		showSQL:               get("show.sql"),
		auditSQL:              get("audit.sql"),
		heldBackSQL:           get("held_back.sql"),
		overtakenSQL:          get("overtaken.sql"),
		retrySQL:              get("retry.sql"),
		releaseSQL:            get("release.sql"),
		lockForActionSQL:      get("lock_for_action.sql"),
		recordActionSQL:       get("record_action.sql"),
		notifySQL:             get("notify.sql"),
		selectFoutSQL:         get("select_fout.sql"),
		retryManySQL:          get("retry_many.sql"),
		releaseManySQL:        get("release_many.sql"),
		geleverdSQL:           get("geleverd.sql"),
		leaderHeldSQL:         get("leader_held.sql"),
	}
}

var byLayout = handeling.LoadPerLayout(loadStatements)

// statementsFor returns the statements of layout l (zero: the contract's).
func statementsFor(l handeling.Layout) *statements { return byLayout.For(l) }
