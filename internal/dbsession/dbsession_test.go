package dbsession_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/brp/levering/internal/brptest"
	"github.com/brp/levering/internal/dbsession"
)

func open(t *testing.T, url string, s dbsession.Settings) *sqlx.DB {
	t.Helper()
	db, err := dbsession.Open(url, s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestSessionCarriesItsBoundsAndName(t *testing.T) {
	t.Parallel()
	_, url := brptest.DB(t)
	db := open(t, url, dbsession.Settings{Command: "mutatielevering", StatementTimeout: 30 * time.Second,
		LockTimeout: 5 * time.Second, IdleInTransactionTimeout: 10 * time.Second, TCPUserTimeout: 20 * time.Second})
	var got struct {
		Statement, Lock, Idle, App, UserTimeout, JIT string
		Service                                      bool
	}
	err := db.QueryRowx(`select current_setting('statement_timeout'), current_setting('lock_timeout'),
		current_setting('idle_in_transaction_session_timeout'), a.application_name,
		current_setting('tcp_user_timeout'), current_setting('jit'), `+dbsession.ServiceSessionSQL+`
		from pg_stat_activity a where a.pid = pg_backend_pid()`).Scan(
		&got.Statement, &got.Lock, &got.Idle, &got.App, &got.UserTimeout, &got.JIT, &got.Service)
	if err != nil {
		t.Fatal(err)
	}
	// The services run on 127.0.0.1, so tcp_user_timeout applies (it does not on a Unix socket).
	if got.Statement != "30s" || got.Lock != "5s" || got.Idle != "10s" || got.UserTimeout != "20000" || got.JIT != "off" ||
		got.App != dbsession.AppName("mutatielevering") || !strings.HasPrefix(got.App, "mutatielevering[") || !got.Service {
		t.Fatalf("session settings %+v", got)
	}
}

func TestAppNameFitsPostgresLimit(t *testing.T) {
	t.Parallel()
	if n := dbsession.AppName(strings.Repeat("x", 40)); len(n) > 63 {
		t.Fatalf("AppName is %d bytes: %q", len(n), n)
	}
}

func TestLockWaitEndsAndNamesTheHolder(t *testing.T) {
	t.Parallel()
	_, url := brptest.DB(t)
	holder := open(t, url, dbsession.Settings{Command: "publicatie"})
	waiter := open(t, url, dbsession.Settings{Command: "mutatielevering", LockTimeout: 300 * time.Millisecond})
	ctx := context.Background()
	if _, err := holder.Exec(`insert into admhnd (id, soort, tsreg) values (1, 'x', now())`); err != nil {
		t.Fatal(err)
	}
	tx, err := holder.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck
	if _, err := tx.Exec(`select id from admhnd where id = 1 for update`); err != nil {
		t.Fatal(err)
	}
	_, err = waiter.Exec(`update admhnd set statuslev = 'geleverd' where id = 1`)
	if !dbsession.IsLockTimeout(err) {
		t.Fatalf("update of a locked row: %v, want a lock timeout", err)
	}
	hs, err := dbsession.Holders(ctx, waiter, "admhnd")
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) != 1 || hs[0].Application != dbsession.AppName("publicatie") || hs[0].State != "idle in transaction" {
		t.Fatalf("holders %v, want the publicatie session idle in transaction", hs)
	}
	t.Logf("holder: %s", hs[0])
}

// A session of another database that holds rows of its admhnd is not named, even where that
// database is a copy of this one and its admhnd has the same oid (brptest's databases are).
func TestHoldersAreThisDatabasesOnly(t *testing.T) {
	t.Parallel()
	_, url := brptest.DB(t)
	_, otherURL := brptest.DB(t)
	here := open(t, url, dbsession.Settings{Command: "mutatielevering"})
	other := open(t, otherURL, dbsession.Settings{Command: "publicatie"})
	var oid, otherOID int64
	if err := here.Get(&oid, `select 'admhnd'::regclass::oid::int8`); err != nil {
		t.Fatal(err)
	}
	if err := other.Get(&otherOID, `select 'admhnd'::regclass::oid::int8`); err != nil {
		t.Fatal(err)
	}
	tx, err := other.Beginx()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck
	if _, err := tx.Exec(`insert into admhnd (id, soort, tsreg) values (1, 'x', now())`); err != nil {
		t.Fatal(err)
	}
	hs, err := dbsession.Holders(context.Background(), here, "admhnd")
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) != 0 {
		t.Errorf("holders %v of another database's admhnd (oid %d here, %d there)", hs, oid, otherOID)
	}
}

func TestIdleTransactionIsEndedAndItsLocksReleased(t *testing.T) {
	t.Parallel()
	_, url := brptest.DB(t)
	frozen := open(t, url, dbsession.Settings{Command: "mutatielevering", IdleInTransactionTimeout: 500 * time.Millisecond})
	other := open(t, url, dbsession.Settings{Command: "mutatielevering", LockTimeout: 10 * time.Second})
	if _, err := other.Exec(`insert into admhnd (id, soort, tsreg) values (1, 'x', now())`); err != nil {
		t.Fatal(err)
	}
	tx, err := frozen.Beginx()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`select id from admhnd where id = 1 for update`); err != nil {
		t.Fatal(err)
	}
	// The holder does nothing more, as a frozen process would; the database ends its session.
	if _, err := other.Exec(`update admhnd set statuslev = 'geleverd' where id = 1`); err != nil {
		t.Fatalf("the row stayed locked: %v", err)
	}
	if err := tx.Commit(); err == nil {
		t.Fatal("the ended session's transaction committed")
	}
}

// A server that accepts the connection and then never answers (frozen, or behind a partition
// that drops packets): the client gives up after StatementTimeout + readSlack.
func TestClientGivesUpOnAServerThatNeverAnswers(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, never read or answered
		}
	}()
	db := open(t, "postgres://x@"+ln.Addr().String()+"/x?sslmode=disable", dbsession.Settings{Command: "publicatie",
		StatementTimeout: 500 * time.Millisecond})
	done := make(chan error, 1)
	go func() { done <- db.Ping() }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("ping of a silent server succeeded")
		}
		t.Logf("ping: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("ping of a silent server still waits after a minute")
	}
}
