package prepared_test

import (
	"context"
	"strings"
	"testing"

	"github.com/brp/levering/internal/brptest"
	"github.com/brp/levering/internal/prepared"
)

func TestCacheRunsHeldQueriesPreparedOnEachConnection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := brptest.DB(t)
	c := prepared.New(db.DB)
	const held = `select $1::int + 1`
	const other = `select $1::int + 2`
	if err := c.Prepare(ctx, held); err != nil {
		t.Fatal(err)
	}
	for range 3 { // several transactions, possibly on several connections
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		q := c.In(tx)
		var a, b, n int
		if err := q.QueryRowContext(ctx, held, 1).Scan(&a); err != nil || a != 2 {
			t.Fatalf("held query: %d, %v", a, err)
		}
		if err := q.QueryRowContext(ctx, other, 1).Scan(&b); err != nil || b != 3 {
			t.Fatalf("other query: %d, %v", b, err)
		}
		// pg_prepared_statements lists this connection's named statements; lib/pq runs an
		// unprepared query as the unnamed statement, which it does not list.
		if err := tx.QueryRowContext(ctx, `select count(*) filter (where statement = $1) * 10 + count(*) filter (where statement = $2)
			from pg_prepared_statements`, held, other).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 10 {
			t.Fatalf("prepared on this connection: %d held, %d other; want 1 and 0", n/10, n%10)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.ExecContext(ctx, held, 5); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestCacheRunsWhatFailsToPrepareUnprepared(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := brptest.DB(t)
	c := prepared.New(db.DB)
	const bad = `select * from no_such_table where id = $1`
	if err := c.Prepare(ctx, bad); err == nil {
		t.Fatal("preparing a query on a missing table succeeded")
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck // test cleanup
	_, err = c.In(tx).ExecContext(ctx, bad, 1)
	if err == nil || !strings.Contains(err.Error(), "no_such_table") {
		t.Fatalf("running it: %v, want the database's error about no_such_table", err)
	}
}
