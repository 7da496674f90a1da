package publicatie

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/brp/levering/handeling"
	"github.com/brp/levering/internal/brptest"
)

// Open writers (migration 0018, writers.go): a transaction linking handelingen to persons
// holds back those persons' work for as long as it is open, and nobody else's beyond MaxWait.

// The key the trigger locks for a person is WriterKey's, over the whole range of ids.
func TestWriterKeyIsTheLockKey(t *testing.T) {
	t.Parallel()
	e := newRoundEnv(t, Config{})
	persons := []int64{1, 30, 2147483646, 2147483647, 2147483648, 9007199254740993}
	tx := e.db.MustBegin()
	defer tx.Rollback() //nolint:errcheck
	tx.MustExec(`insert into admhnd (id, soort, tsreg) values (1, 'VERHUIZING', now())`)
	for _, p := range persons {
		tx.MustExec(`insert into admhnd_persoon (admhnd_id, persoon_id) values (1, $1)`, p)
	}
	var got []int64
	if err := tx.Select(&got, `select objid::int8 from pg_locks where locktype = 'advisory' and classid = 7345003
		and objsubid = 2 and pid = pg_backend_pid() order by 1`); err != nil {
		t.Fatal(err)
	}
	var want []int64
	for _, p := range persons {
		want = append(want, int64(WriterKey(p)))
	}
	slices.Sort(want)
	want = slices.Compact(want)
	if !slices.Equal(got, want) {
		t.Fatalf("lock keys %v, want WriterKey's %v", got, want)
	}
}

// A transaction registers a handeling, another commits a newer one of person 30, then the
// first links person 30 to its handeling and stays open past MaxWait: person 30's newer one
// waits for it (person 40's does not), and once it commits its handeling goes first. Before
// migration 0018 the newer one went out after MaxWait and the older one ended fout
// (ingehaald). (The newer one commits before the link: in the kern layout a second
// transaction linking person 30 would wait for the first, whose his row it ends.)
func TestOpenWriterHoldsBackOnlyItsPersons(t *testing.T) {
	t.Parallel()
	e := newRoundEnv(t, Config{MaxWait: time.Second})
	writer := e.db.MustBegin()
	defer writer.Rollback() //nolint:errcheck
	writer.MustExec(`insert into admhnd (id, soort, tsreg) values (1, 'VERHUIZING', now())`)
	time.Sleep(100 * time.Millisecond)
	e.db.MustExec(`insert into admhnd (id, soort, tsreg) values (2, 'VERHUIZING', now()), (3, 'VERHUIZING', now());
		insert into admhnd_persoon values (2, 30), (3, 40)`)
	writer.MustExec(`insert into admhnd_persoon values (1, 30)`)
	time.Sleep(time.Second + LateWriterGrace)
	wantIDs(t, "past MaxWait: person 40's, not person 30's", e.round(), 3)
	if n := testutil.ToFloat64(e.pub.m.writerTx); n != 1 {
		t.Errorf("open writer transactions %v, want 1", n)
	}
	if n := testutil.ToFloat64(e.pub.m.writerKeys); n != 1 {
		t.Errorf("open writer persons %v, want 1", n)
	}
	if age := testutil.ToFloat64(e.pub.m.writerAge); age < 1 {
		t.Errorf("oldest open writer %v s, want at least 1", age)
	}
	wantIDs(t, "still open", e.round())
	if err := writer.Commit(); err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "committed: its handeling first", e.round(), 1)
	e.setStatus("geleverd", 1)
	wantIDs(t, "then person 30's newer one", e.round(), 2)
	if n := testutil.ToFloat64(e.pub.m.writerTx); n != 0 {
		t.Errorf("open writer transactions %v after the commit, want 0", n)
	}
}

// A group grows with a later handeling only if none of its new persons is being written.
func TestOpenWriterKeepsAHandelingOutOfAGroup(t *testing.T) {
	t.Parallel()
	e := newRoundEnv(t, Config{GroupSize: 10})
	e.insert(h(1, 1, 10), h(2, 2, 10, 50))
	writer := e.db.MustBegin()
	defer writer.Rollback() //nolint:errcheck
	writer.MustExec(`insert into admhnd (id, soort, tsreg) values (3, 'VERHUIZING', now());
		insert into admhnd_persoon values (3, 50)`)
	time.Sleep(LateWriterGrace + 200*time.Millisecond)
	wantIDs(t, "1 goes; 2 waits for the writer of person 50", e.round(), 1)
}

// A transaction that links more than MaxWriterLocks persons takes the bulk writer's lock:
// it holds the whole horizon while it is open, past MaxWait, and takes no more locks.
func TestBulkWriterHoldsTheHorizonUntilItEnds(t *testing.T) {
	t.Parallel()
	e := newRoundEnv(t, Config{MaxWait: time.Second})
	bulk := e.db.MustBegin()
	defer bulk.Rollback() //nolint:errcheck
	bulk.MustExec(`insert into admhnd (id, soort, tsreg) values (1, 'VERHUIZING', now())`)
	for p := range MaxWriterLocks + 4 {
		bulk.MustExec(`insert into admhnd_persoon values (1, $1)`, 1000+p)
	}
	// 16 person locks, the statement that passed 16 locks its row too, and the bulk lock.
	if n := advisoryLocks(t, bulk, 7345003, 7345004); n != MaxWriterLocks+2 {
		t.Fatalf("the bulk writer holds %d advisory locks, want %d", n, MaxWriterLocks+2)
	}
	e.wantHeldUntilCommit(bulk, 2, "a bulk writer", 1, 2)
}

// advisoryLocks counts the two-key advisory locks of these classids that tx holds.
func advisoryLocks(t *testing.T, tx *sqlx.Tx, classids ...int64) int {
	t.Helper()
	var n int
	if err := tx.Get(&n, `select count(*) from pg_locks where locktype = 'advisory' and objsubid = 2
		and classid = any($1) and pid = pg_backend_pid()`, pq.Array(classids)); err != nil {
		t.Fatal(err)
	}
	return n
}

// wantHeldUntilCommit checks that tx, open, holds the horizon past MaxWait (the roundEnv's is
// 1 s): handeling id of another person, registered meanwhile, is not published until tx
// commits, and then the round publishes want.
func (e *roundEnv) wantHeldUntilCommit(tx *sqlx.Tx, id int64, what string, want ...int64) {
	e.t.Helper()
	time.Sleep(100 * time.Millisecond)
	other := e.db.MustBegin()
	other.MustExec(`insert into admhnd (id, soort, tsreg) values ($1, 'VERHUIZING', now())`, id)
	other.MustExec(`insert into admhnd_persoon values ($1, 20)`, id)
	if err := other.Commit(); err != nil {
		e.t.Fatal(err)
	}
	time.Sleep(time.Second + LateWriterGrace)
	wantIDs(e.t, what+" open past MaxWait", e.round())
	if err := tx.Commit(); err != nil {
		e.t.Fatal(err)
	}
	wantIDs(e.t, what+" committed", e.round(), want...)
}

// A statement that registers more than MaxWriterLocks handelingen (a COPY, an insert ...
// select) takes the bulk writer's lock (migration 0019): its transaction holds the horizon
// until it ends, also between that statement and the one that links its persons, past MaxWait.
func TestBulkRegistrationHoldsTheHorizonUntilItEnds(t *testing.T) {
	t.Parallel()
	e := newRoundEnv(t, Config{MaxWait: time.Second})
	bulk := e.db.MustBegin()
	defer bulk.Rollback() //nolint:errcheck
	insert := `insert into admhnd (id, soort, tsreg) select i, 'VERHUIZING', now() from generate_series(1, $1::int) i`
	if brptest.Layout() == handeling.Kern {
		// One statement on the kern table itself: the test's view writes a row at a time.
		insert = `insert into kern.admhnd (id, srt, partij, tsreg, statuslev) select i, 1, 1, now(), 1 from generate_series(1, $1::int) i`
	}
	small := e.db.MustBegin()
	small.MustExec(strings.Replace(insert, "select i,", "select 1000 + i,", 1), MaxWriterLocks)
	if n := advisoryLocks(t, small, 7345004); n != 0 {
		t.Fatalf("a statement of %d handelingen holds the bulk writer's lock", MaxWriterLocks)
	}
	if err := small.Rollback(); err != nil {
		t.Fatal(err)
	}
	bulk.MustExec(insert, MaxWriterLocks+1)
	if n := advisoryLocks(t, bulk, 7345004); n != 1 {
		t.Fatalf("a statement of %d handelingen holds the bulk writer's lock %d times, want once", MaxWriterLocks+1, n)
	}
	// Committed, its handelingen wait for their persons (PersonlessGrace).
	e.wantHeldUntilCommit(bulk, 100, "a bulk registration", 100)
}

// Many transactions linking persons at once, each within MaxWriterLocks: every lock is
// shared, so none waits for another.
func TestOpenWritersNeverWaitForEachOther(t *testing.T) {
	t.Parallel()
	if brptest.Layout() == handeling.Kern {
		t.Skip("in the kern layout one person's writers wait for each other anyway: a new " +
			"his_persafgeleidadministrati row ends the person's previous one (tsverval), as bijhouding does")
	}
	e := newRoundEnv(t, Config{})
	for i := range 5 {
		tx := e.db.MustBegin()
		defer tx.Rollback() //nolint:errcheck
		tx.MustExec(`set local lock_timeout = '1s'`)
		tx.MustExec(fmt.Sprintf(`insert into admhnd (id, soort, tsreg) values (%d, 'VERHUIZING', now());
			insert into admhnd_persoon values (%d, 10), (%d, 20)`, i+1, i+1, i+1))
	}
}

// The rule on plain data (no database): a person an open transaction is linking holds back
// its head, and keeps a later handeling out of another person's group.
func TestWritersHoldBackTheirPersonsOnly(t *testing.T) {
	for _, tc := range []struct {
		name      string
		writing   []int64
		ready     []int64
		groupOfID int64
		group     []int64
	}{
		{name: "nobody writing", ready: []int64{1, 2, 5}, groupOfID: 1, group: []int64{1, 3, 4}},
		{name: "person 10 written", writing: []int64{10}, ready: []int64{2, 5}},
		{name: "person 30 written: 4 stays out of 1's group", writing: []int64{30}, ready: []int64{1, 2, 5}, groupOfID: 1, group: []int64{1, 3}},
		{name: "a person beyond int4", writing: []int64{1 << 40}, ready: []int64{1, 2}},
		{name: "a key shared with another person holds both", writing: []int64{50 + writerKeyModulus}, ready: []int64{1, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := viewOf(
				Candidate{ID: 1, Personen: []int64{10}},
				Candidate{ID: 2, Personen: []int64{20}},
				Candidate{ID: 3, Personen: []int64{10}},
				Candidate{ID: 4, Personen: []int64{10, 30}},
				Candidate{ID: 5, Personen: []int64{1 << 40, 50}},
			)
			var keys []int64
			for _, p := range tc.writing {
				keys = append(keys, int64(WriterKey(p)))
			}
			v.writers = newOpenWriters(keys, len(keys), 0)
			if got := ids(v.readyCandidates(10, map[int64]struct{}{})); !slices.Equal(got, tc.ready) {
				t.Errorf("ready = %v, want %v", got, tc.ready)
			}
			if tc.groupOfID != 0 {
				g := groupOf(v, Candidate{ID: tc.groupOfID, Personen: []int64{10}}, map[int64]struct{}{}, 100, DefaultGroupBytes)
				if got := ids(g); !slices.Equal(got, tc.group) {
					t.Errorf("group = %v, want %v", got, tc.group)
				}
			}
		})
	}
}

// WriterKey is PostgreSQL's persoon_id % 2147483647 as an int4, read back as pg_locks' oid.
func TestWriterKey(t *testing.T) {
	for _, tc := range []struct {
		p    int64
		want uint32
	}{
		{0, 0}, {1, 1}, {2147483646, 2147483646}, {2147483647, 0}, {2147483648, 1},
		{-1, 4294967295}, {-2147483647, 0}, {1<<63 - 1, 1},
	} {
		if got := WriterKey(tc.p); got != tc.want {
			t.Errorf("WriterKey(%d) = %d, want %d", tc.p, got, tc.want)
		}
	}
}

// The person-less grace on plain data: a handeling without persons is ready only when its
// tsreg lies before personlessBefore (the horizon less PersonlessGrace).
func TestPersonlessWaitsForItsGrace(t *testing.T) {
	v := viewOf(Candidate{ID: 1, Personen: []int64{10}}, Candidate{ID: 2}, Candidate{ID: 3})
	for _, tc := range []struct {
		before time.Time
		ready  []int64
	}{
		{t0, []int64{1}},
		{t0.Add(time.Millisecond), []int64{1}},
		{t0.Add(2 * time.Millisecond), []int64{1, 2}},
		{t0.Add(time.Second), []int64{1, 2, 3}},
	} {
		v.personlessBefore = tc.before
		if got := ids(v.readyCandidates(10, map[int64]struct{}{})); !slices.Equal(got, tc.ready) {
			t.Errorf("personless before %v: ready %v, want %v", tc.before.Sub(t0), got, tc.ready)
		}
	}
}
