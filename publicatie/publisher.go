package publicatie

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/brp/levering/broker"
	"github.com/brp/levering/handeling"
	"github.com/brp/levering/internal/backoff"
	"github.com/brp/levering/internal/dbsession"
	"github.com/brp/levering/internal/prepared"
)

// errDatabase and errBroker mark round failures of a dependency; the rest are the
// publisher's own (a hook, an encoding), logged as such rather than blamed on the broker.
var (
	errDatabase = errors.New("database")
	errBroker   = errors.New("broker")
)

func dbErr(err error) error { return fmt.Errorf("%w: %w", errDatabase, err) }

func brokerErr(err error) error { return fmt.Errorf("%w: %w", errBroker, err) }

// dependency names what a round failure was about, for logs and metrics: database, broker,
// or publicatie (neither: the process itself).
func dependency(err error) string {
	switch {
	case errors.Is(err, errDatabase):
		return "database"
	case errors.Is(err, errBroker):
		return "broker"
	}
	return "publicatie"
}

// ShutdownGrace is how long a round in progress may still run after Run's context ends.
const ShutdownGrace = 10 * time.Second

// StandaloneWarning is logged at start in standalone mode (after the IsyFact polling seed).
const StandaloneWarning = `standalone mode: no polling cluster lease is used and this instance always publishes; ` +
	`run exactly one publisher (Der Polling-Modus wurde auf "Standalone" gesetzt!)`

// Publisher runs publication rounds while it holds its cluster's lease.
type Publisher struct {
	cfg  Config
	sql  *statements // of cfg.Layout
	db   *sqlx.DB
	log  *slog.Logger
	lead *elector
	work *openWork
	wake chan struct{}

	m      *metrics
	dialer *broker.Dialer
	conn   *broker.Conn
	rounds atomic.Int64
	stmts  *prepared.Cache // roundSQL
	future *futureLog      // checkFuture's, made on its first call
	// warmRetry is when a follower tries the broker again after warmBroker failed.
	warmRetry time.Time
	// heldWritten are the held counts (handelingen, persons) reportHeld last wrote, in
	// heldEpoch, at heldAt.
	heldWritten [2]int
	heldEpoch   int64
	heldAt      time.Time
	// healedAt is when the leader last looked for fouts that heal (heal).
	healedAt time.Time
}

// New validates cfg and returns a Publisher; call Run to start it.
func New(db *sqlx.DB, cfg Config, log *slog.Logger) (*Publisher, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	dialer, err := broker.NewDialer(cfg.Broker)
	if err != nil {
		return nil, fmt.Errorf("%w: Broker: %w", ErrConfig, err)
	}
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(broker.NodeCollector(handeling.MetricsNamespace, dialer))
	}
	log = log.With(slog.String("cluster", cfg.Cluster), slog.String("instance", cfg.Instance))
	m := newMetrics(cfg.Registerer)
	m.waitBound.Set((cfg.MaxWait + cfg.MaxLead).Seconds())
	return &Publisher{
		cfg: cfg,
		sql: statementsFor(cfg.Layout),
		db:  db,
		log: log,
		lead: &elector{lease: &lease{db: db, cluster: cfg.Cluster, holder: cfg.Instance, leaseTimeout: cfg.LeaseTimeout},
			leaseTimeout: cfg.LeaseTimeout, log: log, m: m},
		work:   newOpenWork(cfg, m, log),
		wake:   make(chan struct{}, 1),
		m:      m,
		stmts:  prepared.New(db.DB),
		dialer: dialer,
	}, nil
}

// BrokerNode returns the broker node (host:port) the publisher sends to (a follower: the one it
// keeps a connection to for a takeover), "" before it first connected and after that
// connection was lost.
func (p *Publisher) BrokerNode() string { return p.dialer.Current() }

// Config returns the configuration with defaults filled in.
func (p *Publisher) Config() Config { return p.cfg }

// Wake makes an idle publisher start its next round now instead of after Delay.
func (p *Publisher) Wake() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Leader reports whether this instance publishes now (always true in standalone mode).
func (p *Publisher) Leader() bool { return p.cfg.Standalone || p.lead.current() > 0 }

// RoundsCommitted counts the rounds that committed at least one handeling.
func (p *Publisher) RoundsCommitted() int64 { return p.rounds.Load() }

// Status is what an operator needs to know about this publisher and its cluster.
type Status struct {
	handeling.Lease
	Instance   string `json:"instance"`
	Leader     bool   `json:"leader"`
	Standalone bool   `json:"standalone"`
}

// Status reads the cluster's lease and says whether this instance leads.
func (p *Publisher) Status(ctx context.Context) (Status, error) {
	ls, err := p.lead.lease.state(ctx)
	return Status{Lease: ls, Instance: p.cfg.Instance, Leader: p.Leader(), Standalone: p.cfg.Standalone}, err
}

// Run publishes until ctx ends, then hands the lease over and returns nil. Database and broker
// outages are logged and waited out; they do not end Run.
func (p *Publisher) Run(ctx context.Context) error {
	if p.cfg.Standalone {
		p.log.Warn(StandaloneWarning)
		p.m.leader.Set(1)
	} else {
		go p.lead.keep(ctx)
	}
	defer p.shutdown()
	if p.cfg.ListenURL != "" && !p.cfg.FixedDelay {
		go p.listen(ctx)
	}
	p.checkHorizonPrivilege(ctx)
	p.log.Info("publisher started", slog.Duration("delay", p.cfg.Delay), slog.Int("limit", p.cfg.Limit),
		slog.Int("max_in_levering", p.cfg.MaxInLevering), slog.Duration("lease_timeout", p.cfg.LeaseTimeout),
		slog.String("queue", p.cfg.Queue))
	loop := roundLoop{retry: backoff.New(100*time.Millisecond, 10*time.Second)}
	for ctx.Err() == nil {
		p.checkFuture(ctx)
		more, sleep, err := p.step(ctx)
		if ctx.Err() != nil {
			return nil
		}
		wait, again := p.next(&loop, more, sleep, err)
		if again {
			continue
		}
		// Wake-ups are for the leader; a follower only checks the lease every poll interval.
		wake := p.wake
		if !p.Leader() {
			wait, wake = p.pollInterval(), nil
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		case <-wake:
		}
	}
	return nil
}

// roundLoop is what Run remembers between rounds: the failure being retried, and the wait
// before the next try.
type roundLoop struct {
	failing error
	retry   *backoff.Backoff
}

// next says, after a round that returned more, sleep and err, how long to wait before the next
// one, or that it follows at once (again). A failure is logged once until rounds succeed again.
func (p *Publisher) next(l *roundLoop, more, sleep bool, err error) (wait time.Duration, again bool) {
	switch {
	case err != nil && dbsession.IsDeadlock(err):
		// The database broke a cycle of lock waits by ending this round: the other session
		// (an operator's transaction, DDL) goes on, and the round can run again at once.
		// No outage: nothing is counted as one, and the detection itself took
		// deadlock_timeout, so this never spins. Rounds take their locks in an order a
		// REINDEX cannot cross (locks.go).
		p.log.Warn("publication round ended by a deadlock with another session's locks; running it again",
			slog.Any("error", err), slog.String("detail", dbsession.DeadlockDetail(err)))
		return 0, true
	case err != nil:
		if l.failing == nil {
			p.log.Error("publication round failed, retrying", slog.String("dependency", dependency(err)), slog.Any("error", err))
			if d := dependency(err); d != "publicatie" {
				p.m.reconnects.WithLabelValues(d).Inc()
			}
		}
		l.failing = err
		return min(l.retry.Next(), p.cfg.Delay), false
	}
	if l.failing != nil {
		p.log.Info("publication rounds succeed again", slog.String("after_error", l.failing.Error()))
		l.failing = nil
	}
	l.retry.Reset()
	switch {
	case p.cfg.FixedDelay:
		return p.cfg.Delay, false
	case more:
		return 0, true
	case !sleep:
		return busyPoll, false // work in levering, or just found: look again soon (round.sleeping)
	}
	return p.cfg.Delay, false
}

// checkHorizonPrivilege warns when the horizon cannot see other roles' transactions: the
// owner of publicatie_sessions() (migration 0016), which reads pg_stat_activity as that owner,
// is neither a superuser nor a member of pg_read_all_stats. The horizon would then miss a late
// bijhouding transaction of another role. The service's own role needs neither.
func (p *Publisher) checkHorizonPrivilege(ctx context.Context) {
	var ok bool
	err := p.db.GetContext(ctx, &ok, p.sql.horizonPrivilegeSQL)
	if err == nil && !ok {
		p.log.Warn("the owner of publicatie_sessions() cannot see other roles' transactions; grant pg_read_all_stats to it " +
			"(schema/grants does), or a bijhouding transaction that commits late may be overtaken")
	}
}

// listen turns the database's notifications into wake-ups. pq.Listener reconnects by itself;
// after a reconnect it delivers a nil notification, which also wakes the publisher, so
// nothing missed during the gap waits longer than one round.
func (p *Publisher) listen(ctx context.Context) {
	d := p.cfg.ListenDialer
	if d == nil {
		d = dbsession.ListenerDialer(dbsession.Settings{})
	}
	l := pq.NewDialListener(d, p.cfg.ListenURL, 100*time.Millisecond, 10*time.Second, func(ev pq.ListenerEventType, err error) {
		switch ev {
		case pq.ListenerEventConnectionAttemptFailed, pq.ListenerEventDisconnected:
			p.log.Warn("notification listener lost the database, reconnecting", slog.Any("error", err))
		case pq.ListenerEventReconnected:
			p.log.Info("notification listener reconnected")
		}
	})
	defer l.Close()
	if err := l.Listen(handeling.NotifyChannel); err != nil {
		p.log.Warn("cannot listen for notifications; rounds run every delay", slog.Any("error", err))
	}
	var pinging atomic.Bool
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.Notify:
			p.Wake()
		case <-time.After(time.Minute):
			// A ping finds a connection that died silently; one at a time, as a frozen server
			// answers none of them.
			if pinging.CompareAndSwap(false, true) {
				go func() { defer pinging.Store(false); _ = l.Ping() }()
			}
		}
	}
}

// pollInterval is how often a follower checks whether the lease is free.
func (p *Publisher) pollInterval() time.Duration {
	return min(p.cfg.Delay, p.cfg.LeaseTimeout/5)
}

// step takes the lease if it can and, as leader, runs one round. more says another round
// should follow at once, sleep that the leader may wait for a notification (round).
func (p *Publisher) step(ctx context.Context) (more, sleep bool, err error) {
	var epoch int64
	if !p.cfg.Standalone {
		if epoch, err = p.lead.acquire(ctx); err != nil || epoch == 0 {
			p.work.drop() // a follower holds no view: a new leader builds its own
			if err == nil {
				p.warmBroker(ctx)
			}
			return false, false, err
		}
	}
	// A round that has begun may finish when shutdown starts (cutting it after the broker commit
	// only costs a republication), for at most ShutdownGrace.
	rctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancel(nil)
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(ShutdownGrace, func() { cancel(nil) }) })
	defer stop()
	done := p.lead.roundStarting(cancel)
	published, more, sleep, err := p.round(rctx, epoch)
	done(err)
	switch {
	case errors.Is(err, ErrLostLease):
		p.m.rounds.WithLabelValues("fenced").Inc()
		p.lead.lose(epoch)
		p.log.Warn("lost the lease during a round; the round was rolled back", slog.Int64("epoch", epoch))
		return false, false, nil
	case err != nil:
		p.m.rounds.WithLabelValues("failed").Inc()
	case published > 0:
		p.m.rounds.WithLabelValues("committed").Inc()
	default:
		p.m.rounds.WithLabelValues("empty").Inc()
	}
	return more, sleep, err
}

func (p *Publisher) shutdown() {
	defer p.stmts.Close() //nolint:errcheck // closing prepared statements on the way out
	if p.conn != nil {
		p.conn.Disconnect()
		p.conn = nil
	}
	p.lead.release()
}

// window is how many ready handelingen a round takes from the view to check against the
// blocked persons: not many more than it can publish. Those it does not consider are newer
// than those it does; they wait for a later round.
func window(budget int) int {
	return max(4*budget, 500)
}

func ids(cs []Candidate) []int64 {
	out := make([]int64, len(cs))
	for i, c := range cs {
		out[i] = c.ID
	}
	return out
}

// warmDial bounds a follower's dial of the broker (warmBroker): a broker that does not answer
// must not hold up the follower's next look at the lease for long.
const warmDial = time.Second

// warmRetryAfter is how long a follower waits to dial the broker again after warmBroker failed.
const warmRetryAfter = 30 * time.Second

// warmBroker connects a follower to the broker ahead of a takeover: a new leader then sends
// its first round over a connection it has, instead of dialling first (seconds, against a
// broker behind TLS or one node of several down). Heart-beats keep it alive meanwhile; one
// that died is found at the first send, which fails that round, and the next dials again. A
// broker the follower cannot reach is no error of the follower's: it logs that and tries
// again after warmRetryAfter.
func (p *Publisher) warmBroker(ctx context.Context) {
	if p.conn != nil || time.Now().Before(p.warmRetry) {
		return
	}
	dctx, cancel := context.WithTimeout(ctx, warmDial)
	defer cancel()
	c, err := p.dialer.Dial(dctx)
	if err != nil {
		if ctx.Err() == nil {
			p.log.Warn("follower cannot connect to the broker ahead of a takeover; trying again later",
				slog.Float64("retry_in_seconds", warmRetryAfter.Seconds()), slog.Any("error", err))
		}
		p.warmRetry = time.Now().Add(warmRetryAfter)
		return
	}
	p.connected(c, true)
}

// connected keeps c as the publisher's broker connection and logs it.
func (p *Publisher) connected(c *broker.Conn, follower bool) {
	attrs := []any{slog.String("addr", c.Node), slog.String("server", c.Server), slog.String("heart_beats", c.HeartBeats)}
	if follower {
		attrs = append(attrs, slog.Bool("follower", true))
	}
	p.log.Info("connected to broker", attrs...)
	p.conn = c
}

// send puts the round's messages on the queue in one broker transaction, dialling the broker
// if needed. A failed send drops the connection; the next round dials again, starting at the
// next broker node.
func (p *Publisher) send(ctx context.Context, msgs []broker.Message) error {
	if p.conn == nil {
		c, err := p.dialer.Dial(ctx)
		if err != nil {
			return brokerErr(err)
		}
		p.connected(c, false)
	}
	if err := p.conn.Send(ctx, msgs...); err != nil {
		p.conn.Close()
		p.dialer.Lost(p.conn)
		p.conn = nil
		return brokerErr(err)
	}
	return nil
}
