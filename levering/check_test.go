package levering

import (
	"database/sql"
	"slices"
	"testing"

	"github.com/brp/levering/handeling"
)

// inBatch is checkSQL's 'b' row of handeling id of the batch.
func inBatch(id int64, status handeling.Status, personen ...int64) checked {
	p := at(id)
	return checked{batch: true, id: id, soort: "GEBOORTE", at: p, tsreg: sql.NullTime{Time: p.Tsreg, Valid: true}, status: status, personen: personen}
}

// ofPerson is checkSQL's 'h' row of handeling id for person.
func ofPerson(id, person int64, status handeling.Status) checked {
	p := at(id)
	return checked{id: id, at: p, tsreg: sql.NullTime{Time: p.Tsreg, Valid: true}, status: status, personen: []int64{person}}
}

// bearing is what relate works out for a handeling of the batch.
type bearing struct {
	id              int64
	blocker         int64
	blockerNull     bool
	overtaken       bool
	newerInLevering []int64
}

func onderweg(c checked) checked { c.onderweg = true; return c }

// relateTests are the cases of TestRelate.
var relateTests = []struct {
	name string
	ids  []int64 // nil: [5]
	read []checked
	skip bool // the skip fout policy, else strict
	want []bearing
}{
	{name: "nothing else", read: []checked{inBatch(5, inLevering, 10)}, want: []bearing{{id: 5}}},
	{name: "an older one to be delivered blocks", read: []checked{inBatch(5, inLevering, 10), ofPerson(3, 10, teLeveren)},
		want: []bearing{{id: 5, blocker: 3, blockerNull: true}}},
	{name: "an older one in levering blocks", read: []checked{inBatch(5, inLevering, 10), ofPerson(3, 10, inLevering)},
		want: []bearing{{id: 5, blocker: 3}}},
	{name: "the oldest of the blockers of all its persons", read: []checked{inBatch(5, inLevering, 10, 20), ofPerson(2, 10, inLevering), ofPerson(1, 20, teLeveren), ofPerson(4, 20, inLevering)},
		want: []bearing{{id: 5, blocker: 1, blockerNull: true}}},
	{name: "an older unreleased fout blocks under strict", read: []checked{inBatch(5, inLevering, 10), ofPerson(3, 10, fout)},
		want: []bearing{{id: 5, blocker: 3}}},
	{name: "an older unreleased fout does not block under skip", skip: true, read: []checked{inBatch(5, inLevering, 10), ofPerson(3, 10, fout)},
		want: []bearing{{id: 5}}},
	{name: "an older released fout does not block", read: []checked{inBatch(5, inLevering, 10), released(ofPerson(3, 10, fout))},
		want: []bearing{{id: 5}}},
	{name: "an older geleverd bears on nothing", read: []checked{inBatch(5, inLevering, 10), ofPerson(3, 10, geleverd)},
		want: []bearing{{id: 5}}},
	{name: "an odd tsreg below the range is older than all", read: []checked{inBatch(5, inLevering, 10),
		{id: 9, at: place{End: -1, ID: 9}, status: teLeveren, personen: []int64{10}}},
		want: []bearing{{id: 5, blocker: 9, blockerNull: true}}},
	{name: "a newer geleverd overtakes", read: []checked{inBatch(5, inLevering, 10), ofPerson(7, 10, geleverd)},
		want: []bearing{{id: 5, overtaken: true}}},
	{name: "a newer one onderweg overtakes", read: []checked{inBatch(5, inLevering, 10), onderweg(ofPerson(7, 10, inLevering))},
		want: []bearing{{id: 5, overtaken: true}}},
	{name: "newer ones in levering, each once", read: []checked{inBatch(5, inLevering, 10, 20), ofPerson(7, 10, inLevering), ofPerson(7, 20, inLevering), ofPerson(6, 20, inLevering)},
		want: []bearing{{id: 5, newerInLevering: []int64{7, 6}}}},
	{name: "newer ones to be delivered or fout bear on nothing", read: []checked{inBatch(5, inLevering, 10), ofPerson(7, 10, teLeveren), ofPerson(8, 10, fout)},
		want: []bearing{{id: 5}}},
	{name: "the batch's own other rows are left out", ids: []int64{3, 5},
		read: []checked{inBatch(3, inLevering, 10), inBatch(5, inLevering, 10), ofPerson(3, 10, inLevering), ofPerson(5, 10, inLevering)},
		want: []bearing{{id: 3}, {id: 5}}},
	{name: "a geleverd member overtakes the batch's older ones", ids: []int64{3, 5, 6},
		read: []checked{inBatch(3, inLevering, 10), inBatch(5, geleverd, 10), inBatch(6, inLevering, 20), ofPerson(3, 10, inLevering), ofPerson(5, 10, geleverd), ofPerson(6, 20, inLevering)},
		want: []bearing{{id: 3, overtaken: true}, {id: 5}, {id: 6}}},
	{name: "a member onderweg overtakes the batch's older ones", ids: []int64{3, 5},
		read: []checked{inBatch(3, inLevering, 10), onderweg(inBatch(5, inLevering, 10)), ofPerson(3, 10, inLevering), onderweg(ofPerson(5, 10, inLevering))},
		want: []bearing{{id: 3, overtaken: true}, {id: 5}}},
}

func TestRelate(t *testing.T) {
	for _, tt := range relateTests {
		t.Run(tt.name, func(t *testing.T) {
			ids := tt.ids
			if ids == nil {
				ids = []int64{5}
			}
			var got []bearing
			for _, r := range relate(ids, tt.read, !tt.skip) {
				got = append(got, bearing{id: r.id, blocker: r.blocker, blockerNull: r.blockerNull, overtaken: r.overtaken, newerInLevering: r.newerInLevering})
			}
			if !slices.EqualFunc(got, tt.want, func(a, b bearing) bool {
				return a.id == b.id && a.blocker == b.blocker && a.blockerNull == b.blockerNull && a.overtaken == b.overtaken &&
					slices.Equal(a.newerInLevering, b.newerInLevering)
			}) {
				t.Errorf("relate = %+v\nwant     %+v", got, tt.want)
			}
		})
	}
}

// A row of the batch keeps what checkSQL read of it.
func TestRelateKeepsTheBatchRows(t *testing.T) {
	c := released(inBatch(5, handeling.Fout, 10, 20))
	c.onderweg = true
	rows := relate([]int64{5}, []checked{c}, true)
	if len(rows) != 1 {
		t.Fatalf("relate returned %d rows, want 1", len(rows))
	}
	r := rows[0]
	if r.id != 5 || r.at != c.at || r.soort != c.soort || r.tsreg != c.tsreg || r.status != c.status || !r.vrijgegeven ||
		!slices.Equal(r.personen, c.personen) || !r.onderweg {
		t.Fatalf("relate made %+v of %+v", r, c)
	}
}

func released(c checked) checked { c.vrijgegeven = true; return c }
