package levering_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/brp/levering/broker"
	"github.com/brp/levering/handeling"
	"github.com/brp/levering/internal/brptest"
	"github.com/brp/levering/internal/load"
	"github.com/brp/levering/levering"
)

// The consumer is the last check of the per-person order (docs/robustness.md, "Order at the
// consumer"): whatever the publication queue names, a handeling reaches the verzending queue
// only when no older handeling of its persons must be delivered first, and with the persons
// its publication carried.

// A publication of a person's newer handeling while an older one is still open (a forged or
// misrouted publication: a second deployment on the queue, an old release, an operator's
// replay) is held back: set back to be delivered, counted, nothing sent. What counts as open
// follows the fout policy; excluded soorten never count.
func TestNewerHandelingWaitsForAnOlderOne(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		policy  handeling.FoutPolicy
		older   string // the older handeling's statuslev
		prepare string // SQL on the older handeling (id 1)
		wait    bool
	}{
		{name: "still to be delivered", older: "", wait: true},
		{name: "in levering elsewhere", older: "in_levering", wait: true},
		{name: "fout", older: "fout", wait: true},
		{name: "fout released", older: "fout", prepare: `update admhnd set vrijgegeven = now() where id = 1`},
		{name: "fout under skip", policy: handeling.Skip, older: "fout"},
		{name: "excluded", older: "", prepare: `update admhnd set soort = 'GBA_INITIELE_VULLING' where id = 1`},
		{name: "geleverd", older: "geleverd"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := startWith(t, levering.Config{FoutPolicy: tc.policy})
			insert(t, e.db, tc.older, load.Handeling{ID: 1, Personen: []int64{10}})
			insert(t, e.db, "in_levering", load.Handeling{ID: 2, Personen: []int64{10, 20}})
			if tc.prepare != "" {
				e.db.MustExec(tc.prepare)
			}
			// Registered with a tsreg in the past, both were recorded for the publisher, which
			// read them.
			e.db.MustExec(`delete from publicatie_nakomer`)
			brptest.Publish(t, e.q.Publicatie, publication(2, 20, 10))
			if !tc.wait {
				e.waitCounts(t, levering.Counts{Delivered: 1})
				if got := e.verzending.IDs(); !slices.Equal(got, []int64{2}) {
					t.Fatalf("verzending %v, want [2]", got)
				}
				return
			}
			e.waitCounts(t, levering.Counts{HeldBack: 1})
			wantHeldBack(t, e, map[string]float64{"older_open": 1})
			if n := e.verzending.Count(); n != 0 {
				t.Fatalf("%d verzending messages, want none", n)
			}
			if s := brptest.Status(t, e.db, 2); s != "" {
				t.Fatalf("handeling 2 is %q, want it set back to be delivered", s)
			}
			// The publisher's view may lack an older one still to be delivered (registered
			// late): it is recorded for it. One in levering or fout it knows.
			if got, want := nakomer(t, e.db), map[bool][]int64{true: {1, 2}, false: {2}}[tc.older == ""]; !slices.Equal(got, want) {
				t.Fatalf("publicatie_nakomer %v, want %v", got, want)
			}
		})
	}
}

// A group that carries another person's handeling (misrouted, or forged) delivers what may go
// and holds back the member whose person has an older handeling open.
func TestMisroutedGroupMemberWaits(t *testing.T) {
	t.Parallel()
	e := start(t)
	insert(t, e.db, "in_levering", load.Handeling{ID: 1, Personen: []int64{10}}, load.Handeling{ID: 3, Personen: []int64{20}})
	insert(t, e.db, "", load.Handeling{ID: 2, Personen: []int64{20}}) // older than 3, still to be delivered
	brptest.Publish(t, e.q.Publicatie, group(handeling.Member{ID: 1, Personen: []int64{10}}, handeling.Member{ID: 3, Personen: []int64{20}}))
	e.waitCounts(t, levering.Counts{Delivered: 1, HeldBack: 1})
	if got := e.verzending.IDs(); !slices.Equal(got, []int64{1}) {
		t.Fatalf("verzending %v, want [1]", got)
	}
	if s := brptest.Status(t, e.db, 3); s != "" {
		t.Fatalf("handeling 3 is %q, want it set back", s)
	}
}

// A publication whose persons are not the handeling's persons in the database (persons added
// after it was published, or a forged body) is held back, so that the publisher publishes it
// again with its persons. The order or repetition of the persons in the body does not matter.
func TestPersonsMustBeThoseThePublicationCarried(t *testing.T) {
	t.Parallel()
	e := start(t)
	insert(t, e.db, "in_levering", load.Handeling{ID: 1, Personen: []int64{10, 11}}, load.Handeling{ID: 2, Personen: []int64{20, 21}})
	brptest.Publish(t, e.q.Publicatie, publication(1, 10), publication(2, 21, 20, 21))
	e.waitCounts(t, levering.Counts{Delivered: 1, HeldBack: 1})
	wantHeldBack(t, e, map[string]float64{"persons_changed": 1})
	if got := e.verzending.IDs(); !slices.Equal(got, []int64{2}) {
		t.Fatalf("verzending %v, want [2]", got)
	}
	if s := brptest.Status(t, e.db, 1); s != "" {
		t.Fatalf("handeling 1 is %q, want it set back", s)
	}
}

// A publication of a handeling still to be delivered (a round whose database commit failed
// after its broker commit; a publication from elsewhere) is left alone: only the publisher
// moves a handeling into levering, after its own checks, and it publishes this one again.
func TestPublicationOfAHandelingNotInLeveringIsLeftAlone(t *testing.T) {
	t.Parallel()
	e := start(t)
	insert(t, e.db, "", load.Handeling{ID: 1, Personen: []int64{10}})
	e.db.MustExec(`delete from publicatie_nakomer`) // recorded at registration (a tsreg in the past): read
	brptest.Publish(t, e.q.Publicatie, publication(1, 10))
	e.waitCounts(t, levering.Counts{HeldBack: 1})
	wantHeldBack(t, e, map[string]float64{"not_in_levering": 1})
	if s := brptest.Status(t, e.db, 1); s != "" || e.verzending.Count() != 0 {
		t.Fatalf("handeling 1 is %q with %d verzending messages, want it untouched", s, e.verzending.Count())
	}
	if got := nakomer(t, e.db); len(got) != 0 {
		t.Fatalf("publicatie_nakomer %v, want nothing recorded", got)
	}
}

// Two consumers holding handelingen of the same persons at once (publications a publisher
// would never send together) check each other's: neither deadlocks, neither holds the other
// back for good, and the verzending queue shows each person's handelingen in order. Each
// round publishes a chain of handelingen of a few persons, one publication each, in random
// order, to two consumers of one handeling per batch; what is held back is published again
// (as the publisher would) until everything is delivered.
func TestConsumersCheckingEachOthersHandelingen(t *testing.T) {
	t.Parallel()
	e := startWith(t, levering.Config{Batch: 1})
	other := startAnother(t, e, levering.Config{Workers: 2, Batch: 1})
	r := rand.New(rand.NewPCG(1, 2))
	var hs []load.Handeling
	for round := range 20 {
		var chain []load.Handeling
		for i := range 6 {
			id := int64(round*10 + i + 1)
			chain = append(chain, load.Handeling{ID: id, Personen: []int64{int64(round*10 + 1 + r.IntN(3))}})
		}
		insert(t, e.db, "in_levering", chain...)
		hs = append(hs, chain...)
		publishUntilDelivered(t, e, r, round, chain)
	}
	brptest.Eventually(t, 10*time.Second, func() error {
		if n := len(e.verzending.IDs()); n < len(hs) {
			return fmt.Errorf("%d of %d on the verzending queue", n, len(hs))
		}
		return nil
	})
	if rep := load.CheckOrder(e.verzending.IDs(), load.ByID(hs)); len(rep.Violations) > 0 || rep.Distinct != len(hs) {
		t.Fatalf("%d of %d delivered; order: %v", rep.Distinct, len(hs), rep.Violations)
	}
	// The check was exercised: newer handelingen came first and were held back, on both.
	a, b := e.c.Counts(), other.Counts()
	t.Logf("delivered %d + %d, held back %d + %d", a.Delivered, b.Delivered, a.HeldBack, b.HeldBack)
	if a.HeldBack == 0 || b.HeldBack == 0 || a.Delivered == 0 || b.Delivered == 0 {
		t.Fatalf("each consumer must have delivered and held back: %+v, %+v", a, b)
	}
}

// startAnother runs a second consumer with cfg on e's database and queues.
func startAnother(t *testing.T, e *env, cfg levering.Config) *levering.Consumer {
	t.Helper()
	cfg.Queue, cfg.VerzendingQueue, cfg.DeadLetterQueue, cfg.Broker = e.q.Publicatie, e.q.Verzending, e.q.DLQ, brptest.Broker()
	cfg.Layout = brptest.Layout()
	c, err := levering.New(e.db, cfg, quiet())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = c.Run(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
	return c
}

// publishUntilDelivered publishes chain, one publication each, in random order, and publishes
// what was held back again (as the publisher would) until everything is delivered; each time
// something must move.
func publishUntilDelivered(t *testing.T, e *env, r *rand.Rand, round int, chain []load.Handeling) {
	t.Helper()
	for pending := chain; len(pending) > 0; {
		var msgs []broker.Message
		for _, i := range r.Perm(len(pending)) {
			msgs = append(msgs, publication(pending[i].ID, pending[i].Personen...))
		}
		brptest.Publish(t, e.q.Publicatie, msgs...)
		brptest.Eventually(t, 20*time.Second, func() error {
			if n := countStatus(t, e.db, "in_levering"); n > 0 {
				return fmt.Errorf("%d still in levering", n)
			}
			return nil
		})
		var back []load.Handeling
		for _, h := range pending {
			if brptest.Status(t, e.db, h.ID) == "" {
				back = append(back, h)
			}
		}
		if len(back) == len(pending) {
			t.Fatalf("round %d: every one of %v held back: nothing moves", round, back)
		}
		for _, h := range back {
			e.db.MustExec(`update admhnd set statuslev = 'in_levering' where id = $1`, h.ID)
		}
		pending = back
	}
}

// nakomer returns the ids recorded in publicatie_nakomer, ascending.
func nakomer(t *testing.T, db *sqlx.DB) []int64 {
	t.Helper()
	var ids []int64
	if err := db.Select(&ids, `select admhnd_id from publicatie_nakomer order by 1`); err != nil {
		t.Fatal(err)
	}
	return ids
}

func countStatus(t *testing.T, db *sqlx.DB, status string) int {
	t.Helper()
	var n int
	if err := db.Get(&n, `select count(*) from admhnd where statuslev::text = $1`, status); err != nil {
		t.Fatal(err)
	}
	return n
}

// A handeling of which a newer handeling of one of its persons was already delivered (it was
// registered, or got that person, late) can no longer reach afnemers in order: it ends fout,
// handeling.FoutOvertaken, and nothing is sent. An operator decides.
func TestOvertakenHandelingEndsFout(t *testing.T) {
	t.Parallel()
	e := start(t)
	insert(t, e.db, "geleverd", load.Handeling{ID: 2, Personen: []int64{10}})
	insert(t, e.db, "in_levering", load.Handeling{ID: 1, Personen: []int64{10, 20}})
	brptest.Publish(t, e.q.Publicatie, publication(1, 10, 20))
	e.waitCounts(t, levering.Counts{Fout: 1})
	var reason string
	if err := e.db.Get(&reason, `select foutreden from admhnd where id = 1 and statuslev::text = 'fout'`); err != nil || reason != handeling.FoutOvertaken {
		t.Fatalf("handeling 1: foutreden %q (%v), want %q", reason, err, handeling.FoutOvertaken)
	}
	if n := e.verzending.Count(); n != 0 {
		t.Fatalf("%d verzending messages, want none", n)
	}
}

// A newer handeling of a person of the batch in levering outside it (two publications of one
// person in flight: forged, or persons added late) is locked for the batch's transaction, so
// that the consumer delivering it sees this older one delivered first. While another
// consumer's transaction holds it, the batch waits for that one to end: then it either was
// delivered (this one was overtaken) or is still in levering (this one goes first).
func TestNewerInLeveringElsewhere(t *testing.T) {
	t.Parallel()
	for _, delivered := range []bool{false, true} {
		t.Run(fmt.Sprintf("delivered=%t", delivered), func(t *testing.T) {
			t.Parallel()
			e := start(t)
			insert(t, e.db, "in_levering", load.Handeling{ID: 1, Personen: []int64{10}}, load.Handeling{ID: 2, Personen: []int64{10}})
			other := e.db.MustBegin() // another consumer, delivering 2
			defer other.Rollback()    //nolint:errcheck
			other.MustExec(`select id from admhnd where id = 2 for update`)
			brptest.Publish(t, e.q.Publicatie, publication(1, 10))
			time.Sleep(500 * time.Millisecond)
			if c := e.c.Counts(); c != (levering.Counts{}) || e.verzending.Count() != 0 {
				t.Fatalf("while 2 is held by another: %+v, %d sent; want the batch waiting", c, e.verzending.Count())
			}
			if delivered {
				other.MustExec(`update admhnd set statuslev = 'geleverd', tslev = now() where id = 2`)
			}
			if err := other.Commit(); err != nil {
				t.Fatal(err)
			}
			if delivered {
				e.waitCounts(t, levering.Counts{Fout: 1})
				if s := brptest.Status(t, e.db, 1); s != "fout" {
					t.Fatalf("handeling 1 is %q, want fout (overtaken)", s)
				}
				return
			}
			e.waitCounts(t, levering.Counts{Delivered: 1})
			if got := e.verzending.IDs(); !slices.Equal(got, []int64{1}) {
				t.Fatalf("verzending %v, want [1]", got)
			}
		})
	}
}

// Persons bijhouding commits for a handeling (another transaction) while a consumer has it:
// either they committed before the consumer locked its row, and it sees them (and holds the
// handeling back: its publication carried the old persons), or the consumer locked first, and
// their insert waits for its commit (the foreign key, or migration 0011's trigger, holds the
// row) and is then reported as persons added after delivery. Never delivered with persons the
// database had before the consumer committed.
func TestPersonsCommittedWhileAConsumerChecks(t *testing.T) {
	t.Parallel()
	// Without a key, admhnd_persoon has no foreign key either: the trigger holds the row.
	for _, f := range []brptest.Form{brptest.DefaultForm(), brptest.PersoonWithoutKey} {
		t.Run(f.Name+"/persons first", func(t *testing.T) {
			t.Parallel()
			e := startOn(t, f, levering.Config{})
			insert(t, e.db, "in_levering", load.Handeling{ID: 1, Personen: []int64{10}})
			tx := e.db.MustBegin()
			defer tx.Rollback() //nolint:errcheck
			tx.MustExec(`insert into admhnd_persoon (admhnd_id, persoon_id) values (1, 20)`)
			brptest.Publish(t, e.q.Publicatie, publication(1, 10))
			time.Sleep(500 * time.Millisecond) // the consumer waits for the row
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			e.waitCounts(t, levering.Counts{HeldBack: 1})
			wantHeldBack(t, e, map[string]float64{"persons_changed": 1})
		})
		t.Run(f.Name+"/consumer first", func(t *testing.T) {
			t.Parallel()
			locked := make(chan struct{})
			release := make(chan struct{})
			e := startOn(t, f, levering.Config{Hooks: levering.Hooks{AfterLock: func(context.Context, []int64) error {
				close(locked)
				<-release
				return nil
			}}})
			insert(t, e.db, "in_levering", load.Handeling{ID: 1, Personen: []int64{10}})
			brptest.Publish(t, e.q.Publicatie, publication(1, 10))
			<-locked
			added := make(chan error, 1)
			go func() {
				_, err := e.db.Exec(`insert into admhnd_persoon (admhnd_id, persoon_id) values (1, 20)`)
				added <- err
			}()
			select {
			case err := <-added:
				t.Fatalf("the persons' insert did not wait for the consumer: %v", err)
			case <-time.After(500 * time.Millisecond):
			}
			close(release)
			if err := <-added; err != nil {
				t.Fatal(err)
			}
			e.waitCounts(t, levering.Counts{Delivered: 1})
			var reported []int64
			if err := e.db.Select(&reported, `select admhnd_id from publicatie_laat_personen`); err != nil || !slices.Equal(reported, []int64{1}) {
				t.Fatalf("reported as persons added after delivery: %v (%v), want [1]", reported, err)
			}
		})
	}
}

// A batch cut off between its broker commit and its database commit (killed, its database
// lost) leaves copies on the verzending queue of handelingen that are in levering again. Its
// record in levering_onderweg (migration 0012), committed before the send, says so: an older
// handeling of their persons that arrives late is overtaken, outside the batch or in it, and
// the handeling itself is delivered again (a duplicate) however it is checked.
func TestVerzendingOnderwegOvertakesOlderOnes(t *testing.T) {
	t.Parallel()
	e := start(t)
	// 5 and 7 were sent by a batch that did not commit; 3 and 6 arrived late, older.
	insert(t, e.db, "in_levering", load.Handeling{ID: 3, Personen: []int64{10}}, load.Handeling{ID: 5, Personen: []int64{10}},
		load.Handeling{ID: 6, Personen: []int64{30}}, load.Handeling{ID: 7, Personen: []int64{30}},
		load.Handeling{ID: 4, Personen: []int64{20}})
	e.db.MustExec(`delete from publicatie_nakomer`)
	e.db.MustExec(`insert into levering_onderweg (admhnd_id) values (5), (7)`)
	brptest.Publish(t, e.q.Publicatie, publication(3, 10), publication(4, 20),
		group(handeling.Member{ID: 6, Personen: []int64{30}}, handeling.Member{ID: 7, Personen: []int64{30}}))
	e.waitCounts(t, levering.Counts{Delivered: 2, Fout: 2})
	for id, want := range map[int64]string{3: "fout", 4: "geleverd", 6: "fout", 7: "geleverd"} {
		if s := brptest.Status(t, e.db, id); s != want {
			t.Fatalf("handeling %d %q, want %q", id, s, want)
		}
	}
	brptest.Publish(t, e.q.Publicatie, publication(5, 10))
	e.waitCounts(t, levering.Counts{Delivered: 3, Fout: 2})
	var left []int64
	if err := e.db.Select(&left, `select admhnd_id from levering_onderweg order by 1`); err != nil || len(left) != 0 {
		t.Fatalf("levering_onderweg holds %v (%v) once 5 and 7 are geleverd, want nothing", left, err)
	}
}

// The record is committed before the send and stays while the batch has not committed; the
// commit that sets the handeling geleverd removes it.
func TestVerzendingOnderwegIsRecordedBeforeTheSend(t *testing.T) {
	t.Parallel()
	sent, release := make(chan struct{}), make(chan error)
	var once sync.Once
	cfg := levering.Config{}
	cfg.Hooks.AfterVerzending = func(context.Context, []int64) error {
		var err error
		once.Do(func() {
			close(sent)
			err = <-release
		})
		return err
	}
	e := startWith(t, cfg)
	insert(t, e.db, "in_levering", load.Handeling{ID: 1, Personen: []int64{10}})
	brptest.Publish(t, e.q.Publicatie, publication(1, 10))
	<-sent
	var n int
	if err := e.db.Get(&n, `select count(*) from levering_onderweg where admhnd_id = 1`); err != nil || n != 1 {
		t.Fatalf("handeling 1 recorded onderweg %d times (%v) while its copy is out and its batch open, want 1", n, err)
	}
	release <- errors.New("cut off after the broker commit") // the batch rolls back; the record stays
	e.waitCounts(t, levering.Counts{Delivered: 1})
	if err := e.db.Get(&n, `select count(*) from levering_onderweg`); err != nil || n != 0 {
		t.Fatalf("levering_onderweg holds %d (%v) once handeling 1 is geleverd, want 0", n, err)
	}
	brptest.Eventually(t, 10*time.Second, func() error {
		if c := e.verzending.Count(); c != 2 {
			return fmt.Errorf("%d verzending messages, want 2 (the first copy and the delivery)", c)
		}
		return nil
	})
}

// A publication that carries an older handeling together with a newer one of its person that
// is geleverd already (forged, misrouted; the newer one reached afnemers first) ends the older
// one fout as overtaken, as when the newer one comes in no publication at all.
func TestOvertakenByAMemberOfItsOwnPublication(t *testing.T) {
	t.Parallel()
	e := start(t)
	insert(t, e.db, "geleverd", load.Handeling{ID: 2, Personen: []int64{10}})
	insert(t, e.db, "in_levering", load.Handeling{ID: 1, Personen: []int64{10}})
	e.db.MustExec(`delete from publicatie_nakomer`)
	brptest.Publish(t, e.q.Publicatie, group(handeling.Member{ID: 2, Personen: []int64{10}}, handeling.Member{ID: 1, Personen: []int64{10}}))
	e.waitCounts(t, levering.Counts{Fout: 1, Duplicates: 1})
	if s := brptest.Status(t, e.db, 1); s != "fout" {
		t.Fatalf("handeling 1 %q, want fout (overtaken by 2 of its own publication)", s)
	}
	if n := e.verzending.Count(); n != 0 {
		t.Fatalf("%d verzending messages, want none", n)
	}
}

// A handeling recorded onderweg is delivered again even when persons were added to it since
// (its copy is out; set back, it would no longer count as out).
func TestOnderwegIsDeliveredDespiteLatePersons(t *testing.T) {
	t.Parallel()
	e := start(t)
	insert(t, e.db, "in_levering", load.Handeling{ID: 1, Personen: []int64{10, 20}})
	e.db.MustExec(`delete from publicatie_nakomer`)
	e.db.MustExec(`insert into levering_onderweg (admhnd_id) values (1)`)
	brptest.Publish(t, e.q.Publicatie, publication(1, 10)) // as its first attempt carried it
	e.waitCounts(t, levering.Counts{Delivered: 1})
	if s := brptest.Status(t, e.db, 1); s != "geleverd" {
		t.Fatalf("handeling 1 %q, want geleverd", s)
	}
}

// A consumer with more workers than its pool allows connections for two each raises the
// limit: every worker holds its batch's transaction and records on a second connection.
func TestManyWorkersOnASmallPool(t *testing.T) {
	t.Parallel()
	db, _ := brptest.DB(t)
	db.SetMaxOpenConns(4)
	if _, err := levering.New(db, levering.Config{Queue: "/queue/x", Broker: brptest.Broker(), Workers: 8}, quiet()); err != nil {
		t.Fatal(err)
	}
	if n := db.Stats().MaxOpenConnections; n != 17 {
		t.Fatalf("pool limit %d, want 17 (two a worker and one)", n)
	}
}
