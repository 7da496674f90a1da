package levering

import (
	"context"
	"log/slog"

	"github.com/jmoiron/sqlx"

	"github.com/brp/levering/broker"
	"github.com/brp/levering/internal/prepared"
)

// sender sends messages in one broker transaction confirmed by the broker: the session's
// sending connection (*broker.Conn).
type sender interface {
	Send(ctx context.Context, msgs ...broker.Message) error
}

// executor runs a worker's batches: it reads their publications, runs the database
// transaction that checks, decides and delivers (retrying what the database failed), sends the
// verzendingen and sets aside what it cannot read, and counts what it did. It gets everything it
// uses from the Consumer that made it (Consumer.worker), not the Consumer itself.
type executor struct {
	sql   *statements     // of Config.Layout
	db    *sqlx.DB        // the batch's transaction, markOnderwegSQL, naming lock holders
	stmts *prepared.Cache // batchSQL, prepared once per connection
	send  sender          // verzending and dead-letter messages

	excluded        []string // soorten never delivered (Config.Excluded)
	strict          bool     // an unreleased fout holds back its persons (Config.FoutPolicy)
	verzendingQueue string
	deadLetterQueue string
	hooks           Hooks

	log *slog.Logger
	m   *metrics
	b   *batch // the batch in hand: its ids and step, for the watchdog
}
