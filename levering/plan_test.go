package levering

import (
	"strings"
	"testing"

	"github.com/lib/pq"

	"github.com/brp/levering/internal/brptest"
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
	db.MustExec(`
		insert into admhnd (id, soort, tsreg)
		select i, 'VERHUIZING', now() - interval '1 day' + i * interval '1 ms' from generate_series(1, 3000) i;
		insert into admhnd_persoon select i, 1 from generate_series(1, 3000) i;
		update admhnd set statuslev = 'in_levering' where id <= 1100;
		update admhnd set statuslev = 'geleverd', tslev = now() where id <= 1000;
		insert into admhnd (id, soort, tsreg) select i, 'VERHUIZING', now() from generate_series(3001, 23000) i;
		insert into admhnd_persoon select i, i from generate_series(3001, 23000) i;
		analyze admhnd; analyze admhnd_persoon`)
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
