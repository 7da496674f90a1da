package levering

import (
	"strings"
	"testing"
	"time"

	"github.com/lib/pq"

	"github.com/brp/levering/internal/brptest"
	"github.com/brp/levering/internal/load"
)

// The check reads a person's other handelingen by index probes, and without Memoize, which
// batchLocksSQL turns off for the batch's transaction (its keys never repeat, so the cache
// would only cost). Checked in the plan
// PostgreSQL makes, after ANALYZE, for a batch of 100 handelingen of a person with 3,000 (set
// in levering and delivered by updates, as the pipeline does: statuslev may be bijhouding's
// enum, which takes the literals).
func TestCheckPlanProbesWithoutMemoize(t *testing.T) {
	t.Parallel()
	db, _ := brptest.DB(t)
	// The handelingen as a bed (on kern on the kern tables themselves, not through the test
	// views' per-row triggers); the statuses by updates.
	now := time.Now()
	start := now.Add(-24 * time.Hour)
	hs := make([]load.Handeling, 0, 23_000)
	for i := int64(1); i <= 23_000; i++ {
		h := load.Handeling{ID: i, Soort: "VERHUIZING", Tsreg: start.Add(time.Duration(i) * time.Millisecond), Personen: []int64{1}}
		if i > 3000 {
			h.Tsreg, h.Personen = now, []int64{i}
		}
		hs = append(hs, h)
	}
	brptest.Bed(t, db, hs)
	db.MustExec(`update admhnd set statuslev = 'in_levering' where id <= 1100`)
	db.MustExec(`update admhnd set statuslev = 'geleverd', tslev = now() where id <= 1000`)
	brptest.Analyze(t, db)
	var batch []int64
	for id := int64(1001); id <= 1100; id++ {
		batch = append(batch, id)
	}
	tx := db.MustBegin()
	defer tx.Rollback() //nolint:errcheck // read only
	tx.MustExec(testSQL().batchLocksSQL)
	var lines []string
	if err := tx.Select(&lines, `explain `+testSQL().checkSQL, pq.Array(batch), pq.Array(brptest.Layout().DefaultExcluded()), true); err != nil {
		t.Fatal(err)
	}
	plan := strings.Join(lines, "\n")
	for _, bad := range []string{"Memoize", "Seq Scan on admhnd"} {
		if strings.Contains(plan, bad) {
			t.Errorf("the check's plan has %q:\n%s", bad, plan)
		}
	}
}
