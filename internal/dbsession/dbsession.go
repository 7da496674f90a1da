// Package dbsession opens the service's PostgreSQL connections so that no session holds or
// waits for anything without a bound: the server ends statements, lock waits and idle
// transactions that take too long, both ends of the socket drop a silent peer, and the client
// gives up on a server that stopped answering. Each session carries an application_name that
// names its process, so operators see in pg_stat_activity who holds what, and the publisher can
// tell the service's own transactions from bijhouding's.
package dbsession

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/brp/levering/internal/tcp"
)

// Settings bound what one session may hold and wait for. Zero turns a bound off.
type Settings struct {
	// Command names the program in the session's application_name: publicatie or
	// mutatielevering (see AppName).
	Command string
	// StatementTimeout ends a statement that runs longer, lock waits included
	// (statement_timeout). The client also gives up on an answer that takes longer than
	// StatementTimeout + readSlack: a frozen or cut-off server answers nothing at all.
	StatementTimeout time.Duration
	// LockTimeout ends a statement that waits longer for a lock (lock_timeout).
	LockTimeout time.Duration
	// IdleInTransactionTimeout ends a session that stays idle inside a transaction longer
	// (idle_in_transaction_session_timeout): a frozen process's locks are released then.
	IdleInTransactionTimeout time.Duration
	// TCPUserTimeout drops a connection whose data stays unacknowledged, or whose peer stays
	// silent, for about this long, on the client (package tcp) and on the server
	// (tcp_user_timeout and tcp_keepalives_*).
	TCPUserTimeout time.Duration
	// SearchPath, when set, is the sessions' search_path: the schema of the service's own
	// tables in a layout that keeps them apart (handeling.Layout.SearchPath).
	SearchPath string
}

// readSlack is what the client waits for an answer beyond StatementTimeout before it closes
// the connection: the network and a loaded server's scheduling.
const readSlack = 5 * time.Second

// ServiceSessionSQL is true for sessions that carry the application_name AppName gives this
// service's commands. They never register handelingen, so the publisher's horizon leaves their
// transactions out: a frozen consumer's open transaction must not hold back publication. Any
// client can set an application_name, so the horizon (publicatie_sessions(), migration 0016)
// also asks that the session's role may execute that function: a bijhouding role may not.
const ServiceSessionSQL = `(application_name like 'publicatie[%' or application_name like 'mutatielevering[%')`

// AppName is the application_name of command's sessions in this process: command[pid]@host,
// at most 63 bytes (PostgreSQL's limit; the host name is shortened to fit).
func AppName(command string) string {
	host, _ := os.Hostname()
	prefix := command + "[" + strconv.Itoa(os.Getpid()) + "]@"
	if room := 63 - len(prefix); len(host) > room {
		host = host[:max(room, 0)]
	}
	return prefix + host
}

// DSN returns url (a postgres:// URL or a key=value string) as a key=value connection string
// with the session parameters of s added; they replace the same parameters in url.
func DSN(url string, s Settings) (string, error) {
	dsn := url
	if strings.HasPrefix(url, "postgres://") || strings.HasPrefix(url, "postgresql://") {
		var err error
		if dsn, err = pq.ParseURL(url); err != nil {
			return "", fmt.Errorf("dbsession: %w", err)
		}
	}
	params := [][2]string{{"application_name", AppName(s.Command)}}
	ms := func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
	params = append(params,
		[2]string{"statement_timeout", ms(s.StatementTimeout)},
		[2]string{"lock_timeout", ms(s.LockTimeout)},
		[2]string{"idle_in_transaction_session_timeout", ms(s.IdleInTransactionTimeout)},
		// No JIT: the service's statements are short, but their estimates can pass
		// jit_above_cost (the consumer's check of a person with a long history), and compiling
		// then takes most of the statement's time.
		[2]string{"jit", "off"})
	if s.TCPUserTimeout > 0 {
		probe := strconv.Itoa(int(tcp.KeepAliveInterval(s.TCPUserTimeout).Seconds()))
		params = append(params,
			[2]string{"tcp_user_timeout", ms(s.TCPUserTimeout)},
			[2]string{"tcp_keepalives_idle", probe},
			[2]string{"tcp_keepalives_interval", probe},
			[2]string{"tcp_keepalives_count", strconv.Itoa(tcp.KeepAliveCount)})
	}
	if s.SearchPath != "" {
		params = append(params, [2]string{"search_path", s.SearchPath})
	}
	var b strings.Builder
	b.WriteString(dsn)
	for _, p := range params {
		fmt.Fprintf(&b, " %s='%s'", p[0], strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(p[1]))
	}
	return b.String(), nil
}

// Open returns a pool of sessions bounded by s. It does not connect yet.
func Open(url string, s Settings) (*sqlx.DB, error) {
	dsn, err := DSN(url, s)
	if err != nil {
		return nil, err
	}
	c, err := pq.NewConnector(dsn)
	if err != nil {
		return nil, fmt.Errorf("dbsession: %w", err)
	}
	d := dialer{d: tcp.Dialer(s.TCPUserTimeout)}
	if s.StatementTimeout > 0 {
		d.wait = s.StatementTimeout + readSlack
	}
	c.Dialer(d)
	return sqlx.NewDb(sql.OpenDB(c), "postgres"), nil
}

// ListenerDialer is the dialer for a pq.Listener under s: TCP bounds only, because a
// listening session waits for notifications as long as nothing happens.
func ListenerDialer(s Settings) pq.Dialer { return dialer{d: tcp.Dialer(s.TCPUserTimeout)} }

// dialer makes lib/pq's connections. lib/pq waits for an answer as long as it takes, also
// after its context ended (it only asks the server to cancel, which a frozen server never
// reads), so with wait > 0 each read and write on the connection gets a deadline of its own:
// no answer within wait closes the connection and fails the statement.
type dialer struct {
	d    *net.Dialer
	wait time.Duration
}

func (d dialer) Dial(network, address string) (net.Conn, error) {
	return d.DialContext(context.Background(), network, address)
}

func (d dialer) DialTimeout(network, address string, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return d.DialContext(ctx, network, address)
}

func (d dialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	c, err := d.d.DialContext(ctx, network, address)
	if err != nil || d.wait == 0 {
		return c, err
	}
	return &deadlineConn{Conn: c, wait: d.wait}, nil
}

// deadlineConn gives every read and write a deadline wait from its start. lib/pq reads only
// when it expects an answer, so an idle pooled connection is never cut by it.
type deadlineConn struct {
	net.Conn
	wait time.Duration
}

func (c *deadlineConn) Read(p []byte) (int, error) {
	if err := c.Conn.SetReadDeadline(time.Now().Add(c.wait)); err != nil {
		return 0, err
	}
	return c.Conn.Read(p)
}

func (c *deadlineConn) Write(p []byte) (int, error) {
	if err := c.Conn.SetWriteDeadline(time.Now().Add(c.wait)); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}

// IsLockTimeout reports whether err is PostgreSQL's lock_not_available (55P03): lock_timeout
// ended a wait for another session's lock, or NOWAIT found it taken.
func IsLockTimeout(err error) bool {
	var pe *pq.Error
	return errors.As(err, &pe) && pe.Code == "55P03"
}

// IsPermissionDenied reports whether err is PostgreSQL's insufficient_privilege (42501): the
// session's role lacks a right (PostgreSQL's message names the object).
func IsPermissionDenied(err error) bool {
	var pe *pq.Error
	return errors.As(err, &pe) && pe.Code == "42501"
}

// IsDeadlock reports whether err is PostgreSQL's deadlock_detected (40P01): the database ended
// the transaction to break a cycle of lock waits with another session. It can run again at
// once: the detection itself took deadlock_timeout, so a retry never spins.
func IsDeadlock(err error) bool {
	var pe *pq.Error
	return errors.As(err, &pe) && pe.Code == "40P01"
}

// DeadlockDetail is PostgreSQL's account of a deadlock: which processes waited for which lock
// (relations by oid, transactions by id; no data).
func DeadlockDetail(err error) string {
	var pe *pq.Error
	if errors.As(err, &pe) {
		return pe.Detail
	}
	return ""
}

// Holder is a session with an open transaction that holds row locks on a table.
type Holder struct {
	PID         int
	Application string
	State       string
	// InTransaction is how long its transaction has been open; InState how long it has been
	// in State (idle in transaction: how long it has done nothing).
	InTransaction, InState time.Duration
}

func (h Holder) String() string {
	app := h.Application
	if app == "" {
		app = "(no application_name)"
	}
	return fmt.Sprintf("%s pid %d, %s for %.1fs, transaction open %.1fs", app, h.PID, h.State,
		h.InState.Seconds(), h.InTransaction.Seconds())
}

// Holders returns up to five other sessions whose open transactions hold row locks on table
// (they wrote or locked rows of it), oldest transaction first: after a lock wait timed out,
// the ones to name. PostgreSQL keeps row locks in the rows, not in pg_locks, so a session is
// named by the table lock that every row lock comes with. Only this database's sessions: a
// copy of it on the same server (CREATE DATABASE ... TEMPLATE) has the same relation oids.
func Holders(ctx context.Context, db *sqlx.DB, table string) ([]Holder, error) {
	rows, err := db.QueryContext(ctx, `
		select a.pid, coalesce(a.application_name, ''), coalesce(a.state, ''),
		       extract(epoch from now() - a.xact_start)::float8,
		       extract(epoch from now() - a.state_change)::float8
		from pg_stat_activity a
		where a.datname = current_database() and a.pid <> pg_backend_pid() and a.xact_start is not null
		  and exists (
			select from pg_locks l where l.pid = a.pid and l.granted and l.relation = to_regclass($1)
			  and l.mode in ('RowShareLock', 'RowExclusiveLock'))
		order by a.xact_start
		limit 5`, table)
	if err != nil {
		return nil, fmt.Errorf("dbsession: lock holders: %w", err)
	}
	defer rows.Close()
	var out []Holder
	for rows.Next() {
		var h Holder
		var inTx, inState float64
		if err := rows.Scan(&h.PID, &h.Application, &h.State, &inTx, &inState); err != nil {
			return nil, fmt.Errorf("dbsession: lock holders: %w", err)
		}
		h.InTransaction = time.Duration(inTx * float64(time.Second))
		h.InState = time.Duration(inState * float64(time.Second))
		out = append(out, h)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("dbsession: lock holders: %w", err)
	}
	return out, nil
}

// Describe names the holders of row locks on table for a log line: Holders as text, or why
// they could not be read.
func Describe(ctx context.Context, db *sqlx.DB, table string) []string {
	hs, err := Holders(ctx, db, table)
	if err != nil {
		return []string{err.Error()}
	}
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = h.String()
	}
	return out
}

var (
	urlPassword = regexp.MustCompile(`(\b[a-zA-Z][a-zA-Z0-9+.-]*://[^:/@\s"']*:)[^@\s"']*@`)
	kvPassword  = regexp.MustCompile(`(?i)(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s'"]+)`)
)

// Redact replaces every password in s, a URL, a key=value connection string or a message that
// quotes either, by xxxxx (as net/url's Redacted does): errors and logs must never carry one.
func Redact(s string) string {
	s = urlPassword.ReplaceAllString(s, "${1}xxxxx@")
	return kvPassword.ReplaceAllString(s, "${1}xxxxx")
}
