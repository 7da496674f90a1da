// Package brptest is the test support shared by every package's tests: a fresh migrated
// database per test, unique queues per test on the real broker, reading queues back, and
// running the real commands (package rig, whose errors fail the test here). Tests need the
// services of scripts/services.sh; they fail, not skip, when those are missing.
//
// Where brptest wraps a helper of rig it keeps rig's name and argument order, with t first
// and a timeout in the place of rig's context; what rig has alone (Env, Environ) is used
// from rig.
package brptest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	_ "github.com/lib/pq" // the PostgreSQL driver

	"github.com/brp/levering/broker"
	"github.com/brp/levering/handeling"
	"github.com/brp/levering/internal/rig"
)

// DatabaseURL is the server the tests create their databases on: BRP_DATABASE_URL or the
// project's dev database.
func DatabaseURL() string {
	if u := os.Getenv("BRP_DATABASE_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:55432/brp?sslmode=disable"
}

// Broker is the broker the tests use: BRP_STOMP_ADDR or 127.0.0.1:61613.
func Broker() broker.Config {
	addr := os.Getenv("BRP_STOMP_ADDR")
	if addr == "" {
		addr = "127.0.0.1:61613"
	}
	return broker.Config{Addr: addr, Login: os.Getenv("BRP_STOMP_LOGIN"), Passcode: os.Getenv("BRP_STOMP_PASSCODE"),
		Host: os.Getenv("BRP_STOMP_HOST"), OpTimeout: 20 * time.Second}
}

// RabbitMQ is the second broker of the suite (scripts/services.sh up-rabbitmq): the
// BRP_RABBITMQ_STOMP_* variables that `services.sh env` prints while it runs. The test fails
// when they are missing.
func RabbitMQ(t testing.TB) broker.Config {
	t.Helper()
	NeedsServices(t)
	addr := os.Getenv("BRP_RABBITMQ_STOMP_ADDR")
	if addr == "" {
		t.Fatal("brptest: BRP_RABBITMQ_STOMP_ADDR is not set: start RabbitMQ with scripts/services.sh up-rabbitmq " +
			`and eval "$(scripts/services.sh env)" (scripts/test.sh does both)`)
	}
	return broker.Config{Addr: addr, Login: os.Getenv("BRP_RABBITMQ_STOMP_LOGIN"), Passcode: os.Getenv("BRP_RABBITMQ_STOMP_PASSCODE"),
		Host: os.Getenv("BRP_RABBITMQ_STOMP_HOST"), OpTimeout: 20 * time.Second}
}

var unsafe = regexp.MustCompile(`[^a-z0-9]+`)

// Name returns a short unique lower-case name for t, usable as a database or queue name.
func Name(t testing.TB) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	n := unsafe.ReplaceAllString(strings.ToLower(t.Name()), "_")
	if len(n) > 30 {
		n = n[len(n)-30:]
	}
	return strings.Trim(n, "_") + "_" + hex.EncodeToString(b)
}

// DB creates a fresh database for t, with the schema applied (a copy of the process's
// migrated template: template.go), and drops it when t ends. It returns the handle and the
// database's URL (for processes started by the test). The contract's tables have the form
// BRP_TEST_STATUSLEV names (text, the default, or enum): scripts/test.sh runs the core
// packages once more with enum.
func DB(t testing.TB) (*sqlx.DB, string) {
	t.Helper()
	return DBOn(t, DatabaseURL())
}

// Layout is the database layout BRP_TEST_LAYOUT names: contract (the default) or kern. DB and
// DBOn create its tables (kern: the kern tables with test-only views in the contract's form
// over them, rig.KernCompat, so that a test's bijhouding and assertions run on both), Start
// gives it to the processes, and the tests give it to what they build in-process.
// scripts/test.sh runs the suites that matter once more with kern.
func Layout() handeling.Layout {
	l, err := handeling.ParseLayout(os.Getenv("BRP_TEST_LAYOUT"))
	if err != nil {
		panic(fmt.Sprintf("brptest: BRP_TEST_LAYOUT: %v", err))
	}
	return l
}

// DefaultForm is the form BRP_TEST_STATUSLEV names for DB and DBOn (on the kern layout:
// KernForm).
func DefaultForm() Form {
	if Layout() == handeling.Kern {
		return KernForm
	}
	return ContractForm()
}

// ContractForm is the contract layout's form BRP_TEST_STATUSLEV names, whatever
// BRP_TEST_LAYOUT says: for tests of the contract layout's own tables.
func ContractForm() Form {
	switch v := os.Getenv("BRP_TEST_STATUSLEV"); v {
	case "", StatusText.Name:
		return StatusText
	case StatusEnum.Name:
		return StatusEnum
	case statusUnchecked.Name:
		return statusUnchecked
	default:
		panic(fmt.Sprintf("brptest: BRP_TEST_STATUSLEV=%q: expected text, enum or unchecked", v))
	}
}

// Form is how bijhouding created the contract's tables before the service's first migrate.
type Form struct {
	Name   string // for subtest names: text, enum, unchecked, withoutkey, kern
	DDL    string // empty: the service's own migration creates them
	Layout handeling.Layout
}

// The forms of the contract's tables the service must work on (docs/contract.md section 1).
var (
	StatusText        = Form{Name: "text"}
	StatusEnum        = Form{Name: "enum", DDL: rig.BijhoudingEnum}
	statusUnchecked   = Form{Name: "unchecked", DDL: rig.BijhoudingUnchecked}
	PersoonWithoutKey = Form{Name: "withoutkey", DDL: rig.BijhoudingWithoutKey}
	// KernForm is the BRP kern schema (handeling.Kern) with the test-only views over it.
	KernForm = Form{Name: "kern", DDL: rig.BijhoudingKern, Layout: handeling.Kern}
	// StatusForms are the statuslev column's forms the core tests run on.
	StatusForms = []Form{StatusText, StatusEnum}
)

// DBWith is DB where bijhouding created the tables in form f.
func DBWith(t testing.TB, f Form) (*sqlx.DB, string) {
	t.Helper()
	return dbOn(t, DatabaseURL(), f)
}

// DBOn is DB on the server of serverURL.
func DBOn(t testing.TB, serverURL string) (*sqlx.DB, string) {
	t.Helper()
	return dbOn(t, serverURL, DefaultForm())
}

func dbOn(t testing.TB, serverURL string, f Form) (*sqlx.DB, string) {
	t.Helper()
	NeedsServices(t)
	name := "t_" + Name(t)
	tpl, err := template(serverURL, f)
	if err != nil {
		t.Fatalf("brptest: %v", err)
	}
	db, dbURL, err := rig.CloneDB(context.Background(), serverURL, name, tpl, f.Layout)
	if err != nil {
		t.Fatalf("brptest: %v", err)
	}
	db.SetMaxOpenConns(30)
	t.Cleanup(func() {
		db.Close()
		_ = rig.DropDB(context.Background(), serverURL, name)
	})
	return db, dbURL
}

// ApplicationServer is an application server's connection pool to the database at dbURL,
// its sessions named name (application_name, which the publisher's lead margin tells
// application servers apart by). Like a real pool it keeps its connections: a registration
// that had to open one first (database/sql keeps two idle by default) would wait for a
// backend's fork between stamping its tsreg and its BEGIN.
func ApplicationServer(t testing.TB, dbURL, name string) *sqlx.DB {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatalf("brptest: %v", err)
	}
	q := u.Query()
	q.Set("application_name", name)
	u.RawQuery = q.Encode()
	db, err := sqlx.Open("postgres", u.String())
	if err != nil {
		t.Fatalf("brptest: %v", err)
	}
	db.SetMaxOpenConns(4)
	db.SetMaxIdleConns(4)
	t.Cleanup(func() { db.Close() })
	return db
}

// BareDB is a database of t's own holding what ddl creates and nothing of the service (no
// migration run), and its URL: for tests of migrate itself.
func BareDB(t testing.TB, ddl string) (*sqlx.DB, string) {
	t.Helper()
	NeedsServices(t)
	name := "t_" + Name(t)
	db, dbURL, err := rig.CreateBareDB(context.Background(), DatabaseURL(), name, ddl)
	if err != nil {
		t.Fatalf("brptest: %v", err)
	}
	t.Cleanup(func() {
		db.Close()
		_ = rig.DropDB(context.Background(), DatabaseURL(), name)
	})
	return db, dbURL
}

// Queues are the destinations one test uses.
type Queues = rig.Queues

// NewQueues returns queues of t's own, so tests can share one broker.
func NewQueues(t testing.TB) Queues {
	t.Helper()
	NeedsServices(t)
	return rig.QueuesNamed("/queue/test." + Name(t))
}

// Received is one message read back from a queue.
type Received = rig.Received

// Reader reads a queue back in order (rig.Reader).
type Reader = rig.Reader

// Read subscribes to queue on the tests' broker and collects its messages until t ends.
func Read(t testing.TB, queue string) *Reader {
	t.Helper()
	return ReadFrom(t, Broker(), queue)
}

// ReadFrom is Read on the broker of cfg.
func ReadFrom(t testing.TB, cfg broker.Config, queue string) *Reader {
	t.Helper()
	return ReadAheadFrom(t, cfg, queue, 1)
}

// ReadAheadFrom is ReadFrom with the broker pushing up to prefetch messages ahead of the
// reader's acks (rig.ReadAhead), as a JMS client does.
func ReadAheadFrom(t testing.TB, cfg broker.Config, queue string, prefetch int) *Reader {
	t.Helper()
	NeedsServices(t)
	r, err := rig.ReadAhead(cfg, queue, prefetch)
	if err != nil {
		t.Fatalf("brptest: %v", err)
	}
	t.Cleanup(r.Close)
	return r
}

// Statuses counts handelingen per statuslev ("" for NULL).
func Statuses(t testing.TB, db *sqlx.DB) map[string]int {
	t.Helper()
	rows, err := db.Query(`select coalesce(statuslev::text, ''), count(*) from admhnd group by 1`)
	if err != nil {
		t.Fatalf("brptest: statuses: %v", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var s string
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			t.Fatalf("brptest: statuses: %v", err)
		}
		out[s] = n
	}
	return out
}

// Status returns one handeling's statuslev ("" for NULL).
func Status(t testing.TB, db *sqlx.DB, id int64) string {
	t.Helper()
	var s string
	if err := db.Get(&s, `select coalesce(statuslev::text, '') from admhnd where id = $1`, id); err != nil {
		t.Fatalf("brptest: status of %d: %v", id, err)
	}
	return s
}

// Publish puts raw publication messages on queue as the publisher would (admhnd-id 0 omits
// nothing: the header is always set, so bad bodies can be tested with a plausible header).
func Publish(t testing.TB, queue string, msgs ...broker.Message) {
	t.Helper()
	NeedsServices(t)
	publishTo(t, Broker(), queue, msgs...)
}

// publishTo is Publish on the broker of cfg.
func publishTo(t testing.TB, cfg broker.Config, queue string, msgs ...broker.Message) {
	t.Helper()
	conn, err := broker.Dial(context.Background(), cfg)
	if err != nil {
		t.Fatalf("brptest: broker at %s is not reachable (start it with scripts/services.sh up): %v", cfg.Addr, err)
	}
	defer conn.Disconnect()
	for i := range msgs {
		msgs[i].Destination = queue
	}
	if err := conn.Send(context.Background(), msgs...); err != nil {
		t.Fatalf("brptest: publish: %v", err)
	}
}

// NeedsServices skips t under `go test -short` (the unit lane, README): t needs PostgreSQL, a
// broker, or the commands built and running. Every helper here that reaches one calls it, so a
// test that uses them is in the full lane by itself.
func NeedsServices(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs PostgreSQL and a broker (not in the -short lane)")
	}
}

// kernColumns are the columns of the kern tables the service touches, as the facts give them
// (rig.BijhoudingKern): the service must add none.
var kernColumns = map[string][]string{
	"admhnd": {"id", "partij", "srt", "statuslev", "toelichtingontlening", "tslev", "tsreg"},
	"his_persafgeleidadministrati": {"actieinh", "actieverval", "actievervaltbvlevmuts", "admhnd", "id",
		"indvoorkomentbvlevmuts", "nadereaandverval", "pers", "sorteervolgorde", "tslaatstewijz",
		"tslaatstewijzgbasystematiek", "tsreg", "tsverval"},
}

// KernUntouched checks on a kern layout database what the service must leave alone: no
// column added to kern.admhnd or kern.his_persafgeleidadministrati, and nietLeveren
// handelingen still in status 2 (niet leveren) without a tslev, all of them.
func KernUntouched(t testing.TB, db *sqlx.DB, nietLeveren int) {
	t.Helper()
	for table, want := range kernColumns {
		var got []string
		if err := db.Select(&got, `select column_name::text from information_schema.columns
			where table_schema = 'kern' and table_name = $1 order by 1`, table); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Errorf("kern.%s has columns %v, want %v (the service adds none)", table, got, want)
		}
	}
	var n, other int
	if err := db.QueryRow(`select count(*) filter (where statuslev = 2 and tslev is null),
		count(*) filter (where statuslev = 2 and tslev is not null) from kern.admhnd`).Scan(&n, &other); err != nil {
		t.Fatal(err)
	}
	if n != nietLeveren || other != 0 {
		t.Errorf("status 2 (niet leveren): %d without tslev and %d with, want %d and 0: the service touched one", n, other, nietLeveren)
	}
}

// ClearHandelingen removes every handeling, its persons, the operators' actions and the
// publisher's records from db, for a test that runs many states on one database: on the kern
// layout from the kern tables (the views cannot be truncated) and admhnd_levering.
func ClearHandelingen(t testing.TB, db *sqlx.DB) {
	t.Helper()
	q := `truncate admhnd_beheer, admhnd_persoon, admhnd, publicatie_nakomer`
	if Layout() == handeling.Kern {
		q = `truncate admhnd_beheer, kern.his_persafgeleidadministrati, kern.actie, kern.admhnd, admhnd_levering,
			publicatie_nakomer, publicatie_fout_changes`
	}
	if _, err := db.Exec(q); err != nil {
		t.Fatal(err)
	}
}
