package scenarios

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/brp/levering/handeling"
	"github.com/brp/levering/internal/brptest"
	"github.com/brp/levering/internal/load"
	"github.com/brp/levering/publicatie"
)

// TestHostileBijhouding runs the pipeline beside a randomized bijhouding that does what a real
// register's neighbours do: ordinary registrations, huge and empty handelingen, tsreg in the
// past and out of range, persons committed after their handeling, late writers, duplicate
// persons, rolled-back transactions, and long readers beside. It fails on any loss (a handeling
// that does not end geleverd or fout with a reason its kind allows), any order violation on the
// verzending queue, or a stall (work left after StallBound once bijhouding stopped).
// BRP_HOSTILE_SEED replays a run.
func TestHostileBijhouding(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("BRP_HOSTILE_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("BRP_HOSTILE_SEED: %v", err)
		}
	}
	for i, form := range hostileForms {
		t.Run(form.name, func(t *testing.T) {
			t.Parallel()
			s := seed + uint64(i)
			t.Logf("seed %d (BRP_HOSTILE_SEED=%d replays this run)", s, seed)
			runHostile(t, form, s)
		})
	}
}

// hostileStallBound is how long the pipeline may take, once bijhouding stopped, to end every
// handeling: the redelivery timeout (a message lost to a rolled-back round), a sweep, and rounds.
const hostileStallBound = 2 * time.Minute

type hostileForm struct {
	name       string
	db         func(t testing.TB) (*sqlx.DB, string)
	duplicates bool // admhnd_persoon has no key: the same person may be added twice
}

var hostileForms = []hostileForm{
	{name: "text", db: func(t testing.TB) (*sqlx.DB, string) { return brptest.DBWith(t, brptest.StatusText) }},
	{name: "enum", db: func(t testing.TB) (*sqlx.DB, string) { return brptest.DBWith(t, brptest.StatusEnum) }},
	{name: "withoutkey", db: func(t testing.TB) (*sqlx.DB, string) { return brptest.DBWith(t, brptest.PersoonWithoutKey) },
		duplicates: true},
}

// kind is what the bijhouding did with a handeling; it decides how the handeling may end.
type kind int

const (
	ordinary kind = iota
	huge
	empty
	odd    // tsreg out of the accepted range
	past   // tsreg some seconds before its transaction's start
	latePs // persons added in a later transaction
	lateWr // registered by a late writer
)

func (k kind) mayBeOvertaken() bool { return k == past || k == latePs || k == lateWr }

// registered is a committed handeling as bijhouding knows it.
type registered struct {
	load.Handeling
	kind kind
}

type hostile struct {
	t    *testing.T
	db   *sqlx.DB
	form hostileForm
	mu   sync.Mutex
	ids  int64
	regs map[int64]*registered
}

func runHostile(t *testing.T, form hostileForm, seed uint64) {
	db, url := form.db(t)
	w := &world{broker: brptest.Broker(), q: brptest.NewQueues(t), db: db, dbURL: url}
	w.verzending = brptest.ReadFrom(t, w.broker, w.q.Verzending)
	h := &hostile{t: t, db: db, form: form, regs: map[int64]*registered{}}
	w.consumers(t, 2, 2)
	w.publisher(t, publicatie.Config{MaxInLevering: 200})

	ctx, stop := context.WithTimeout(context.Background(), 20*time.Second)
	defer stop()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(g)))
			for ctx.Err() == nil {
				// Not ctx: a transaction cut off by it might have committed unseen.
				if err := h.act(context.Background(), r); err != nil {
					errs <- fmt.Errorf("bijhouding: %w", err)
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() { // long readers beside: pg_dump, reports
		defer wg.Done()
		for ctx.Err() == nil {
			if _, err := db.ExecContext(ctx, `begin; select count(*) from admhnd; select pg_sleep(3); commit`); err != nil && ctx.Err() == nil {
				errs <- fmt.Errorf("reader: %w", err)
				return
			}
		}
	}()
	wg.Add(1)
	go func() { // an operator who releases every fout, so the strict policy lets persons go on
		defer wg.Done()
		for {
			db.Exec(`update admhnd set vrijgegeven = now() where statuslev::text = 'fout' and vrijgegeven is null`) //nolint:errcheck // next time
			select {
			case <-ctx.Done():
				return
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// A last release after bijhouding stopped, then everything must end.
	h.verify(w)
}

// act does one random bijhouding action.
func (h *hostile) act(ctx context.Context, r *rand.Rand) error {
	switch x := r.IntN(100); {
	case x < 45:
		return h.register(ctx, r, ordinary, r.IntN(3)+1)
	case x < 48:
		return h.register(ctx, r, huge, 200+r.IntN(800))
	case x < 53:
		return h.register(ctx, r, empty, 0)
	case x < 58:
		return h.register(ctx, r, odd, r.IntN(2)+1)
	case x < 68:
		return h.register(ctx, r, past, r.IntN(2)+1)
	case x < 80:
		return h.latePersons(ctx, r)
	case x < 87:
		return h.lateWriter(ctx, r)
	case x < 92:
		return h.rolledBack(ctx, r)
	default:
		return h.register(ctx, r, ordinary, r.IntN(3)+1)
	}
}

// persons returns n distinct persons: most from a small pool, so persons share handelingen.
func persons(r *rand.Rand, n int) []int64 {
	pool := 40
	if n > 10 {
		pool = 3000
	}
	var out []int64
	for len(out) < n {
		p := int64(1 + r.IntN(pool))
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

func (h *hostile) nextID() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ids++
	return h.ids
}

func (h *hostile) record(reg *registered) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.regs[reg.ID] = reg
}

var oddTsreg = []string{"-infinity", "infinity", "0044-03-15 BC", "0001-01-01 00:00:00+00", "9999-12-31 12:00:00+00", "20000-01-01 00:00:00+00"}

// insertSQL registers one handeling with its persons. $3 is the tsreg expression's argument:
// seconds before now(), or an odd literal.
func (h *hostile) insert(ctx context.Context, tx *sqlx.Tx, id int64, tsreg string, arg any, ps []int64) (time.Time, error) {
	var ts sql.NullTime
	if err := tx.GetContext(ctx, &ts, `insert into admhnd (id, soort, tsreg) values ($1, 'VERHUIZING', `+tsreg+`)
		returning case when tsreg >= '0001-01-02' and tsreg < '9999-12-31' then tsreg end`, id, arg); err != nil {
		return time.Time{}, err
	}
	rows := ps
	if h.form.duplicates && len(ps) > 0 {
		rows = append(slices.Clone(ps), ps[0]) // the same person twice
	}
	if len(rows) > 0 {
		if _, err := tx.ExecContext(ctx, `insert into admhnd_persoon (admhnd_id, persoon_id) select $1, unnest($2::bigint[])`,
			id, pq.Array(rows)); err != nil {
			return time.Time{}, err
		}
	}
	return ts.Time, nil
}

func (h *hostile) register(ctx context.Context, r *rand.Rand, k kind, n int) error {
	tx, err := h.db.BeginTxx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck
	var regs []*registered
	for range 1 + r.IntN(2) {
		id, ps := h.nextID(), persons(r, n)
		var ts time.Time
		switch k {
		case odd:
			_, err = h.insert(ctx, tx, id, "$2::timestamptz", oddTsreg[r.IntN(len(oddTsreg))], ps)
		case past:
			ts, err = h.insert(ctx, tx, id, "now() - make_interval(secs => $2)", r.Float64()*5, ps)
		default:
			ts, err = h.insert(ctx, tx, id, "now() - make_interval(secs => $2)", 0, ps)
		}
		if err != nil {
			return err
		}
		regs = append(regs, &registered{Handeling: load.Handeling{ID: id, Soort: "VERHUIZING", Tsreg: ts, Personen: ps}, kind: k})
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	for _, reg := range regs {
		h.record(reg)
	}
	return nil
}

// latePersons registers a handeling, commits, and adds persons in a later transaction. Persons
// added after the handeling was published are not part of its order: the service reports them.
func (h *hostile) latePersons(ctx context.Context, r *rand.Rand) error {
	tx, err := h.db.BeginTxx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck
	id, ps := h.nextID(), persons(r, 1+r.IntN(2))
	ts, err := h.insert(ctx, tx, id, "now() - make_interval(secs => $2)", 0, ps)
	if err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	reg := &registered{Handeling: load.Handeling{ID: id, Soort: "VERHUIZING", Tsreg: ts, Personen: ps}, kind: latePs}
	h.record(reg)
	time.Sleep(time.Duration(r.IntN(300)) * time.Millisecond)
	added := slices.DeleteFunc(persons(r, 1+r.IntN(2)), func(p int64) bool { return slices.Contains(ps, p) })
	tx, err = h.db.BeginTxx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck
	if len(added) > 0 {
		if _, err := tx.ExecContext(ctx, `insert into admhnd_persoon (admhnd_id, persoon_id) select $1, unnest($2::bigint[])`,
			id, pq.Array(added)); err != nil {
			return err
		}
	}
	// Read after the insert: its trigger holds the lock that keeps rounds from marking, so
	// the status cannot leave NULL before the commit.
	var status sql.NullString
	if err := tx.GetContext(ctx, &status, `select statuslev::text from admhnd where id = $1`, id); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	if !status.Valid {
		h.mu.Lock()
		reg.Personen = slices.Sorted(slices.Values(append(slices.Clone(ps), added...)))
		h.mu.Unlock()
	}
	return nil
}

// lateWriter begins a transaction, does nothing for longer than the horizon's grace, then
// registers handelingen stamped with its start.
func (h *hostile) lateWriter(ctx context.Context, r *rand.Rand) error {
	tx, err := h.db.BeginTxx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck
	if _, err := tx.ExecContext(ctx, `select 1`); err != nil {
		return err
	}
	time.Sleep(publicatie.LateWriterGrace + time.Duration(r.IntN(1000))*time.Millisecond)
	var regs []*registered
	for range 1 + r.IntN(3) {
		id, ps := h.nextID(), persons(r, 1+r.IntN(2))
		ts, err := h.insert(ctx, tx, id, "now() - make_interval(secs => $2)", 0, ps)
		if err != nil {
			return err
		}
		regs = append(regs, &registered{Handeling: load.Handeling{ID: id, Soort: "VERHUIZING", Tsreg: ts, Personen: ps}, kind: lateWr})
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	for _, reg := range regs {
		h.record(reg)
	}
	return nil
}

func (h *hostile) rolledBack(ctx context.Context, r *rand.Rand) error {
	tx, err := h.db.BeginTxx(ctx, nil)
	if err != nil {
		return err
	}
	if _, err := h.insert(ctx, tx, h.nextID(), "now() - make_interval(secs => $2)", 0, persons(r, 2)); err != nil {
		tx.Rollback() //nolint:errcheck
		return err
	}
	return tx.Rollback()
}

// verify waits for every registered handeling to end, then checks how each ended and the order
// on the verzending queue.
func (h *hostile) verify(w *world) {
	t := h.t
	counts := map[kind]int{}
	for _, reg := range h.regs {
		counts[reg.kind]++
	}
	t.Logf("registered: %d ordinary, %d huge, %d empty, %d odd tsreg, %d past tsreg, %d late persons, %d late writer",
		counts[ordinary], counts[huge], counts[empty], counts[odd], counts[past], counts[latePs], counts[lateWr])
	type end struct {
		ID     int64          `db:"id"`
		Status sql.NullString `db:"statuslev"`
		Reden  sql.NullString `db:"foutreden"`
	}
	var ends []end
	brptest.EventuallyEvery(t, hostileStallBound, time.Second, func() error {
		h.db.Exec(`update admhnd set vrijgegeven = now() where statuslev::text = 'fout' and vrijgegeven is null`) //nolint:errcheck // next time
		ends = nil
		if err := h.db.Select(&ends, `select id, statuslev::text as statuslev, foutreden from admhnd order by id`); err != nil {
			return err
		}
		open := 0
		for _, e := range ends {
			if !e.Status.Valid || e.Status.String == "in_levering" {
				open++
			}
		}
		if open > 0 {
			return fmt.Errorf("%d of %d handelingen not ended", open, len(ends))
		}
		return nil
	})
	if len(ends) != len(h.regs) {
		t.Fatalf("admhnd holds %d handelingen, bijhouding committed %d", len(ends), len(h.regs))
	}
	delivered := map[int64]load.Handeling{}
	overtaken := 0
	for _, e := range ends {
		reg := h.regs[e.ID]
		if reg == nil {
			t.Fatalf("handeling %d in admhnd was not committed by bijhouding", e.ID)
		}
		switch {
		case e.Status.String == "geleverd" && reg.kind != empty && reg.kind != odd:
			delivered[e.ID] = reg.Handeling
		case e.Status.String == "fout" && reg.kind == empty && e.Reden.String != "":
		case e.Status.String == "fout" && reg.kind == odd && e.Reden.String != "":
		case e.Status.String == "fout" && reg.kind.mayBeOvertaken() && e.Reden.String == handeling.FoutOvertaken:
			overtaken++
		default:
			t.Errorf("handeling %d (kind %d, persons %v) ended %q (%q)", e.ID, reg.kind, reg.Personen, e.Status.String, e.Reden.String)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	var rep load.OrderReport
	brptest.Eventually(t, 30*time.Second, func() error {
		rep = load.CheckOrder(w.verzending.IDs(), delivered)
		if rep.Distinct != len(delivered) {
			return errors.New("verzending does not hold every delivered handeling yet: " + strconv.Itoa(rep.Distinct) + " of " + strconv.Itoa(len(delivered)))
		}
		return nil
	})
	if len(rep.Violations) > 0 {
		t.Fatalf("per-person order violated on the verzending queue:\n%v", rep.Violations)
	}
	t.Logf("%d delivered (%d messages, %d duplicates), %d overtaken ended fout", len(delivered), rep.Messages, rep.Duplicates, overtaken)
}
