package publicatie

import (
	"context"
	"strings"
	"testing"

	"github.com/brp/levering/internal/brptest"
)

// TestMarkFindsRowsByID checks the plan of the round's mark statement (markSQL) with the
// statistics that once made it slow: taken while every handeling was delivered, followed by
// a bulk of open work. The generic plan of a prepared statement must find the ids through
// the primary key; through the index of open work it reads every open handeling per round.
func TestMarkFindsRowsByID(t *testing.T) {
	t.Parallel()
	db, _ := brptest.DB(t)
	ctx := context.Background()
	conn, err := db.Connx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, stmt := range []string{
		`insert into admhnd (id, soort, tsreg, statuslev, tslev)
		 select g, 'VERHUIZING', now() - interval '1 hour' + g * interval '1 ms', 'geleverd', now() from generate_series(1, 1000) g`,
		`analyze admhnd`,
		`insert into admhnd (id, soort, tsreg) select g, 'VERHUIZING', now() + g * interval '1 ms' from generate_series(1001, 51000) g`,
		`set plan_cache_mode = force_generic_plan`,
		`prepare mark(bigint[]) as ` + markSQL,
	} {
		if _, err := conn.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	rows, err := conn.QueryxContext(ctx, `explain execute mark('{1001, 2002, 50000}')`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, line)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	text := strings.Join(plan, "\n")
	if strings.Contains(text, "te_leveren") || !strings.Contains(text, "Index Cond: (id = ANY ($1))") {
		t.Fatalf("the mark statement does not find its rows by id:\n%s", text)
	}
}
