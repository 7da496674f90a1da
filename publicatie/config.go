// Package publicatie is the publisher: every round it picks the oldest handelingen that may be
// delivered without overtaking an older handeling of any of their persons, marks them
// in_levering and puts them on the publication queue in one broker transaction before it
// commits the database. Only the holder of the cluster's lease publishes.
package publicatie

import (
	"errors"
	"os"
	"strconv"
	"time"

	"github.com/lib/pq"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/brp/levering/broker"
	"github.com/brp/levering/handeling"
	"github.com/brp/levering/internal/setting"
)

// Config configures a Publisher. Zero fields take the documented defaults.
type Config struct {
	// Delay is the pause after a round that found nothing more to do (seed: fixedDelay).
	// Default 5s.
	Delay time.Duration
	// Limit is the most handelingen (not rows) read per round: taken into the leader's view of
	// the open work, which it keeps across rounds. Default 5000.
	Limit int
	// ViewSize is the most handelingen the view holds: the oldest ViewSize still to be
	// delivered. A person whose oldest one lies beyond it waits until the view has room.
	// Default DefaultViewSize.
	ViewSize int
	// ViewBytes bounds the view's memory: the intake stops before the handeling that would
	// take the view's estimate past it (128 bytes a handeling, 32 a person of it, 96 a person
	// in the view, 112 a parked person: an upper bound of the heap, TestViewBytesBoundTheHeap;
	// 2,000 handelingen of 500 new persons each take 130 MB, 32 MiB holds 520). One handeling
	// larger than the room left is still taken in when it is next, so the view holds at most
	// ViewBytes plus one handeling. Default DefaultViewBytes.
	ViewBytes int
	// PersonCap is the most handelingen of one person the view holds. Later ones of that
	// person (and of every person sharing a handeling with them) are parked: read, counted,
	// not kept, and read again once the person's first half has been delivered. A person
	// blocked by a fout under the strict policy so holds at most PersonCap places; the view
	// fills with blocked work only when ViewSize/PersonCap persons (100 by default) are blocked
	// with full queues. Default DefaultPersonCap.
	PersonCap int
	// MaxInLevering caps the handelingen in_levering at any moment. Default 1000.
	MaxInLevering int
	// GroupSize is the most handelingen one publication carries: a ready handeling and the
	// later ones of the same persons that travel with it (a group, docs/contract.md section 3),
	// delivered by one consumer in one transaction in their order. 1 publishes every
	// handeling alone. Default DefaultGroupSize (1 with FixedDelay).
	GroupSize int
	// GroupBytes bounds a group's publication body (an estimate: 32 bytes a handeling, 20 a
	// person); a group's first handeling goes whatever its size. Default DefaultGroupBytes.
	GroupBytes int
	// Queue is the publication queue. Default handeling.PublicationQueue.
	Queue string
	// RedeliveryTimeout is how long a handeling may stay in_levering before the publisher puts
	// it on the queue again (its message was lost or dead-lettered). Consumers absorb the
	// duplicate if the first message was only slow. Default DefaultRedeliveryTimeout.
	RedeliveryTimeout time.Duration
	// MaxLead bounds how far before its transaction's start bijhouding's tsreg may lie and
	// still be ordinary (the application server's clock read before its BEGIN, and behind the
	// database's): the leader learns the lead and holds its horizon back by it, up to MaxLead
	// (lead.go). A registration with a larger lead is late: taken in behind the view's stand,
	// and should a newer handeling of its persons be delivered first, it ends fout
	// (handeling.FoutOvertaken) rather than reaching afnemers out of order. Default
	// DefaultMaxLead.
	MaxLead time.Duration
	// LeadCover is the share of registrations whose lead the margin covers (lead.go). Default
	// DefaultLeadCover (0.9): the margin covers the leads of all but the one in ten
	// registrations that waited longest between reading their application server's clock and
	// BEGIN (a wait for a connection or a CPU on a busy application host), so that those
	// stragglers do not hold every handeling back by their lead. Such a straggler is late, and
	// ends fout ("ingehaald") only when a newer handeling of its persons, registered within its
	// wait, was delivered before it committed. 1 covers the highest lead of the last seconds:
	// only a registration whose lead exceeds what the leader has seen (a lead beyond MaxLead,
	// the first registrations of a clock that fell behind) is late, and on a busy host every
	// handeling waits for the worst wait. An application server whose clock is behind is
	// covered at either setting (its floor, leadsource.go). From 0.5 to 1.
	LeadCover float64
	// MaxWait bounds how long the horizon waits for an open transaction that registers
	// handelingen (it holds admhnd in row exclusive mode): a longer one no longer holds
	// publication back, and what it commits later takes the late path (migration 0015). Any
	// other transaction holds it for LateWriterGrace only. So a handeling waits for bijhouding
	// at most MaxWait plus the lead margin (at most MaxLead). At least LateWriterGrace. Default
	// DefaultMaxWait.
	MaxWait time.Duration
	// PersonlessGrace is how long after its tsreg (against the database clock, less the
	// lead margin: the horizon) a handeling without persons stays out of publication, for
	// persons a later transaction may still link to it (a bijhouding that writes the kern
	// layout's his rows in a second transaction). Once it is older it is published, and its
	// consumer sets it fout (handeling.FoutGeenPersonen); persons that arrive within it make
	// it an ordinary handeling. A handeling without persons holds nobody back, so only its
	// own fout waits. Default DefaultPersonlessGrace.
	PersonlessGrace time.Duration
	// Layout says which tables hold the handelingen (BRP_DATABASE_LAYOUT). Default
	// handeling.Contract.
	Layout handeling.Layout
	// Excluded lists soorten that are never published and never block anyone, by the name
	// their soort has in Layout (kern: kern.srtadmhnd.naam). Nil means Layout's default
	// (handeling.Layout.DefaultExcluded); an empty non-nil slice excludes nothing.
	Excluded []string
	// FoutPolicy decides whether fout handelingen block their persons. Default handeling.Strict.
	FoutPolicy handeling.FoutPolicy
	// Cluster names the polling cluster whose lease this publisher competes for. Default
	// handeling.Cluster ("default").
	Cluster string
	// LeaseTimeout is how long the cluster's polling activity may be silent before a follower takes
	// over. Default max(2*Delay, 10s); at least 10s.
	LeaseTimeout time.Duration
	// Standalone skips the lease: this process publishes whatever else runs. Only for a single
	// instance; two standalone publishers can deliver out of order.
	Standalone bool
	// Instance names this process in the lease. Default host-pid-random.
	Instance string
	// ListenURL, when set, is the database URL on which the publisher LISTENs for the
	// schema's notifications and runs a round at once when work appears or a handeling is
	// delivered; Delay is then only the idle fallback. Empty: no wake-ups.
	ListenURL string
	// ListenDialer makes the LISTEN connection (dbsession.ListenerDialer); nil: TCP with the
	// system's defaults.
	ListenDialer pq.Dialer
	// FixedDelay makes every round follow the previous one after Delay, as in the seed: no
	// wake-ups and no immediate follow-up after a full round, and (unless GroupSize says
	// otherwise) one handeling a publication. For comparison only.
	FixedDelay bool
	// Broker says how to reach the broker.
	Broker broker.Config
	// Registerer receives the publisher's metrics; nil keeps them unregistered.
	Registerer prometheus.Registerer
	// Hooks are fault seams for tests; the zero value does nothing.
	Hooks Hooks
}

// ErrConfig is wrapped by every Config validation error.
var ErrConfig = errors.New("publicatie: invalid config")

// DefaultRedeliveryTimeout is Config.RedeliveryTimeout's default. It is the last resort, for
// publications the broker lost or dead-lettered: a consumer that froze or was cut off holding
// one hands it back sooner, through the broker (3 x the STOMP heart-beat, 15 s by default) and
// its batch timeout (20 s by default), so the republication does not race those.
const DefaultRedeliveryTimeout = time.Minute

// DefaultMaxWait is Config.MaxWait's default: far longer than an ordinary registration's
// transaction (milliseconds), short enough that a long one holds delivery back for two seconds.
// publicatie_horizon writes it in for a database no leader has set MAXWAIT in yet
// (TestDefinitionsUseGosConstants).
const DefaultMaxWait = 2 * time.Second

// LateWriterGrace is how long any transaction holds back the horizon, whether it registers or
// not (publicatie_horizon writes it in, and the registration triggers its half;
// TestDefinitionsUseGosConstants holds both against this): migration 0011 calls a transaction
// whose first registration comes more than half of it after its start a late writer, and
// migration 0015 records what a transaction commits more than half of it after its start. The
// other half covers the time between a round's clock reading and its look at
// pg_stat_activity, and a commit's becoming visible.
const LateWriterGrace = time.Second

// DefaultPersonlessGrace is Config.PersonlessGrace's default: persons committed a few seconds
// after their handeling (seen: up to 2 s in the kern layout) are well inside it.
const DefaultPersonlessGrace = 30 * time.Second

// DefaultViewSize is Config.ViewSize's default: about what DefaultViewBytes holds of
// handelingen of one or two persons.
const DefaultViewSize = 100_000

// DefaultViewBytes is Config.ViewBytes's default: 32 MiB, about 100,000 handelingen of two
// persons that have a few each, or 520 of 500 persons that have one each. The publisher's
// heap is about twice its live data (GOGC).
const DefaultViewBytes = 32 << 20

// DefaultGroupSize is Config.GroupSize's default: a person's queue of 10,000 travels in 100
// publications instead of 10,000 (docs/design.md, Groups; measured in docs/performance.md).
// Consumers of a release before groups deliver only a group's first handeling: upgrade them
// first (docs/operations.md, Upgrade).
const DefaultGroupSize = 100

// DefaultGroupBytes is Config.GroupBytes's default: 64 KiB, far below what brokers accept
// in a message, and a few thousand persons.
const DefaultGroupBytes = 64 << 10

// DefaultPersonCap is Config.PersonCap's default.
const DefaultPersonCap = 1000

// MinLeaseTimeout is the shortest LeaseTimeout accepted (the seed's minimum).
const MinLeaseTimeout = 10 * time.Second

// maxCluster bounds Cluster's length: it is a key of the lease table.
const maxCluster = 200

// WithDefaults returns c with every zero field set to its default, as New uses it.
func (c Config) WithDefaults() Config {
	c.setDefaults()
	return c
}

func (c *Config) setDefaults() {
	if c.Delay == 0 {
		c.Delay = 5 * time.Second
	}
	if c.Limit == 0 {
		c.Limit = 5000
	}
	if c.MaxInLevering == 0 {
		c.MaxInLevering = 1000
	}
	if c.ViewSize == 0 {
		c.ViewSize = DefaultViewSize
	}
	if c.ViewBytes == 0 {
		c.ViewBytes = DefaultViewBytes
	}
	if c.PersonCap == 0 {
		c.PersonCap = DefaultPersonCap
	}
	if c.GroupSize == 0 {
		c.GroupSize = DefaultGroupSize
		if c.FixedDelay {
			c.GroupSize = 1 // the seed's behaviour: one handeling a publication
		}
	}
	if c.GroupBytes == 0 {
		c.GroupBytes = DefaultGroupBytes
	}
	if c.Queue == "" {
		c.Queue = handeling.PublicationQueue
	}
	if c.RedeliveryTimeout == 0 {
		c.RedeliveryTimeout = DefaultRedeliveryTimeout
	}
	if c.MaxLead == 0 {
		c.MaxLead = DefaultMaxLead
	}
	if c.LeadCover == 0 {
		c.LeadCover = DefaultLeadCover
	}
	if c.MaxWait == 0 {
		c.MaxWait = DefaultMaxWait
	}
	if c.PersonlessGrace == 0 {
		c.PersonlessGrace = DefaultPersonlessGrace
	}
	if c.Excluded == nil {
		c.Excluded = c.Layout.DefaultExcluded()
	}
	if c.FoutPolicy == "" {
		c.FoutPolicy = handeling.Strict
	}
	if c.Cluster == "" {
		c.Cluster = handeling.Cluster
	}
	if c.LeaseTimeout == 0 {
		c.LeaseTimeout = max(2*c.Delay, MinLeaseTimeout)
	}
	if c.Broker.OpTimeout == 0 {
		c.Broker.OpTimeout = broker.DefaultOpTimeout
	}
	if c.Instance == "" {
		host, _ := os.Hostname()
		c.Instance = host + "-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano()%1e6, 36)
	}
}

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
	count := func(field string, v, most int) error {
		if v < 0 || v > most {
			return bad(field, v, "expected a number from 1 to %d", most)
		}
		return nil
	}
	duration := func(field string, v, least, most time.Duration) error {
		if v < least || v > most {
			return bad(field, v, "expected a duration from %v to %v", least, most)
		}
		return nil
	}
	for _, err := range []error{
		duration("Delay", c.Delay, 0, time.Hour),
		count("Limit", c.Limit, 1_000_000),
		count("ViewSize", c.ViewSize, 10_000_000),
		count("ViewBytes", c.ViewBytes, 64<<30),
		count("PersonCap", c.PersonCap, 10_000_000),
		count("MaxInLevering", c.MaxInLevering, 1_000_000),
		count("GroupSize", c.GroupSize, 10_000),
		count("GroupBytes", c.GroupBytes, 64<<20),
		duration("MaxLead", c.MaxLead, 0, time.Minute),
		duration("MaxWait", c.MaxWait, LateWriterGrace, time.Minute),
		duration("PersonlessGrace", c.PersonlessGrace, 0, time.Hour),
		duration("RedeliveryTimeout", c.RedeliveryTimeout, 0, 24*time.Hour),
		duration("LeaseTimeout", c.LeaseTimeout, MinLeaseTimeout, time.Hour),
	} {
		if err != nil {
			return err
		}
	}
	switch {
	case !(c.LeadCover >= 0.5 && c.LeadCover <= 1):
		return bad("LeadCover", c.LeadCover, "expected a share from 0.5 to 1")
	case !c.Layout.Valid():
		return bad("Layout", c.Layout, "expected %s or %s", handeling.Contract, handeling.Kern)
	case !c.FoutPolicy.Valid():
		return bad("FoutPolicy", c.FoutPolicy, "expected %s or %s", handeling.Strict, handeling.Skip)
	case len(c.Cluster) > maxCluster:
		return bad("Cluster", c.Cluster, "expected a cluster name of at most %d characters", maxCluster)
	}
	if err := c.Broker.Validate(); err != nil {
		return setting.Within("Broker", err)
	}
	return nil
}
