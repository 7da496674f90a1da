package publicatie

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/brp/levering/handeling"
	"github.com/brp/levering/internal/brptest"
)

// Late arrivals (migration 0009, docs/robustness.md): persons committed after their handeling,
// and writers that register long after their transaction began.

// Persons added to a handeling in another transaction, while the view already holds it: the
// next round builds the view again and sees them, so the handeling holds the added person's
// newer work back. (Before: the newer one went first, and both were in levering at once.)
func TestLatePersonsBeforePublication(t *testing.T) {
	t.Parallel()
	e := newRoundEnv(t, Config{})
	e.insert(h(1, 1, 20), h(2, 5, 10), h(3, 10, 10), h(4, 20, 20))
	e.publishedNow(1, 2)
	wantIDs(t, "3 waits for 2, 4 for 1", e.round())
	e.db.MustExec(`insert into admhnd_persoon (admhnd_id, persoon_id) values (3, 20)`)
	e.setStatus("geleverd", 1)
	wantIDs(t, "4 waits for 3, which person 20 joined", e.round())
	e.setStatus("geleverd", 2)
	wantIDs(t, "3", e.round(), 3)
	wantIDs(t, "4 waits for 3 in levering", e.round())
	e.setStatus("geleverd", 3)
	wantIDs(t, "then 4", e.round(), 4)
	wantOvertaken(t, e, 0, 0)
}

// Persons added to a handeling still to be delivered after a newer handeling of one of them
// was published: delivered now, it would arrive after that one. It ends fout with the reason,
// and is counted.
func TestLatePersonsOvertakenEndFout(t *testing.T) {
	t.Parallel()
	e := newRoundEnv(t, Config{})
	e.insert(h(1, 1, 10), h(2, 5, 10), h(3, 10, 20))
	wantIDs(t, "first round", e.round(), 1, 3)
	e.db.MustExec(`insert into admhnd_persoon (admhnd_id, persoon_id) values (2, 20)`)
	e.setStatus("geleverd", 1)
	wantIDs(t, "2 was overtaken by 3: not published", e.round())
	wantFout(t, e, 2, handeling.FoutOvertaken)
	wantOvertaken(t, e, 1, 0)
	// An operator's retry delivers it all the same, after 3.
	e.setStatus("geleverd", 3)
	e.db.MustExec(`update admhnd set statuslev = null, foutreden = null where id = 2`)
	wantIDs(t, "retried", e.round(), 2)
}

// Persons added to a handeling already published, with a newer handeling of them published
// as well: nothing can be undone, so the breach is logged and counted, and nothing changes.
func TestLatePersonsAfterPublicationAreReported(t *testing.T) {
	t.Parallel()
	e := newRoundEnv(t, Config{})
	e.insert(h(1, 1, 10), h(2, 10, 20))
	wantIDs(t, "first round", e.round(), 1, 2)
	e.db.MustExec(`insert into admhnd_persoon (admhnd_id, persoon_id) values (1, 20)`)
	wantIDs(t, "nothing new", e.round())
	wantOvertaken(t, e, 0, 1)
	if s := brptest.Status(t, e.db, 1); s != "in_levering" {
		t.Fatalf("handeling 1 is %q, want it left in levering", s)
	}
}

// While a transaction that adds persons late is open, rounds mark nothing: the view may lack
// the persons it adds. The round that holds the lock makes such a transaction wait instead.
func TestOpenLatePersonsTransactionHoldsMarking(t *testing.T) {
	t.Parallel()
	e := newRoundEnv(t, Config{})
	e.insert(h(1, 1, 10), h(2, 5, 10), h(3, 10, 30))
	e.publishedNow(1)
	tx := e.db.MustBegin()
	defer tx.Rollback() //nolint:errcheck
	tx.MustExec(`insert into admhnd_persoon (admhnd_id, persoon_id) values (2, 30)`)
	wantIDs(t, "a late-persons transaction is open: nothing marked", e.round())
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "committed: 3 waits for 2, which person 30 joined", e.round())
	e.setStatus("geleverd", 1)
	wantIDs(t, "2", e.round(), 2)
	e.setStatus("geleverd", 2)
	wantIDs(t, "3", e.round(), 3)
}

// A read-only transaction (pg_dump, a report) holds back the horizon for LateWriterGrace only;
// a transaction that wrote holds it back until it ends.
func TestRoundHorizonLeavesOutReadersAfterTheGrace(t *testing.T) {
	t.Parallel()
	e := newRoundEnv(t, Config{})
	reader := e.db.MustBegin()
	defer reader.Rollback()     //nolint:errcheck
	reader.MustExec(`select 1`) // the transaction starts with its first statement
	time.Sleep(LateWriterGrace + 200*time.Millisecond)
	e.db.MustExec(`insert into admhnd (id, soort, tsreg) values (1, 'VERHUIZING', now());
		insert into admhnd_persoon values (1, 10)`)
	wantIDs(t, "a reader open for longer than the grace", e.round(), 1)

	writer := e.db.MustBegin()
	defer writer.Rollback()                        //nolint:errcheck
	writer.MustExec(`select pg_current_xact_id()`) // has a transaction id, as a writer has
	time.Sleep(LateWriterGrace + 200*time.Millisecond)
	e.db.MustExec(`insert into admhnd (id, soort, tsreg) values (2, 'VERHUIZING', now());
		insert into admhnd_persoon values (2, 20)`)
	wantIDs(t, "a writer's transaction holds it back", e.round())
	if err := writer.Rollback(); err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "writer ended", e.round(), 2)
}

// A late writer: a transaction that begins, writes nothing for longer than the grace (so the
// horizon passes its start), then registers handelingen stamped with its start. The one whose
// person has nothing newer published goes before that person's newer work; the one whose
// person's newer handeling was published meanwhile ends fout. Order never breaks.
func TestLateWriterNeverOvertakes(t *testing.T) {
	t.Parallel()
	e := newRoundEnv(t, Config{})
	e.insert(h(1, 1, 30))
	wantIDs(t, "person 30's oldest", e.round(), 1)
	late := e.db.MustBegin()
	defer late.Rollback() //nolint:errcheck
	late.MustExec(`select 1`)
	time.Sleep(LateWriterGrace + 200*time.Millisecond)
	e.db.MustExec(`insert into admhnd (id, soort, tsreg) values (2, 'VERHUIZING', now()), (3, 'VERHUIZING', now());
		insert into admhnd_persoon values (2, 20), (3, 30)`)
	wantIDs(t, "2 published; 3 waits for 1", e.round(), 2)
	late.MustExec(`insert into admhnd (id, soort, tsreg) values (10, 'VERHUIZING', now()), (11, 'VERHUIZING', now());
		insert into admhnd_persoon values (10, 20), (11, 30)`)
	if err := late.Commit(); err != nil {
		t.Fatal(err)
	}
	e.setStatus("geleverd", 1)
	wantIDs(t, "11 before person 30's newer 3; 10 was overtaken by 2", e.round(), 11)
	wantFout(t, e, 10, handeling.FoutOvertaken)
	wantOvertaken(t, e, 1, 0)
	e.setStatus("geleverd", 11)
	wantIDs(t, "then 3", e.round(), 3)
}

func wantFout(t *testing.T, e *roundEnv, id int64, reden string) {
	t.Helper()
	var got struct {
		Status string `db:"statuslev"`
		Reden  string `db:"foutreden"`
	}
	if err := e.db.GetContext(context.Background(), &got,
		`select coalesce(statuslev::text, '') as statuslev, coalesce(foutreden, '') as foutreden from admhnd where id = $1`, id); err != nil {
		t.Fatal(err)
	}
	if got.Status != "fout" || got.Reden != reden {
		t.Fatalf("handeling %d is %q (%q), want fout (%q)", id, got.Status, got.Reden, reden)
	}
}

func wantOvertaken(t *testing.T, e *roundEnv, fout, published float64) {
	t.Helper()
	if n := testutil.ToFloat64(e.pub.m.overtaken.WithLabelValues("fout")); n != fout {
		t.Fatalf("overtaken fout counted %v, want %v", n, fout)
	}
	if n := testutil.ToFloat64(e.pub.m.overtaken.WithLabelValues("published")); n != published {
		t.Fatalf("overtaken published counted %v, want %v", n, published)
	}
}
