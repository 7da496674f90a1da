package levering

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/brp/levering/broker"
	"github.com/brp/levering/handeling"
	"github.com/brp/levering/internal/fault"
	"github.com/brp/levering/internal/setting"
)

// Config configures a Consumer. Zero fields take the documented defaults.
type Config struct {
	// Queue is the publication queue. Default handeling.PublicationQueue.
	Queue string
	// VerzendingQueue receives delivered handelingen. Default handeling.VerzendingQueue.
	VerzendingQueue string
	// DeadLetterQueue receives publications that cannot be read (bad input), with the reason
	// in a header. Default handeling.DeadLetterQueue.
	DeadLetterQueue string
	// Layout says which tables hold the handelingen (BRP_DATABASE_LAYOUT). Default
	// handeling.Contract.
	Layout handeling.Layout
	// Excluded lists soorten that are never delivered: a publication of one (sent by hand, or
	// by a publisher configured otherwise) is set aside, its handeling untouched. By the name
	// a soort has in Layout; nil means Layout's default (handeling.Layout.DefaultExcluded); an
	// empty non-nil slice excludes nothing. The same setting as the publisher's
	// (BRP_LEVERING_ADMHNDPUBLICATIE_EXCLUDED).
	Excluded []string
	// FoutPolicy decides whether a fout handeling that no operator released holds back the
	// later handelingen of its persons here too, as it does at the publisher: the same setting
	// (BRP_LEVERING_ADMHNDPUBLICATIE_FOUTPOLICY). Default handeling.Strict.
	FoutPolicy handeling.FoutPolicy
	// Workers is how many batches this process handles at once. Default 2.
	Workers int
	// Batch is the most publications a worker handles in one database transaction and one
	// broker transaction. A worker never waits to fill a batch: it takes what is already
	// prefetched. Default 50.
	Batch int
	// Prefetch is how many unacknowledged publications the broker may push to this process,
	// shared evenly (rounded up) by the workers' subscriptions.
	// Default Workers*Batch, so every worker can fill a batch, but at most 100,000.
	Prefetch int
	// ShutdownGrace is how long, after ctx ends, a worker may still finish the publication it
	// holds (and ack it) before it is abandoned and goes back to the queue. Default 10s.
	ShutdownGrace time.Duration
	// BatchTimeout is the longest a worker may hold a batch. A batch held longer (the
	// database unreachable from this process only, a dependency that hangs) is logged with
	// the step it is stuck in, makes /readyz answer 503, and is handed back: the process drops
	// its broker connections, so the broker gives the publications to other consumers, and
	// connects again. Default DefaultBatchTimeout.
	BatchTimeout time.Duration
	// Broker says how to reach the broker. With several nodes (a network of brokers) the
	// workers subscribe on the node Broker.RandomStart picks, so that consumers spread, but
	// every consumer sends its verzending messages to the first listed node that answers:
	// one queue in one broker, in the order the consumers' sends were confirmed. Sent to
	// several brokers, they would reach a reader through the brokers' bridges, and a later
	// handeling of a person could overtake an earlier one on the way.
	Broker broker.Config
	// Registerer receives the consumer's metrics; nil keeps them unregistered.
	Registerer prometheus.Registerer
	// Hooks are fault seams for tests; the zero value does nothing.
	Hooks Hooks
}

// Hooks are fault seams: tests use them to fail or kill at a precise step. Nil does nothing.
type Hooks struct {
	// AfterLock runs after a batch's rows are locked, checked and updated (not committed),
	// before the verzending send; an error rolls back and hands the batch back.
	AfterLock fault.Hook
	// AfterVerzending runs after a batch's verzending messages were confirmed, before the
	// database commit; an error rolls the transaction back and hands the batch back.
	AfterVerzending fault.Hook
	// AfterCommit runs after a batch's database commit, before the acks.
	AfterCommit fault.Hook
}

// Defaults of Config.Workers and Config.Batch, chosen with the benchmark (docs/bench).
const (
	DefaultWorkers = 2
	DefaultBatch   = 50
)

// DefaultBatchTimeout is Config.BatchTimeout's default: above what a healthy batch takes by
// orders of magnitude (milliseconds), and short enough that a batch handed back is delivered
// by another consumer within 30 s, well below the publisher's redelivery timeout.
const DefaultBatchTimeout = 20 * time.Second

// ErrConfig is wrapped by every Config validation error.
var ErrConfig = errors.New("levering: invalid config")

// WithDefaults returns c with every zero field set to its default, as New uses it.
func (c Config) WithDefaults() Config {
	c.setDefaults()
	return c
}

func (c *Config) setDefaults() {
	if c.Queue == "" {
		c.Queue = handeling.PublicationQueue
	}
	if c.VerzendingQueue == "" {
		c.VerzendingQueue = handeling.VerzendingQueue
	}
	if c.DeadLetterQueue == "" {
		c.DeadLetterQueue = handeling.DeadLetterQueue
	}
	if c.Excluded == nil {
		c.Excluded = c.Layout.DefaultExcluded()
	}
	if c.FoutPolicy == "" {
		c.FoutPolicy = handeling.Strict
	}
	if c.Workers == 0 {
		c.Workers = DefaultWorkers
	}
	if c.Batch == 0 {
		c.Batch = DefaultBatch
	}
	if c.Prefetch == 0 {
		c.Prefetch = min(c.Workers*c.Batch, maxPrefetch)
	}
	if c.ShutdownGrace == 0 {
		c.ShutdownGrace = 10 * time.Second
	}
	if c.BatchTimeout == 0 {
		c.BatchTimeout = DefaultBatchTimeout
	}
}

// The bounds of Config's numbers; cmd/mutatielevering's settings have the same. A value past
// one would not fail at start but later, or never work (Prefetch is a buffer of that many
// deliveries).
const (
	maxWorkers      = 64
	maxBatch        = 10_000
	maxPrefetch     = 100_000
	maxBatchTimeout = time.Hour
)

// Validate reports the first field of c (with its defaults) that New would refuse, as a
// *setting.Error naming the field.
func (c Config) Validate() error {
	c.setDefaults()
	return c.validate()
}

func (c Config) validate() error {
	bad := func(field string, v any, expected string, args ...any) error {
		return setting.Invalid(ErrConfig, field, v, expected, args...)
	}
	switch {
	case c.Workers < 0 || c.Workers > maxWorkers:
		return bad("Workers", c.Workers, "expected a positive number of at most %d", maxWorkers)
	case c.Batch < 0 || c.Batch > maxBatch:
		return bad("Batch", c.Batch, "expected a positive number of at most %d", maxBatch)
	case c.Prefetch < 0 || c.Prefetch > maxPrefetch:
		return bad("Prefetch", c.Prefetch, "expected a positive number of at most %d", maxPrefetch)
	case !c.FoutPolicy.Valid():
		return bad("FoutPolicy", c.FoutPolicy, "expected %s or %s", handeling.Strict, handeling.Skip)
	case !c.Layout.Valid():
		return bad("Layout", c.Layout, "expected %s or %s", handeling.Contract, handeling.Kern)
	case c.ShutdownGrace < 0:
		return bad("ShutdownGrace", c.ShutdownGrace, "expected a positive duration")
	case c.BatchTimeout < 0 || c.BatchTimeout > maxBatchTimeout:
		return bad("BatchTimeout", c.BatchTimeout, "expected a positive duration of at most %v", maxBatchTimeout)
	case c.Queue == c.VerzendingQueue || c.Queue == c.DeadLetterQueue:
		return bad("Queue", c.Queue, "expected a queue other than VerzendingQueue and DeadLetterQueue")
	}
	if err := c.Broker.Validate(); err != nil {
		return setting.Within("Broker", err)
	}
	return nil
}
