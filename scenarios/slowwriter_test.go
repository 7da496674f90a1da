package scenarios

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/brp/levering/handeling"
	"github.com/brp/levering/internal/brptest"
	"github.com/brp/levering/internal/load"
)

// TestSlowWritersEndNothingInFout (issue 48; docs/contract.md guarantee 9, "slowness is not an
// error"), on the real processes, in the layout of the run, beside a steady load of other
// persons registered from the client's clock:
//
//   - a slow writer: a transaction registers a handeling, another commits newer handelingen of
//     five persons, then the first links those persons and stays open 6 s (three times
//     MAXWAIT; BRP_SLOW_WRITER_SECONDS) before it commits;
//   - a bulk writer: one transaction registers 100,000 person links (1,000 handelingen; in the
//     kern layout 5,000 links, the test's compatibility layer writing each his row with a
//     trigger) with PostgreSQL's default lock settings, each handeling also of one of the
//     load's persons, and stays open 3 s;
//   - persons that come later: a handeling registered without persons, its persons linked 2 s
//     later by another transaction (newer handelingen of them after that).
//
// Everything ends geleverd, nothing fout, per person in order on the verzending queue; and the
// other persons' work flows while the slow writer is open (some of what they registered after
// it began is delivered before it commits).
func TestSlowWritersEndNothingInFout(t *testing.T) {
	t.Parallel()
	w := makeEmptyWorld(t, nil, brptest.Broker(), load.Spec{})
	w.hs = nil
	bin := brptest.Build(t, "cmd/mutatielevering")
	for i := range 2 {
		w.consumerProc(t, fmt.Sprintf("mutatielevering-%d", i+1), bin).WaitReady(30 * time.Second)
	}
	w.publisherProc(t, "publicatie", brptest.Build(t, "cmd/publicatie")).WaitReady(30 * time.Second)

	var mu sync.Mutex
	var nextID atomic.Int64
	add := func(h load.Handeling) {
		mu.Lock()
		defer mu.Unlock()
		w.hs = append(w.hs, h)
	}
	// register registers a handeling of these persons in q, stamped with the client's clock
	// (as a pooled application server does, before its BEGIN).
	register := func(q sqlx.Execer, tsreg time.Time, personen ...int64) load.Handeling {
		t.Helper()
		h := load.Handeling{ID: nextID.Add(1), Soort: "VERHUIZING", Tsreg: tsreg.Truncate(time.Microsecond), Personen: personen}
		if err := insertHandeling(q, h); err != nil {
			t.Fatal(err)
		}
		return h
	}

	// The steady load: persons 5000 to 5499, 50 a second, each its own transaction.
	ctx, stop := context.WithCancel(context.Background())
	var loadDone sync.WaitGroup
	var unrelated sync.Map // id -> when registered
	loadDone.Add(1)
	go func() {
		defer loadDone.Done()
		for i := int64(0); ctx.Err() == nil; i++ {
			now := time.Now()
			h := register(w.db, now, 5000+i%500)
			add(h)
			unrelated.Store(h.ID, now)
			time.Sleep(20 * time.Millisecond)
		}
	}()
	defer func() { stop(); loadDone.Wait() }()
	time.Sleep(2 * time.Second)

	// The slow writer.
	writer := w.db.MustBegin()
	defer writer.Rollback() //nolint:errcheck
	slowBegan := time.Now()
	slow := register(writer, slowBegan)
	for p := int64(1); p <= 5; p++ {
		add(register(w.db, time.Now(), p))
	}
	link(t, writer, slow.ID, 1, 2, 3, 4, 5)
	slow.Personen = []int64{1, 2, 3, 4, 5}
	time.Sleep(slowWriterOpen())
	slowCommit := time.Now()
	if err := writer.Commit(); err != nil {
		t.Fatal(err)
	}
	add(slow)

	// The bulk writer.
	handelingen, persons := 1000, 100
	if brptest.Layout() == handeling.Kern {
		persons = 5
	}
	bulk := w.db.MustBegin()
	defer bulk.Rollback() //nolint:errcheck
	first := nextID.Add(int64(handelingen)) - int64(handelingen) + 1
	bulkAt := time.Now().Truncate(time.Microsecond)
	bulk.MustExec(`insert into admhnd (id, soort, tsreg)
		select g, 'VERHUIZING', $2::timestamptz + (g - $1) * interval '1 microsecond' from generate_series($1::bigint, $1::bigint + $3 - 1) g`,
		first, bulkAt, handelingen)
	bulk.MustExec(`insert into admhnd_persoon (admhnd_id, persoon_id)
		select g, 100000 + (g - $1) * $3 + k from generate_series($1::bigint, $1::bigint + $2 - 1) g, generate_series(0, $3 - 1) k
		union all
		select g, 5000 + (g - $1) % 500 from generate_series($1::bigint, $1::bigint + $2 - 1) g`,
		first, handelingen, persons)
	time.Sleep(3 * time.Second)
	if err := bulk.Commit(); err != nil {
		t.Fatalf("the bulk writer's commit: %v", err)
	}
	for i := range int64(handelingen) {
		h := load.Handeling{ID: first + i, Soort: "VERHUIZING", Tsreg: bulkAt.Add(time.Duration(i) * time.Microsecond)}
		h.Personen = []int64{5000 + i%500}
		for k := range int64(persons) {
			h.Personen = append(h.Personen, 100000+i*int64(persons)+k)
		}
		add(h)
	}

	// Persons that come 2 s later, in another transaction; newer handelingen of them after.
	late := register(w.db, time.Now())
	time.Sleep(2 * time.Second)
	link(t, w.db, late.ID, 20, 21)
	late.Personen = []int64{20, 21}
	add(late)
	add(register(w.db, time.Now(), 20))
	add(register(w.db, time.Now(), 21))

	time.Sleep(2 * time.Second)
	stop()
	loadDone.Wait()
	w.verify(t)

	// The other persons' work flowed while the slow writer was open.
	var ids []int64
	unrelated.Range(func(k, v any) bool {
		if at := v.(time.Time); at.After(slowBegan) && at.Before(slowCommit.Add(-3*time.Second)) {
			ids = append(ids, k.(int64))
		}
		return true
	})
	var before int
	if err := w.db.Get(&before, `select count(*) from admhnd where id = any($1) and tslev < $2`, pq.Array(ids), slowCommit); err != nil {
		t.Fatal(err)
	}
	if before == 0 {
		t.Fatalf("none of the %d handelingen of other persons registered while the slow writer was open (but its last 3 s) was delivered before it committed", len(ids))
	}
	var delays []float64
	if err := w.db.Select(&delays, `select extract(epoch from tslev - tsreg) from admhnd where id = any($1) order by 1`, pq.Array(ids)); err != nil {
		t.Fatal(err)
	}
	t.Logf("other persons' handelingen registered while the slow writer was open, but its last 3 s: %d, %d delivered before it committed; delay p50 %.2f s, max %.2f s",
		len(ids), before, delays[len(delays)/2], slices.Max(delays))
	var after float64
	if err := w.db.Get(&after, `select extract(epoch from max(tslev) - $2::timestamptz) from admhnd a
		where id = $1 or exists (select from admhnd_persoon p where p.admhnd_id = a.id and p.persoon_id between 1 and 5)`,
		slow.ID, slowCommit); err != nil {
		t.Fatal(err)
	}
	t.Logf("the slow writer open %v: its handeling and its persons' newer ones all delivered %.2f s after its commit", slowWriterOpen(), after)
}

// slowWriterOpen is how long TestSlowWritersEndNothingInFout's slow writer stays open:
// BRP_SLOW_WRITER_SECONDS, default 6 (three times MAXWAIT).
func slowWriterOpen() time.Duration {
	if s, err := strconv.Atoi(os.Getenv("BRP_SLOW_WRITER_SECONDS")); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	return 6 * time.Second
}

// link links persons to handeling id in q (the contract's admhnd_persoon; the kern layout's
// his rows through the test's compatibility layer).
func link(t testing.TB, q sqlx.Execer, id int64, personen ...int64) {
	t.Helper()
	for _, p := range personen {
		if _, err := q.Exec(`insert into admhnd_persoon (admhnd_id, persoon_id) values ($1, $2)`, id, p); err != nil {
			t.Fatal(err)
		}
	}
}
