package levering_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/brp/levering/broker"
	"github.com/brp/levering/handeling"
	"github.com/brp/levering/internal/brptest"
	"github.com/brp/levering/internal/load"
	"github.com/brp/levering/levering"
)

type env struct {
	reg        *prometheus.Registry
	db         *sqlx.DB
	q          brptest.Queues
	c          *levering.Consumer
	verzending *brptest.Reader
	dlq        *brptest.Reader
}

func start(t *testing.T) *env {
	t.Helper()
	return startWith(t, levering.Config{})
}

// startWith runs a consumer with cfg (its queues, broker and workers set here) on a database
// and queues of the test's own.
func startWith(t *testing.T, cfg levering.Config) *env {
	t.Helper()
	return startOn(t, brptest.DefaultForm(), cfg)
}

// startOn is startWith on tables bijhouding created in form f.
func startOn(t *testing.T, f brptest.Form, cfg levering.Config) *env {
	t.Helper()
	db, _ := brptest.DBWith(t, f)
	q := brptest.NewQueues(t)
	reg := prometheus.NewRegistry()
	cfg.Queue, cfg.VerzendingQueue, cfg.DeadLetterQueue = q.Publicatie, q.Verzending, q.DLQ
	cfg.Workers, cfg.Registerer, cfg.Layout = 2, reg, f.Layout
	if cfg.Broker.Addr == "" {
		cfg.Broker = brptest.Broker()
	}
	c, err := levering.New(db, cfg, quiet())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return &env{reg: reg, db: db, q: q, c: c, verzending: brptest.Read(t, q.Verzending), dlq: brptest.Read(t, q.DLQ)}
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// wantHeldBack checks brp_levering_held_back_total by reason (reasons not named: 0).
func wantHeldBack(t *testing.T, e *env, want map[string]float64) {
	t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "brp_levering_held_back_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if v := m.GetCounter().GetValue(); v != 0 {
				got[m.GetLabel()[0].GetValue()] = v
			}
		}
	}
	if !maps.Equal(got, want) {
		t.Fatalf("held back by reason %v, want %v", got, want)
	}
}

func publication(id int64, personen ...int64) broker.Message {
	body, _ := json.Marshal(map[string]any{"id": id, "personen": personen})
	return broker.Message{Header: handeling.IDHeaders(id), Body: body}
}

func insert(t *testing.T, db *sqlx.DB, status string, hs ...load.Handeling) {
	t.Helper()
	if err := insertErr(db, status, hs...); err != nil {
		t.Fatal(err)
	}
}

// insertErr is insert returning its error.
func insertErr(db *sqlx.DB, status string, hs ...load.Handeling) error {
	for i := range hs {
		hs[i].Soort = "GEBOORTE"
		hs[i].Tsreg = time.Date(2026, 1, 1, 0, 0, int(hs[i].ID), 0, time.UTC)
	}
	if err := load.Insert(context.Background(), db, hs); err != nil {
		return err
	}
	if status == "" {
		return nil
	}
	ids := make([]int64, len(hs))
	for i, h := range hs {
		ids[i] = h.ID
	}
	_, err := db.Exec(`update admhnd set statuslev = $1, tslev = case when $2 = 'geleverd' then now() end where id = any($3)`,
		status, status, pq.Array(ids))
	return err
}

// waitCounts waits until the consumer has handled what the test sent, then a little longer so
// that an extra (wrong) verzending message would have arrived.
func (e *env) waitCounts(t *testing.T, want levering.Counts) {
	t.Helper()
	brptest.Eventually(t, 15*time.Second, func() error {
		if got := e.c.Counts(); got != want {
			return fmt.Errorf("counts %+v, want %+v", got, want)
		}
		return nil
	})
	time.Sleep(300 * time.Millisecond)
}

func TestDuplicatePublicationDeliversOnce(t *testing.T) {
	t.Parallel()
	e := start(t)
	insert(t, e.db, "in_levering", load.Handeling{ID: 7, Personen: []int64{70, 71}})
	brptest.Publish(t, e.q.Publicatie, publication(7, 70, 71), publication(7, 70, 71))
	e.waitCounts(t, levering.Counts{Delivered: 1, Duplicates: 1})
	msgs := e.verzending.Messages()
	if len(msgs) != 1 {
		t.Fatalf("%d verzending messages, want 1", len(msgs))
	}
	m := msgs[0]
	if m.Header["admhnd-id"] != "7" || m.Header["persistent"] != "true" || m.Header["content-type"] != "application/json" {
		t.Fatalf("verzending headers %v", m.Header)
	}
	var v levering.Verzending
	if err := json.Unmarshal(m.Body, &v); err != nil {
		t.Fatal(err)
	}
	if v.ID != 7 || v.Soort != "GEBOORTE" || v.Tsreg.IsZero() || v.Tslev.IsZero() || !slices.Equal(v.Personen, []int64{70, 71}) {
		t.Fatalf("verzending body %s", m.Body)
	}
	var raw map[string]any
	_ = json.Unmarshal(m.Body, &raw)
	for _, k := range []string{"tsreg", "tslev"} {
		if _, err := time.Parse(time.RFC3339, raw[k].(string)); err != nil {
			t.Fatalf("%s %v is not RFC 3339: %v", k, raw[k], err)
		}
	}
	if s := brptest.Status(t, e.db, 7); s != "geleverd" {
		t.Fatalf("status %q, want geleverd", s)
	}
}

// A consumer that cannot reach the broker keeps trying, and delivers once it can; the same
// after the broker went away under it.
func TestConsumerWaitsForTheBroker(t *testing.T) {
	t.Parallel()
	cfg := brptest.Broker()
	p := brptest.NewProxy(t, cfg.Addr)
	p.Down()
	cfg.Addr = p.Addr()
	e := startWith(t, levering.Config{Broker: cfg})
	insert(t, e.db, "in_levering", load.Handeling{ID: 1, Personen: []int64{10}}, load.Handeling{ID: 2, Personen: []int64{20}})
	brptest.Publish(t, e.q.Publicatie, publication(1, 10))
	brptest.Eventually(t, 10*time.Second, func() error {
		if n := reconnects(t, e, "broker"); n != 1 {
			return fmt.Errorf("%v broker outages counted, want 1", n)
		}
		return nil
	})
	time.Sleep(time.Second) // several dials fail meanwhile (backoff from 100 ms)
	if e.c.Connected() {
		t.Fatal("connected while the broker is away")
	}
	p.Up()
	e.waitCounts(t, levering.Counts{Delivered: 1})
	p.Down()
	brptest.Publish(t, e.q.Publicatie, publication(2, 20))
	time.Sleep(500 * time.Millisecond)
	p.Up()
	e.waitCounts(t, levering.Counts{Delivered: 2})
}

func TestAlreadyDeliveredProducesNothing(t *testing.T) {
	t.Parallel()
	e := start(t)
	insert(t, e.db, "geleverd", load.Handeling{ID: 8, Personen: []int64{80}})
	brptest.Publish(t, e.q.Publicatie, publication(8, 80))
	e.waitCounts(t, levering.Counts{Duplicates: 1})
	if n := len(e.verzending.Messages()); n != 0 {
		t.Fatalf("%d verzending messages for a delivered handeling, want 0", n)
	}
}

func TestHandelingWithoutPersonenEndsInFout(t *testing.T) {
	t.Parallel()
	e := start(t)
	insert(t, e.db, "in_levering", load.Handeling{ID: 9})
	brptest.Publish(t, e.q.Publicatie, publication(9))
	e.waitCounts(t, levering.Counts{Fout: 1})
	var reason string
	if err := e.db.Get(&reason, `select coalesce(foutreden, '') from admhnd where id = 9 and statuslev = 'fout'`); err != nil || reason == "" {
		t.Fatalf("handeling 9 not fout with a reason: %q %v", reason, err)
	}
	if n := len(e.verzending.Messages()); n != 0 {
		t.Fatalf("%d verzending messages for a fout handeling, want 0", n)
	}
}

func TestBadInputIsSetAside(t *testing.T) {
	t.Parallel()
	e := start(t)
	insert(t, e.db, "in_levering", load.Handeling{ID: 10, Personen: []int64{100}})
	insert(t, e.db, "in_levering", load.Handeling{ID: 11, Personen: []int64{110}})
	// Bytes, not text (a JMS BytesMessage): JSON that encoding/json alone would accept, with a
	// string that is not UTF-8, and one with a NUL. Publications are text.
	notUTF8 := []byte("{\"id\": 11, \"personen\": [110], \"x\": \"\xff\"}")
	withNUL := []byte("{\"id\": 11, \"personen\": [110], \"x\": \"\x00\"}")
	brptest.Publish(t, e.q.Publicatie,
		broker.Message{Header: handeling.IDHeaders(1), Body: []byte("not json")},
		broker.Message{Header: handeling.IDHeaders(2), Body: []byte(`{"id": "two", "personen": []}`)},
		broker.Message{Header: handeling.IDHeaders(3), Body: []byte(`{"personen": [1]}`)},
		broker.Message{Header: handeling.IDHeaders(4), Body: []byte(`{"id": 4, "personen": [987654321.5]}`)},
		broker.Message{Header: handeling.IDHeaders(11), Body: notUTF8, Binary: true},
		broker.Message{Header: handeling.IDHeaders(11), Body: withNUL, Binary: true},
		publication(999, 1), // unknown id
		publication(10, 100),
	)
	e.waitCounts(t, levering.Counts{Delivered: 1, Parked: 7})
	dead := e.dlq.Messages()
	if len(dead) != 7 {
		t.Fatalf("%d messages set aside, want 7", len(dead))
	}
	for _, b := range [][]byte{notUTF8, withNUL} {
		if !slices.ContainsFunc(dead, func(m brptest.Received) bool {
			return string(m.Body) == string(b) && m.Header["brp-reason"] == "bad publication: body is not text (UTF-8 without NUL)"
		}) {
			t.Fatalf("the publication that is not text (%q) was not set aside as it came: %v", b, dead)
		}
	}
	if s := brptest.Status(t, e.db, 11); s != "in_levering" {
		t.Fatalf("handeling 11 is %s after publications that are not text, want in_levering", s)
	}
	for _, m := range dead {
		if m.Header["brp-reason"] == "" || m.Header["brp-original-message-id"] == "" {
			t.Fatalf("set-aside message without reason or original id: %v", m.Header)
		}
		// The reason is logged too: it names the field, never a value from the personen.
		if m.AdmhndID == 4 && (m.Header["brp-reason"] != "bad publication: body is not a publication: field personen is not int64" ||
			strings.Contains(m.Header["brp-reason"], "987654321")) {
			t.Fatalf("reason of a misfit persoon id: %q", m.Header["brp-reason"])
		}
	}
	// Two workers may set them aside in either order; each keeps its original body.
	if !slices.ContainsFunc(dead, func(m brptest.Received) bool { return string(m.Body) == "not json" && m.AdmhndID == 1 }) {
		t.Fatalf("the unreadable publication was not set aside with its original body: %v", dead)
	}
	if ids := e.verzending.IDs(); !slices.Equal(ids, []int64{10}) {
		t.Fatalf("verzending %v, want [10]", ids)
	}
}

// TestVerzendingIsText: the verzending body must be text to travel as a JMS TextMessage
// (broker.ErrNotText otherwise). encoding/json escapes control characters (NUL too) and
// replaces bytes that are not UTF-8, so whatever a soort holds, the body is text.
func TestVerzendingIsText(t *testing.T) {
	t.Parallel()
	for _, soort := range []string{"AANGIFTE", "Zoë\u2028", "a\x00b\x01c", "\xff\xfe niet UTF-8"} {
		body, err := json.Marshal(levering.Verzending{ID: 1, Soort: soort, Tsreg: time.Now(), Tslev: time.Now(), Personen: []int64{1}})
		if err != nil {
			t.Fatal(err)
		}
		if !broker.IsText(body) {
			t.Fatalf("verzending with soort %q encodes to %q, which is not text", soort, body)
		}
	}
}

// A publication of an excluded soort (sent by hand: nobody publishes one) is set aside and its
// handeling left as it is, not delivered past the exclusion.
func TestExcludedSoortIsSetAsideNotDelivered(t *testing.T) {
	t.Parallel()
	e := start(t)
	insert(t, e.db, "", load.Handeling{ID: 20, Personen: []int64{200}}, load.Handeling{ID: 21, Personen: []int64{210}})
	e.db.MustExec(`update admhnd set soort = 'GBA_INITIELE_VULLING' where id = 20`)
	e.db.MustExec(`update admhnd set statuslev = 'in_levering' where id = 21`)
	brptest.Publish(t, e.q.Publicatie, publication(20, 200), publication(21, 210))
	e.waitCounts(t, levering.Counts{Delivered: 1, Parked: 1})
	if ids := e.verzending.IDs(); !slices.Equal(ids, []int64{21}) {
		t.Fatalf("verzending %v, want [21]", ids)
	}
	dead := e.dlq.Messages()
	if len(dead) != 1 || dead[0].AdmhndID != 20 || !strings.Contains(dead[0].Header["brp-reason"], "excluded") {
		t.Fatalf("set aside %v, want handeling 20 with the reason", dead)
	}
	if s := brptest.Status(t, e.db, 20); s != "" {
		t.Fatalf("the excluded handeling is %q, want untouched (NULL)", s)
	}
}

// A handeling whose tsreg lies outside the accepted range (published before the publisher
// refused such, or sent by hand) cannot be encoded as a verzending: it ends fout with the
// reason, and the rest of its batch is delivered.
func TestOddTsregEndsFoutNotTheBatch(t *testing.T) {
	t.Parallel()
	e := start(t)
	insert(t, e.db, "in_levering", load.Handeling{ID: 30, Personen: []int64{300}}, load.Handeling{ID: 31, Personen: []int64{310}},
		load.Handeling{ID: 32, Personen: []int64{320}})
	e.db.MustExec(`update admhnd set tsreg = '0044-03-15 12:00:00+00 BC' where id = 30`)
	e.db.MustExec(`update admhnd set tsreg = '-infinity' where id = 31`)
	brptest.Publish(t, e.q.Publicatie, publication(30, 300), publication(31, 310), publication(32, 320))
	e.waitCounts(t, levering.Counts{Delivered: 1, Fout: 2})
	if ids := e.verzending.IDs(); !slices.Equal(ids, []int64{32}) {
		t.Fatalf("verzending %v, want [32]", ids)
	}
	for _, id := range []int64{30, 31} {
		var reason string
		if err := e.db.Get(&reason, `select coalesce(foutreden, '') from admhnd where id = $1 and statuslev::text = 'fout'`, id); err != nil || reason != handeling.FoutTsreg {
			t.Fatalf("handeling %d: foutreden %q (%v), want the tsreg reason", id, reason, err)
		}
	}
}

func group(members ...handeling.Member) broker.Message {
	body, _ := json.Marshal(handeling.NewPublication(members))
	return broker.Message{Header: handeling.IDHeaders(members[0].ID), Body: body}
}

// A publication of several handelingen (a group) is delivered in one transaction, its
// verzending messages sent in delivery order (tsreg, id), which here is not id order.
func TestGroupIsDeliveredInDeliveryOrder(t *testing.T) {
	t.Parallel()
	e := start(t)
	insert(t, e.db, "in_levering", load.Handeling{ID: 30, Personen: []int64{1}}, load.Handeling{ID: 20, Personen: []int64{1, 2}},
		load.Handeling{ID: 10, Personen: []int64{2}})
	e.db.MustExec(`update admhnd set tsreg = '2026-01-01T00:00:00Z'::timestamptz + make_interval(secs => 40 - id)`) // 30, 20, 10
	brptest.Publish(t, e.q.Publicatie, group(handeling.Member{ID: 30, Personen: []int64{1}},
		handeling.Member{ID: 20, Personen: []int64{1, 2}}, handeling.Member{ID: 10, Personen: []int64{2}}))
	e.waitCounts(t, levering.Counts{Delivered: 3})
	if got := e.verzending.IDs(); !slices.Equal(got, []int64{30, 20, 10}) {
		t.Fatalf("verzending %v, want [30 20 10]", got)
	}
}

// A member of a group that is not delivered (here: its persons are no longer those its
// publication carried) holds back the rest of its persons' handelingen of the group: they are
// set back to be delivered (the publisher takes them back through publicatie_nakomer), not
// delivered past it. The others of the group are delivered. A redelivery of the partly
// delivered group changes nothing.
func TestUndeliveredMemberHoldsBackTheRestOfItsPersons(t *testing.T) {
	t.Parallel()
	e := start(t)
	insert(t, e.db, "in_levering", load.Handeling{ID: 1, Personen: []int64{1}}, load.Handeling{ID: 2, Personen: []int64{1, 5}},
		load.Handeling{ID: 3, Personen: []int64{1}}, load.Handeling{ID: 4, Personen: []int64{2}})
	e.db.MustExec(`delete from publicatie_nakomer`) // recorded at registration (a tsreg in the past): read
	g := group(handeling.Member{ID: 1, Personen: []int64{1}}, handeling.Member{ID: 2, Personen: []int64{1}},
		handeling.Member{ID: 3, Personen: []int64{1}}, handeling.Member{ID: 4, Personen: []int64{2}})
	brptest.Publish(t, e.q.Publicatie, g)
	e.waitCounts(t, levering.Counts{Delivered: 2, HeldBack: 2})
	check := func() {
		t.Helper()
		if got := e.verzending.IDs(); !slices.Equal(got, []int64{1, 4}) {
			t.Fatalf("verzending %v, want [1 4]", got)
		}
		for id, want := range map[int64]string{1: "geleverd", 2: "", 3: "", 4: "geleverd"} {
			if got := brptest.Status(t, e.db, id); got != want {
				t.Errorf("handeling %d: status %q, want %q", id, got, want)
			}
		}
		var nakomer int
		if err := e.db.Get(&nakomer, `select count(*) from publicatie_nakomer where admhnd_id in (2, 3)`); err != nil || nakomer != 2 {
			t.Errorf("held back handelingen 2 and 3: %d in publicatie_nakomer (%v), want both", nakomer, err)
		}
	}
	check()
	wantHeldBack(t, e, map[string]float64{"persons_changed": 1, "older_open": 1})
	// Redelivered: 1 and 4 are absorbed, 2 and 3 are no longer in levering.
	brptest.Publish(t, e.q.Publicatie, g)
	e.waitCounts(t, levering.Counts{Delivered: 2, HeldBack: 4, Duplicates: 2})
	check()
	wantHeldBack(t, e, map[string]float64{"persons_changed": 1, "older_open": 1, "not_in_levering": 2})
}

// A handeling whose tsreg cannot be ordered ends fout where the database sorts its tsreg
// ('-infinity': first), and under the strict policy holds back its persons' later handelingen
// of the batch behind it.
func TestFoutInAGroupHoldsBackTheRestOfItsPersons(t *testing.T) {
	t.Parallel()
	e := start(t)
	insert(t, e.db, "in_levering", load.Handeling{ID: 1, Personen: []int64{1}}, load.Handeling{ID: 2, Personen: []int64{1}},
		load.Handeling{ID: 3, Personen: []int64{2}})
	e.db.MustExec(`update admhnd set tsreg = '-infinity' where id = 2`)
	brptest.Publish(t, e.q.Publicatie, group(handeling.Member{ID: 1, Personen: []int64{1}}, handeling.Member{ID: 2, Personen: []int64{1}},
		handeling.Member{ID: 3, Personen: []int64{2}}))
	e.waitCounts(t, levering.Counts{Delivered: 1, Fout: 1, HeldBack: 1})
	if got := e.verzending.IDs(); !slices.Equal(got, []int64{3}) {
		t.Fatalf("verzending %v, want [3]", got)
	}
	for id, want := range map[int64]string{1: "", 2: "fout", 3: "geleverd"} {
		if got := brptest.Status(t, e.db, id); got != want {
			t.Errorf("handeling %d: status %q, want %q", id, got, want)
		}
	}
	wantHeldBack(t, e, map[string]float64{"behind_fout": 1})
}
