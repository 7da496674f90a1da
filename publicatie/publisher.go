package publicatie

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
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
	cfg   Config
	db    *sqlx.DB
	log   *slog.Logger
	lease *lease
	wake  chan struct{}

	m      *metrics
	epoch  atomic.Int64 // current lease epoch; 0 while follower
	dialer *broker.Dialer
	conn   *broker.Conn
	rounds atomic.Int64
	stmts  *prepared.Cache // roundSQL

	// The leader's view of the open work (view.go), kept across its rounds under one epoch.
	view      *view
	viewEpoch int64
	viewDirty bool      // this round emptied publicatie_nakomer
	lastSweep time.Time // of the view against the database
	// intakePersons is the persons per handeling the last intake read (at least 1): how
	// many handelingen the room under ViewBytes holds (intakeBounds).
	intakePersons int

	// stalledSince is when this process's rounds stopped succeeding (unix ns): the start of
	// the round in progress, or of the first of a run of failed rounds; 0 while they succeed
	// or it waits between successful rounds. A leader stalled for longer than Wartezeit hands
	// its lease over (keepLease): alive is not the same as making progress.
	stalledSince atomic.Int64
	lastError    atomic.Pointer[string]
	// cooldownUntil (unix ns) keeps a leader that handed its lease over from taking it back
	// at once, so that another instance gets the chance.
	cooldownUntil atomic.Int64
	cancelRound   atomic.Pointer[context.CancelCauseFunc]
}

// errStalled ends a round whose leader handed the lease over for lack of progress.
var errStalled = errors.New("publicatie: no progress for wartezeit; lease handed over")

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
	return &Publisher{
		cfg:    cfg,
		db:     db,
		log:    log.With(slog.String("cluster", cfg.Cluster), slog.String("instance", cfg.Instance)),
		lease:  &lease{db: db, cluster: cfg.Cluster, holder: cfg.Instance, wartezeit: cfg.Wartezeit},
		wake:   make(chan struct{}, 1),
		m:      newMetrics(cfg.Registerer),
		stmts:  prepared.New(db.DB),
		dialer: dialer,
	}, nil
}

// BrokerNode returns the broker node (host:port) the publisher sends to, "" before it first
// connected (a follower) and after that connection was lost.
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
func (p *Publisher) Leader() bool { return p.cfg.Standalone || p.epoch.Load() > 0 }

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
	ls, err := p.lease.state(ctx)
	return Status{Lease: ls, Instance: p.cfg.Instance, Leader: p.Leader(), Standalone: p.cfg.Standalone}, err
}

// Run publishes until ctx ends, then hands the lease over and returns nil. Database and broker
// outages are logged and waited out; they do not end Run.
func (p *Publisher) Run(ctx context.Context) error {
	if p.cfg.Standalone {
		p.log.Warn(StandaloneWarning)
		p.m.leader.Set(1)
	} else {
		go p.keepLease(ctx)
	}
	defer p.shutdown()
	if p.cfg.ListenURL != "" && !p.cfg.FixedDelay {
		go p.listen(ctx)
	}
	p.checkHorizonPrivilege(ctx)
	p.log.Info("publisher started", slog.Duration("delay", p.cfg.Delay), slog.Int("limit", p.cfg.Limit),
		slog.Int("max_in_levering", p.cfg.MaxInLevering), slog.Duration("wartezeit", p.cfg.Wartezeit),
		slog.String("queue", p.cfg.Queue))
	var failing error
	retry := backoff.New(100*time.Millisecond, 10*time.Second)
	for ctx.Err() == nil {
		more, err := p.step(ctx)
		wait := p.cfg.Delay
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			if failing == nil {
				p.log.Error("publication round failed, retrying", slog.String("dependency", dependency(err)), slog.Any("error", err))
				if d := dependency(err); d != "publicatie" {
					p.m.reconnects.WithLabelValues(d).Inc()
				}
			}
			failing = err
			wait = min(retry.Next(), p.cfg.Delay)
		default:
			if failing != nil {
				p.log.Info("publication rounds succeed again", slog.String("after_error", failing.Error()))
				failing = nil
			}
			retry.Reset()
			if more && !p.cfg.FixedDelay {
				continue
			}
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

// checkHorizonPrivilege warns when this role cannot see other roles' transactions in
// pg_stat_activity: the horizon would then miss a late bijhouding transaction of another role.
func (p *Publisher) checkHorizonPrivilege(ctx context.Context) {
	var ok bool
	err := p.db.GetContext(ctx, &ok, `select rolsuper or pg_has_role(current_user, 'pg_read_all_stats', 'member')
		from pg_roles where rolname = current_user`)
	if err == nil && !ok {
		p.log.Warn("this database role cannot see other roles' transactions; grant pg_read_all_stats to it, " +
			"or a bijhouding transaction that commits late may be overtaken")
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
	return min(p.cfg.Delay, p.cfg.Wartezeit/5)
}

// step takes the lease if it can and, as leader, runs one round. more says another round
// should follow at once.
func (p *Publisher) step(ctx context.Context) (more bool, err error) {
	epoch := p.epoch.Load()
	if !p.cfg.Standalone && epoch == 0 {
		if time.Now().UnixNano() < p.cooldownUntil.Load() {
			return false, nil
		}
		p.view = nil // a follower holds no view: a new leader builds its own
		p.m.setView(nil)
		epoch, err = p.lease.acquire(ctx)
		if err != nil || epoch == 0 {
			return false, err
		}
		p.stalledSince.Store(0)
		p.epoch.Store(epoch)
		p.m.leader.Set(1)
		p.log.Info("became leader", slog.Int64("epoch", epoch))
	}
	// A round that has begun may finish when shutdown starts (cutting it after the broker commit
	// only costs a republication), for at most ShutdownGrace.
	rctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancel(nil)
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(ShutdownGrace, func() { cancel(nil) }) })
	defer stop()
	p.cancelRound.Store(&cancel)
	defer p.cancelRound.Store(nil)
	p.stalledSince.CompareAndSwap(0, time.Now().UnixNano())
	published, more, err := p.round(rctx, epoch)
	if err == nil {
		p.stalledSince.Store(0)
	} else {
		msg := err.Error()
		p.lastError.Store(&msg)
	}
	switch {
	case errors.Is(err, ErrLostLease):
		p.m.rounds.WithLabelValues("fenced").Inc()
		p.loseLease(epoch)
		p.log.Warn("lost the lease during a round; the round was rolled back", slog.Int64("epoch", epoch))
		return false, nil
	case err != nil:
		p.m.rounds.WithLabelValues("failed").Inc()
	case published > 0:
		p.m.rounds.WithLabelValues("committed").Inc()
	default:
		p.m.rounds.WithLabelValues("empty").Inc()
	}
	return more, err
}

// keepLease records polling activity while this instance leads and its rounds make progress,
// so that a round waiting a little for the broker does not look like a dead leader, while a
// leader whose rounds have not succeeded for Wartezeit (stuck on a hung dependency, cut off
// from the broker) hands the lease over instead of holding it alive and useless.
func (p *Publisher) keepLease(ctx context.Context) {
	t := time.NewTicker(p.cfg.Wartezeit / 5)
	defer t.Stop()
	var failing bool
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		epoch := p.epoch.Load()
		if epoch == 0 {
			continue
		}
		if since := p.stalledSince.Load(); since != 0 && time.Since(time.Unix(0, since)) > p.cfg.Wartezeit {
			p.yield(ctx, epoch, time.Since(time.Unix(0, since)))
			continue
		}
		ok, err := p.lease.renew(ctx, p.db, epoch)
		if err != nil {
			if !failing {
				attrs := []any{slog.Any("error", err)}
				if dbsession.IsLockTimeout(err) {
					attrs = append(attrs, slog.Any("lock_holders", dbsession.Describe(ctx, p.db, "publicatie_lease")))
				}
				p.log.Warn("could not record polling activity", attrs...)
			}
			failing = true
			continue
		}
		if failing {
			p.log.Info("polling activity recorded again")
			failing = false
		}
		if !ok && p.loseLease(epoch) {
			p.log.Warn("lease taken over by another instance; now follower", slog.Int64("epoch", epoch))
		}
	}
}

// yield hands the lease of epoch over because this leader's rounds have made no progress for
// stalled: it stops leading at once, ends the round in progress, frees the lease for a
// follower's next check and does not take it back for Wartezeit.
func (p *Publisher) yield(ctx context.Context, epoch int64, stalled time.Duration) {
	if !p.loseLease(epoch) {
		return
	}
	p.cooldownUntil.Store(time.Now().Add(p.cfg.Wartezeit).UnixNano())
	p.m.yields.Inc()
	if cancel := p.cancelRound.Load(); cancel != nil {
		(*cancel)(errStalled)
	}
	lastErr := ""
	if e := p.lastError.Load(); e != nil {
		lastErr = *e
	}
	p.log.Warn("rounds made no progress for wartezeit; handing the lease over", slog.Int64("epoch", epoch),
		slog.Duration("stalled_for", stalled.Round(time.Millisecond)), slog.Duration("wartezeit", p.cfg.Wartezeit),
		slog.String("last_error", lastErr))
	// The release is bounded by the session's timeouts; if the database is what hangs, the
	// lease simply expires Wartezeit after the last renewal.
	go func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := p.lease.release(rctx, epoch); err != nil {
			p.log.Warn("could not hand the lease over; a follower takes over after wartezeit", slog.Any("error", err))
		}
	}()
}

// loseLease turns this instance into a follower if it still led under epoch.
func (p *Publisher) loseLease(epoch int64) bool {
	if !p.epoch.CompareAndSwap(epoch, 0) {
		return false
	}
	p.m.leader.Set(0)
	return true
}

func (p *Publisher) shutdown() {
	defer p.stmts.Close() //nolint:errcheck // closing prepared statements on the way out
	if p.conn != nil {
		p.conn.Disconnect()
		p.conn = nil
	}
	p.m.leader.Set(0)
	if epoch := p.epoch.Swap(0); epoch > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := p.lease.release(ctx, epoch); err != nil {
			p.log.Warn("could not hand the lease over; a follower takes over after wartezeit", slog.Any("error", err))
			return
		}
		p.log.Info("lease handed over", slog.Int64("epoch", epoch))
	}
}

// round is one publication round, in one database transaction: count what is in flight, take
// what is new into the view of open work, keep its oldest ready handelingen whose persons are
// not blocked, mark them in_levering, send them (and any whose earlier message was lost) in
// one broker transaction and, only if the lease is still ours, commit.
func (p *Publisher) round(ctx context.Context, epoch int64) (published int, more bool, err error) {
	start := time.Now()
	defer func() {
		if err != nil {
			p.view = nil // it may hold what the rolled-back transaction took in: rebuilt
		}
	}()
	// An error here is the database being away: BeginTx reports it below, and what did not
	// get prepared runs unprepared.
	_ = p.stmts.Prepare(ctx, roundSQL...)
	if epoch > 0 {
		if ok, err := p.lease.renew(ctx, p.stmts, epoch); err != nil {
			return 0, false, dbErr(err)
		} else if !ok {
			return 0, false, ErrLostLease
		}
	}
	tx, err := p.db.BeginTxx(ctx, nil)
	if err != nil {
		return 0, false, dbErr(fmt.Errorf("begin round: %w", err))
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	q := p.stmts.In(tx.Tx)
	// A leader frozen inside a round must not hold its row locks forever: the database ends
	// the session, and with it the round, after wartezeit.
	if _, err := q.ExecContext(ctx, roundTimeoutSQL, strconv.FormatInt(p.cfg.Wartezeit.Milliseconds(), 10)); err != nil {
		return 0, false, dbErr(err)
	}
	horizon, mayMark, err := readHorizon(ctx, q)
	if err != nil {
		return 0, false, dbErr(err)
	}
	inLevering, err := countInLevering(ctx, q)
	if err != nil {
		return 0, false, dbErr(err)
	}
	stale, err := readStale(ctx, q, p.cfg.RedeliveryTimeout, p.cfg.MaxInLevering)
	if err != nil {
		return 0, false, dbErr(err)
	}
	budget := p.cfg.MaxInLevering - inLevering
	var candidates, keep []Candidate
	intakeFull, taken := false, 0
	if budget > 0 {
		v := p.viewFor(epoch)
		if taken, intakeFull, err = p.takeIn(ctx, q, v, horizon); err != nil {
			return 0, false, dbErr(err)
		}
		v = p.view // a new one if the sweep found the old one wrong
		p.m.setView(v)
		if h := p.cfg.Hooks.AfterIntake; h != nil {
			if err := h(ctx); err != nil {
				return 0, false, err
			}
		}
		candidates = v.readyCandidates(window(budget))
		blocked, err := readBlocked(ctx, q, p.cfg.FoutPolicy == handeling.Strict)
		if err != nil {
			return 0, false, dbErr(err)
		}
		keep = Select(candidates, blocked, budget)
		if !mayMark && len(keep) > 0 {
			// A transaction adding late persons is open: the view may lack some (readHorizon).
			p.log.Debug("a transaction adding persons late is open; marking nothing this round")
			keep = nil
		}
	}
	if len(keep) == 0 && len(stale) == 0 {
		if !p.viewDirty {
			return 0, intakeFull, nil
		}
		// The intake emptied publicatie_nakomer: committed behind the fence like any round,
		// so that a deposed leader cannot take the new one's records.
		if err := p.commit(ctx, tx, q, epoch); err != nil {
			return 0, false, err
		}
		return 0, intakeFull, nil
	}
	republished, err := touchStale(ctx, q, ids(stale))
	if err != nil {
		return 0, false, dbErr(err)
	}
	marked, err := markInLevering(ctx, q, ids(keep))
	if err != nil {
		return 0, false, dbErr(err)
	}
	var msgs []broker.Message
	var sent []int64
	for _, batch := range []struct {
		cs []Candidate
		ok map[int64]bool
	}{{stale, republished}, {keep, marked}} {
		for _, c := range batch.cs {
			if !batch.ok[c.ID] {
				continue
			}
			body, err := json.Marshal(handeling.Publication{ID: c.ID, Personen: append([]int64{}, c.Personen...)})
			if err != nil {
				return 0, false, fmt.Errorf("encode publication %d: %w", c.ID, err)
			}
			msgs = append(msgs, broker.Message{Destination: p.cfg.Queue, AdmhndID: c.ID, Body: body})
			sent = append(sent, c.ID)
		}
	}
	if len(republished) > 0 {
		p.log.Warn("handelingen in levering past the redelivery timeout published again",
			slog.Any("admhnd_ids", ids(stale)), slog.Duration("redelivery_timeout", p.cfg.RedeliveryTimeout))
	}
	if err := p.cfg.Hooks.AfterMark.Run(ctx, sent); err != nil {
		return 0, false, err
	}
	if len(msgs) > 0 {
		if err := p.send(ctx, msgs); err != nil {
			return 0, false, err
		}
	}
	if err := p.cfg.Hooks.AfterBrokerCommit.Run(ctx, sent); err != nil {
		return 0, false, err
	}
	// Those the round could not mark (no longer to be delivered, or locked by another
	// session) leave the view; the ones still to be delivered come back through
	// publicatie_nakomer, before anything newer of their persons.
	if err := recheck(ctx, q, unmarked(keep, marked)); err != nil {
		return 0, false, dbErr(err)
	}
	if err := p.commit(ctx, tx, q, epoch); err != nil {
		return 0, false, err
	}
	waiting := 0
	if v := p.view; v != nil { // nil when the round had no budget and only republished
		for _, c := range keep {
			v.remove(c.ID)
		}
		waiting = v.size()
		p.m.setView(v)
	}
	if len(sent) > 0 {
		p.rounds.Add(1)
		p.m.published.Add(float64(len(marked)))
		p.m.republished.Add(float64(len(republished)))
		p.m.roundTime.Observe(time.Since(start).Seconds())
	}
	if h := p.cfg.Hooks.RoundCommitted; h != nil {
		h(sent)
	}
	p.log.Debug("round committed", slog.Int64("epoch", epoch), slog.Int("published", len(sent)),
		slog.Int("republished", len(republished)), slog.Int("taken_in", taken), slog.Int("candidates", len(candidates)),
		slog.Int("in_levering", inLevering+len(marked)), slog.Duration("duration", time.Since(start)))
	// Another round at once when work is waiting that this one could not publish although it
	// had room: more to take in, or at least a window's worth in the view, whose persons'
	// handelingen in flight may be delivered by now (what the first version did when its
	// window was full; waiting for the consumers' notifications instead made rounds fewer and
	// larger, and the pipeline 10 % slower in A/B runs).
	return len(sent), len(keep) < budget && (intakeFull || waiting >= window(budget)), nil
}

// commit commits the round's transaction if the lease is still ours. This is the fence: the
// row lock taken by the renewal makes a takeover wait until this commit, so no two epochs
// ever commit rounds at the same time.
func (p *Publisher) commit(ctx context.Context, tx *sqlx.Tx, q querier, epoch int64) error {
	if epoch > 0 {
		if ok, err := p.lease.renew(ctx, q, epoch); err != nil {
			return dbErr(err)
		} else if !ok {
			return ErrLostLease
		}
	}
	if err := tx.Commit(); err != nil {
		return dbErr(fmt.Errorf("commit round: %w", err))
	}
	return nil
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

// send puts the round's messages on the queue in one broker transaction, dialling the broker
// if needed. A failed send drops the connection; the next round dials again, starting at the
// next broker node.
func (p *Publisher) send(ctx context.Context, msgs []broker.Message) error {
	if p.conn == nil {
		c, err := p.dialer.Dial(ctx)
		if err != nil {
			return brokerErr(err)
		}
		p.log.Info("connected to broker", slog.String("addr", c.Node), slog.String("server", c.Server),
			slog.String("heart_beats", c.HeartBeats))
		p.conn = c
	}
	if err := p.conn.Send(ctx, msgs...); err != nil {
		p.conn.Close()
		p.dialer.Lost(p.conn)
		p.conn = nil
		return brokerErr(err)
	}
	return nil
}
