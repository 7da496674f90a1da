package load

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
)

// App is an application server of bijhouding as issue 40 measures it: requests arrive on a
// schedule; each reads the server's clock for its tsreg as it arrives, BEFORE it has a database
// connection, then waits for one of the server's Pool connections, and registers its handeling
// (soort VERHUIZING) and that handeling's persons in one transaction of its own. So a tsreg lies
// before its transaction's start by the time the request waited for a connection (the lead),
// plus ClockOffset. Requests are served concurrently, each in a goroutine of its own: a slow
// registration delays the next ones only by keeping its connection, as on a real server.
//
// The zero values of the fields other than DB are the defaults; Register does not change the
// App, so one App may register several schedules, even at once (each with a pool of its own).
type App struct {
	// DB is the database; Register takes Pool connections of it for the time it runs, so its
	// SetMaxOpenConns must leave room for them (the default, unlimited, does).
	DB *sqlx.DB
	// Pool is the number of connections that registrations share (default 16).
	Pool int
	// ClockOffset is added to the clock for tsreg: -1.5 s is a server whose clock is 1.5 s
	// behind (default 0).
	ClockOffset time.Duration
	// Timeout, when set, drops a request that has not got a connection this long after it read
	// the clock, as a request timeout would: nothing of it is registered (default 0: never).
	Timeout time.Duration
	// Personen is how many persons there are (ids 1 to Personen, default 20,000): each
	// handeling has one of them, one in ten two distinct ones.
	Personen int
	// Seed makes the persons of the handelingen, in the order of the schedule, repeatable.
	Seed uint64
}

// Phase is a part of a schedule: Rate registrations per second for For.
type Phase struct {
	Rate float64
	For  time.Duration
}

// Registration is one registered handeling as the application server saw it.
type Registration struct {
	Handeling           // ID; Soort VERHUIZING; Tsreg as stored (microseconds); Personen sorted
	Read      time.Time // when the request read the clock (this host's, without ClockOffset)
	Committed time.Time // when its commit returned
}

// Registered is what Register did.
type Registered struct {
	Registrations []Registration // committed, in id order
	Dropped       int            // requests dropped after waiting Timeout for a connection
	DroppedAt     []time.Time    // when each dropped request read the clock, in that order
}

// The statements of a registration, prepared on each connection of the pool.
const (
	registerHandelingSQL = `insert into admhnd (id, soort, tsreg) values ($1, 'VERHUIZING', $2)`
	registerPersonenSQL  = `insert into admhnd_persoon (admhnd_id, persoon_id) select $1, unnest($2::bigint[])`
)

// appConn is a connection of an App's pool with its prepared statements.
type appConn struct {
	c             *sqlx.Conn
	hnd, personen *sqlx.Stmt
}

// Register keeps to the schedule of phases from start (a zero start: now): in a phase that
// begins at s, request i (from 0) of Rate*For is due at s + i/Rate, and the next phase begins
// where this one ends. Each request takes its id from ids (ids.Add(1): Apps that share the
// counter never share an id), reads the clock for tsreg (now + ClockOffset), waits for a
// connection of the pool, is dropped if that wait exceeded Timeout since the clock was read,
// and otherwise registers in one transaction: begin, the handeling, its persons, commit, each
// one round trip. Register opens the pool's connections (and prepares the statements on them)
// before start and closes them when the last request is done.
//
// It returns the registrations committed and the requests dropped. When a registration fails
// it carries on with the schedule and returns the first error with the rest; when ctx ends it
// stops the schedule (requests still waiting are dropped) and returns ctx's error.
func (a App) Register(ctx context.Context, ids *atomic.Int64, start time.Time, phases ...Phase) (Registered, error) {
	a = a.withDefaults()
	if a.DB == nil {
		return Registered{}, errors.New("load: App without DB")
	}
	pool := make(chan *appConn, a.Pool)
	defer func() {
		close(pool)
		for c := range pool {
			c.close()
		}
	}()
	for range a.Pool {
		c, err := a.open(ctx)
		if err != nil {
			return Registered{}, err
		}
		pool <- c
	}
	return a.run(ctx, ids, start, phases, pool, register)
}

func (a App) withDefaults() App {
	if a.Pool <= 0 {
		a.Pool = 16
	}
	if a.Personen <= 0 {
		a.Personen = 20_000
	}
	return a
}

// open takes a connection for the pool and prepares the registration's statements on it.
func (a App) open(ctx context.Context) (*appConn, error) {
	c, err := a.DB.Connx(ctx)
	if err != nil {
		return nil, fmt.Errorf("load: app connection: %w", err)
	}
	ac := &appConn{c: c}
	if ac.hnd, err = c.PreparexContext(ctx, registerHandelingSQL); err == nil {
		ac.personen, err = c.PreparexContext(ctx, registerPersonenSQL)
	}
	if err != nil {
		ac.close()
		return nil, fmt.Errorf("load: app statements: %w", err)
	}
	return ac, nil
}

func (c *appConn) close() {
	if c == nil || c.c == nil {
		return
	}
	for _, s := range []*sqlx.Stmt{c.hnd, c.personen} {
		if s != nil {
			s.Close()
		}
	}
	c.c.Close()
}

// register is one registration's transaction on c. The transaction is begun and ended with
// plain statements on the connection (database/sql's Tx would prepare the statements again).
func register(ctx context.Context, c *appConn, r *Registration) error {
	if _, err := c.c.ExecContext(ctx, "begin"); err != nil {
		return fmt.Errorf("load: begin: %w", err)
	}
	_, err := c.hnd.ExecContext(ctx, r.ID, r.Tsreg)
	if err == nil {
		_, err = c.personen.ExecContext(ctx, r.ID, pq.Array(r.Personen))
	}
	if err != nil {
		_, _ = c.c.ExecContext(context.WithoutCancel(ctx), "rollback")
		return fmt.Errorf("load: register handeling %d: %w", r.ID, err)
	}
	if _, err := c.c.ExecContext(ctx, "commit"); err != nil {
		return fmt.Errorf("load: commit handeling %d: %w", r.ID, err)
	}
	return nil
}

// run is Register's schedule over pool, registering with do: one goroutine dispatches the
// requests at their due times (reading the clock, drawing the persons), each request then
// waits for a connection in a goroutine of its own.
func (a App) run(ctx context.Context, ids *atomic.Int64, start time.Time, phases []Phase, pool chan *appConn,
	do func(context.Context, *appConn, *Registration) error) (Registered, error) {
	if start.IsZero() {
		start = time.Now()
	}
	r := rand.New(rand.NewPCG(a.Seed, a.Seed^0x9e3779b97f4a7c15))
	var (
		mu       sync.Mutex
		out      Registered
		firstErr error
		wg       sync.WaitGroup
	)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	begin := start
schedule:
	for _, ph := range phases {
		n := 0
		if ph.Rate > 0 {
			n = int(math.Round(ph.Rate * ph.For.Seconds()))
		}
		for i := range n {
			due := begin.Add(time.Duration(float64(i) * float64(time.Second) / ph.Rate))
			if d := time.Until(due); d > 0 {
				timer.Reset(d)
				select {
				case <-ctx.Done():
					break schedule
				case <-timer.C:
				}
			}
			if ctx.Err() != nil {
				break schedule
			}
			read := time.Now()
			reg := Registration{Read: read, Handeling: Handeling{ID: ids.Add(1), Soort: "VERHUIZING",
				Tsreg: read.Add(a.ClockOffset).Round(0).Truncate(time.Microsecond), Personen: a.persons(r)}}
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := acquire(ctx, pool, read, a.Timeout)
				if c == nil {
					mu.Lock()
					out.Dropped++
					out.DroppedAt = append(out.DroppedAt, read)
					mu.Unlock()
					return
				}
				err := do(ctx, c, &reg)
				reg.Committed = time.Now()
				pool <- c
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					if firstErr == nil {
						firstErr = err
					}
					return
				}
				out.Registrations = append(out.Registrations, reg)
			}()
		}
		begin = begin.Add(ph.For)
	}
	wg.Wait()
	slices.SortFunc(out.Registrations, func(x, y Registration) int { return cmp.Compare(x.ID, y.ID) })
	slices.SortFunc(out.DroppedAt, func(x, y time.Time) int { return x.Compare(y) })
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return out, firstErr
}

// acquire waits for a connection of pool for a request that read the clock at read: nil when
// it would have waited longer than timeout since then (timeout > 0) or ctx ended. Waiting
// requests are served in the order they began to wait (a channel's receivers are).
func acquire(ctx context.Context, pool chan *appConn, read time.Time, timeout time.Duration) *appConn {
	if timeout <= 0 {
		select {
		case c := <-pool:
			return c
		case <-ctx.Done():
			return nil
		}
	}
	left := timeout - time.Since(read)
	if left <= 0 {
		return nil
	}
	t := time.NewTimer(left)
	defer t.Stop()
	select {
	case c := <-pool:
		if time.Since(read) > timeout { // the timer was due as well
			pool <- c
			return nil
		}
		return c
	case <-t.C:
		return nil
	case <-ctx.Done():
		return nil
	}
}

// persons draws a handeling's persons: one of 1..Personen, in one of ten cases two distinct
// ones, sorted.
func (a App) persons(r *rand.Rand) []int64 {
	p := int64(1 + r.IntN(a.Personen))
	if a.Personen < 2 || r.IntN(10) != 0 {
		return []int64{p}
	}
	q := int64(1 + r.IntN(a.Personen-1))
	if q >= p {
		q++
	}
	return []int64{min(p, q), max(p, q)}
}
