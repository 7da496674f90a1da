package publicatie

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/brp/levering/handeling"
	"github.com/brp/levering/internal/brptest"
	"github.com/brp/levering/internal/load"
)

// TestRoundFindsRowsByID checks the plans of the round's statements that look rows up by id
// (markSQL, and the intake's part for the recorded handelingen) with the statistics that once made
// them slow: taken while every handeling was delivered, followed by a bulk of open work. Their
// generic plans must find the ids through the primary key; through the index of open work
// (estimated empty) they read every open handeling per round. refuseOddTsregSQL, under the same
// statistics, must not read all open work either.
func TestRoundFindsRowsByID(t *testing.T) {
	t.Parallel()
	db, _ := brptest.DB(t)
	ctx := context.Background()
	conn, err := db.Connx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// The handelingen as beds (on kern on the kern tables themselves, not through the test
	// views' per-row triggers): 1,000 delivered, analyzed, then 50,000 open.
	now := time.Now()
	bed := func(from, to int64, start time.Time) {
		hs := make([]load.Handeling, 0, to-from+1)
		for g := from; g <= to; g++ {
			hs = append(hs, load.Handeling{ID: g, Soort: "VERHUIZING", Tsreg: start.Add(time.Duration(g) * time.Millisecond)})
		}
		brptest.Bed(t, db, hs)
	}
	bed(1, 1000, now.Add(-time.Hour))
	brptest.DeliverAll(t, db)
	brptest.Analyze(t, db)
	bed(1001, 51000, now.Add(-30*time.Minute))
	for _, stmt := range []string{
		`set plan_cache_mode = force_generic_plan`,
		`prepare mark(bigint[]) as ` + testSQL().markSQL,
		`prepare intake(timestamptz, timestamptz, bigint, int, bigint[]) as ` + testSQL().intakeDefaultSQL,
		`prepare refuse(text, text[]) as ` + testSQL().refuseOddTsregSQL,
	} {
		if _, err := conn.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	for _, c := range []struct {
		explain string
		cond    string // the condition by which the statement must look its rows up
	}{
		{`explain execute mark('{1001, 2002, 50000}')`, "Index Cond: (id = ANY ($1))"},
		{`explain execute intake(now(), now() - interval '10 minutes', 100000, 1000, '{7000}')`, "Index Cond: (id = (unnest($5)))"},
	} {
		plan, err := explain(ctx, conn, c.explain)
		if err != nil {
			t.Fatal(err)
		}
		// The scan on the line above the condition, through the primary key.
		byID := false
		for i := 1; i < len(plan); i++ {
			byID = byID || strings.Contains(plan[i], c.cond) && strings.Contains(plan[i-1], "admhnd_pkey")
		}
		if !byID {
			t.Errorf("%s does not look its rows up by id:\n%s", c.explain, strings.Join(plan, "\n"))
		}
	}
	// refuseOddTsregSQL looks at the two ends of open work: every scan of an index of open work
	// has an index condition (it once walked all of it, filtering by tsreg).
	plan, err := explain(ctx, conn, `explain execute refuse('x', '{`+handeling.InitieleVulling+`}')`)
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range plan {
		if !strings.Contains(line, "Scan") || !strings.Contains(line, "te_leveren") && !strings.Contains(line, "televeren") {
			continue
		}
		if i+1 == len(plan) || !strings.Contains(plan[i+1], "Index Cond:") {
			t.Errorf("refuseOddTsregSQL reads an index of open work without a condition:\n%s", strings.Join(plan, "\n"))
			break
		}
	}
}

// explain returns the lines of an explain statement's plan.
func explain(ctx context.Context, q interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}, query string) ([]string, error) {
	rows, err := q.QueryContext(ctx, query)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return nil, err
		}
		plan = append(plan, line)
	}
	return plan, rows.Err()
}
