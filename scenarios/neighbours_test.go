package scenarios

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/brp/levering/internal/brptest"
	"github.com/brp/levering/internal/load"
	"github.com/brp/levering/publicatie"
)

// A long read-only transaction in the same database (pg_dump, a report) does not pause
// publication: the horizon leaves it out after publicatie.LateWriterGrace. Before, nothing
// registered after its start was published until it ended.
func TestLongReaderDoesNotPausePublication(t *testing.T) {
	t.Parallel()
	w := makeEmptyWorld(t, nil, brptest.Broker(), load.Spec{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reader, err := w.db.Connx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	var pid int
	if err := reader.GetContext(ctx, &pid, `select pg_backend_pid()`); err != nil {
		t.Fatal(err)
	}
	readerDone := make(chan error, 1)
	go func() {
		tx, err := reader.BeginTxx(ctx, nil)
		if err != nil {
			readerDone <- err
			return
		}
		defer tx.Rollback() //nolint:errcheck
		_, err = tx.ExecContext(ctx, `select count(*) from admhnd; select pg_sleep(120)`)
		readerDone <- err
	}()
	brptest.Eventually(t, 10*time.Second, func() error {
		var n int
		if err := w.db.Get(&n, `select count(*) from pg_stat_activity where pid = $1 and query like '%pg_sleep%'`, pid); err != nil {
			return err
		}
		if n == 0 {
			return errors.New("the reader has not begun")
		}
		return nil
	})
	time.Sleep(publicatie.LateWriterGrace + 500*time.Millisecond)
	w.hs = load.Generate(load.Spec{N: 500, Personen: 100, Multi: 0.2, Seed: 7, Start: time.Now().Add(-600 * time.Millisecond)})
	if err := load.Insert(ctx, w.db, w.hs); err != nil {
		t.Fatal(err)
	}
	w.consumers(t, 2, 2)
	w.publisher(t, publicatie.Config{})
	w.verify(t)
	var running bool
	if err := w.db.Get(&running, `select exists (select from pg_stat_activity where pid = $1 and state = 'active')`, pid); err != nil {
		t.Fatal(err)
	}
	if !running {
		t.Fatalf("the reader ended before everything was delivered: %v", <-readerDone)
	}
	cancel()
	<-readerDone
}
