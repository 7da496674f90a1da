package publicatie

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lib/pq"

	"github.com/brp/levering/handeling"
	"github.com/brp/levering/internal/brptest"
	"github.com/brp/levering/internal/load"
)

// Rounds beside REINDEX (issue 34: a round failed with "deadlock detected" during a REINDEX of
// admhnd). A standalone publisher runs rounds while bijhouding registers (a third of the
// handelingen get a person later, in a transaction of its own: migration 0011's late path;
// some carry a tsreg seconds in the past, which the registration trigger records), the
// deliveries are done, and admhnd, admhnd_persoon and the service's tables are reindexed in
// every form, among them REINDEX TABLE admhnd_persoon after its key was rebuilt concurrently
// (its indexes then rebuilt in the other order). Before roundLocksSQL, rounds failed here
// (3 in a run of 10 s), waiting for admhnd (refuseOddTsreg) or an index (the stale read, readBlocked)
// that a REINDEX held while it waited for an index the round held. Now nobody ends in a deadlock: not the
// rounds, not the REINDEX, not bijhouding.
//
// On the kern layout only the rounds must stay out of deadlocks: the test views' registrations
// can deadlock with a REINDEX on their own (see the end of the test).
//
// Left out: REINDEX INDEX CONCURRENTLY of admhnd's key followed by REINDEX TABLE admhnd, which
// can deadlock bijhouding's late persons with the REINDEX (docs/operations.md, "REINDEX and
// other DDL on the contract's tables"): no round takes part in that cycle.
func TestRoundsBesideReindex(t *testing.T) {
	t.Parallel()
	e := newRoundEnv(t, Config{})
	// Delivered handelingen, so that each index takes some milliseconds to build.
	brptest.Bed(t, e.db, load.Generate(load.Spec{N: 40_000, Personen: 2_000, Multi: 0.3, Start: time.Now().Add(-time.Hour)}))
	brptest.DeliverAll(t, e.db)

	// At least 10 s side by side, and on until each party did enough (a busy machine runs fewer
	// REINDEXes in 10 s: 7 of the 10 wanted beside the other tests of the package), at most 2
	// minutes.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	began := time.Now()
	var (
		mu        sync.Mutex
		deadlocks []string
		counts    = map[string]int{}
		wg        sync.WaitGroup
	)
	// done counts what a party did, and keeps its deadlocks; other errors (the test's end
	// cancelling a statement) are not this test's business.
	done := func(who string, err error) {
		mu.Lock()
		defer mu.Unlock()
		var pe *pq.Error
		switch {
		case errors.As(err, &pe) && pe.Code == "40P01":
			deadlocks = append(deadlocks, fmt.Sprintf("%s: %v (%s)", who, err, pe.Detail))
		case err == nil:
			counts[who]++
		}
	}
	// Bijhouding, two sessions from id 100,000 on, persons of the bed's.
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				id, p := int64(100_000+w*1_000_000+i), int64(1+(i*7+w)%2_000)
				past := "0"
				if i%5 == 4 {
					past = "3"
				}
				tx, err := e.db.BeginTx(ctx, nil)
				if err != nil {
					continue
				}
				_, err = tx.ExecContext(ctx, `insert into admhnd (id, soort, tsreg) values ($1, 'VERHUIZING', now() - make_interval(secs => $2))`, id, past)
				if err == nil {
					_, err = tx.ExecContext(ctx, `insert into admhnd_persoon values ($1, $2)`, id, p)
				}
				if err == nil {
					err = tx.Commit()
				}
				_ = tx.Rollback()
				done("registration", err)
				if err == nil && i%3 == 0 {
					_, err := e.db.ExecContext(ctx, `insert into admhnd_persoon values ($1, $2)`, id, p+2_000)
					done("late person", err)
				}
				time.Sleep(2 * time.Millisecond)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			_, err := e.db.ExecContext(ctx, `update admhnd set statuslev = 'geleverd', tslev = now() where statuslev = 'in_levering'`)
			done("deliveries", err)
			time.Sleep(5 * time.Millisecond)
		}
	}()
	// After the first, admhnd_persoon's key has the highest oid: REINDEX TABLE takes the other
	// index first, the rounds' plans read the key first.
	forms := []string{`reindex index concurrently admhnd_persoon_pkey`, `reindex table admhnd_persoon`,
		`reindex table admhnd`, `reindex table admhnd_persoon`, `reindex index admhnd_in_levering_idx`,
		`reindex table admhnd_persoon`, `reindex table concurrently admhnd`, `reindex table admhnd_persoon`,
		`reindex table publicatie_state`, `reindex table concurrently admhnd_persoon`}
	if brptest.Layout() == handeling.Kern {
		forms = []string{`reindex index concurrently kern.his_persafgeleidadministrati_pkey`, `reindex table kern.his_persafgeleidadministrati`,
			`reindex table kern.admhnd`, `reindex table kern.his_persafgeleidadministrati`, `reindex index kern.brp_levering_te_leveren_idx`,
			`reindex table kern.his_persafgeleidadministrati`, `reindex table concurrently kern.admhnd`, `reindex table kern.his_persafgeleidadministrati`,
			`reindex table publicatie_state`, `reindex table concurrently kern.his_persafgeleidadministrati`}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			_, err := e.db.ExecContext(ctx, forms[i%len(forms)])
			done("reindex", err)
			if err != nil && ctx.Err() == nil {
				var pe *pq.Error
				if !errors.As(err, &pe) || pe.Code != "40P01" {
					t.Errorf("%s: %v", forms[i%len(forms)], err)
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	var published int
	enough := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return time.Since(began) >= 10*time.Second && counts["reindex"] >= 10 && counts["round"] >= 10 &&
			counts["late person"] >= 10 && published > 0
	}
	for ctx.Err() == nil {
		rctx, c := context.WithTimeout(context.Background(), 20*time.Second)
		n, _, _, err := e.pub.round(rctx, 0)
		c()
		if err != nil && ctx.Err() == nil {
			t.Errorf("round: %v", err)
		}
		done("round", err)
		published += n
		if enough() {
			cancel()
		}
	}
	wg.Wait()
	for _, d := range deadlocks {
		if brptest.Layout() == handeling.Kern && !strings.HasPrefix(d, "round:") {
			// The test views' statements hold kern.admhnd's indexes (the view's plan)
			// before their triggers write the table, and can deadlock with a REINDEX
			// (docs/kern.md, REINDEX); the rounds take no part in it.
			t.Logf("deadlock outside the rounds: %s", d)
			continue
		}
		t.Errorf("deadlock: %s", d)
	}
	t.Logf("%v; %d published", counts, published)
	if counts["reindex"] < 10 || counts["round"] < 10 || counts["late person"] < 10 || published == 0 {
		t.Fatalf("too little ran side by side: %v, %d published", counts, published)
	}
}

// roundLocksSQL, run as a round runs it, holds the tables a round writes in row exclusive mode
// (admhnd with its indexes: the planner of its update locks them) and every index of admhnd_persoon (the planner locks them, by oid) before the round reads
// anything.
func TestRoundLocksSQL(t *testing.T) {
	t.Parallel()
	e := newRoundEnv(t, Config{})
	kern := brptest.Layout() == handeling.Kern
	if kern {
		e.db.MustExec(`reindex index concurrently kern.his_persafgeleidadministrati_pkey`)
	} else {
		e.db.MustExec(`reindex index concurrently admhnd_persoon_pkey`) // the key's oid is now the highest
	}
	tx := e.db.MustBegin()
	defer tx.Rollback() //nolint:errcheck
	if err := e.pub.sql.lockRoundTables(context.Background(), e.pub.stmts.In(tx.Tx)); err != nil {
		t.Fatal(err)
	}
	var held []string
	if err := tx.Select(&held, `
		select c.relname || ' ' || l.mode from pg_locks l join pg_class c on c.oid = l.relation
		where l.pid = pg_backend_pid() and l.granted and c.relkind in ('r', 'i')
		  and c.relname not like 'pg\_%' order by 1`); err != nil {
		t.Fatal(err)
	}
	want := []string{"admhnd RowExclusiveLock", "admhnd_beheer RowExclusiveLock", "admhnd_fout_idx RowExclusiveLock", "admhnd_geleverd_tslev_idx RowExclusiveLock",
		"admhnd_in_levering_idx RowExclusiveLock", "admhnd_persoon AccessShareLock", "admhnd_persoon_persoon_idx AccessShareLock",
		"admhnd_persoon_pkey AccessShareLock", "admhnd_pkey RowExclusiveLock", "admhnd_te_leveren_idx RowExclusiveLock",
		"admhnd_te_leveren_zonder_iv_idx RowExclusiveLock", "publicatie_fout_changes RowExclusiveLock", "publicatie_herlees RowExclusiveLock", "publicatie_ingehaald RowExclusiveLock",
		"publicatie_laat_personen RowExclusiveLock", "publicatie_lead_samples RowExclusiveLock", "publicatie_nakomer RowExclusiveLock", "publicatie_state RowExclusiveLock"}
	if kern {
		want = []string{"admhnd RowExclusiveLock", "admhnd_beheer RowExclusiveLock", "admhnd_levering RowExclusiveLock", "admhnd_pkey RowExclusiveLock",
			"brp_levering_fout_idx RowExclusiveLock", "brp_levering_his_pers_idx AccessShareLock", "brp_levering_te_leveren_idx RowExclusiveLock",
			"his_persafgeleidadministrati AccessShareLock", "his_persafgeleidadministrati_pkey AccessShareLock",
			"ix_admhnd_statuslev_inlevering RowExclusiveLock", "ix_admhnd_statuslev_televeren RowExclusiveLock",
			"ix_admhnd_tslev RowExclusiveLock", "ix_admhnd_tsreg RowExclusiveLock", "ix_his_persafgeleidadministrati_admhnd AccessShareLock",
			"publicatie_fout_changes RowExclusiveLock", "publicatie_herlees RowExclusiveLock", "publicatie_ingehaald RowExclusiveLock",
			"publicatie_laat_personen RowExclusiveLock", "publicatie_lead_samples RowExclusiveLock", "publicatie_nakomer RowExclusiveLock",
			"publicatie_state RowExclusiveLock", "uc_his_persafgeleidadministrati_pers_tsreg AccessShareLock"}
	}
	if !slices.Equal(held, want) {
		t.Fatalf("after roundLocksSQL the round holds\n%v\nwant\n%v", held, want)
	}
}

// Every table a round writes is locked by roundLocksSQL before the round reads it. Checked in
// a round that does all it can before it publishes (takes in a late handeling, raises the lead
// margin, marks, republishes a stale one, refuses an odd tsreg): the tables it then holds in
// row exclusive mode are those roundLocksSQL names, no more.
func TestRoundLocksItsTablesFirst(t *testing.T) {
	t.Parallel()
	e := newRoundEnv(t, Config{RedeliveryTimeout: time.Second})
	e.insert(h(1, 1, 10), h(2, 2, 20))
	e.db.MustExec(`update admhnd set statuslev = 'in_levering', tspub = now() - interval '1 h' where id = 1`)
	e.db.MustExec(`insert into admhnd (id, soort, tsreg) values (3, 'VERHUIZING', now() - interval '300 ms'), (4, 'VERHUIZING', '-infinity');
		insert into admhnd_persoon values (3, 30), (4, 40)`)
	e.db.MustExec(`insert into publicatie_herlees (tsreg, admhnd_id) values (now(), 3)`)
	var held []string
	e.pub.cfg.Hooks.AfterMark = func(ctx context.Context, _ []int64) error {
		return e.db.SelectContext(ctx, &held, `
			select distinct c.relname::text from pg_locks l join pg_class c on c.oid = l.relation
			where l.database = (select oid from pg_database where datname = current_database())
			  and l.pid <> pg_backend_pid() and l.granted and l.mode = 'RowExclusiveLock' and c.relkind = 'r'
			order by 1`)
	}
	wantIDs(t, "the stale one again, then 2 and 3", e.round(), 1, 2, 3)
	// admhnd by planning an update of it (the service's role has column rights there), the
	// service's own tables by LOCK TABLE.
	u := regexp.MustCompile(`explain update (\S+) `).FindStringSubmatch(testSQL().roundLocksSQL)
	m := regexp.MustCompile(`(?s)lock table (.+?) in row exclusive mode`).FindStringSubmatch(testSQL().roundLocksSQL)
	if m == nil || u == nil {
		t.Fatalf("roundLocksSQL locks no table: %s", testSQL().roundLocksSQL)
	}
	want := []string{strings.TrimPrefix(u[1], "kern.")}
	for _, f := range strings.Split(m[1], ",") {
		want = append(want, strings.TrimPrefix(strings.TrimSpace(f), "kern."))
	}
	slices.Sort(want)
	if !slices.Equal(held, want) {
		t.Fatalf("the round held %v in row exclusive mode, roundLocksSQL names %v", held, want)
	}
}
