package operate_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/brp/levering/internal/brptest"
	"github.com/brp/levering/internal/load"
	"github.com/brp/levering/operate"
)

// The crafted set: fout 1 holds 2 (person 1), fout 15 holds 16 (person 8); 10 and 11 were
// delivered in the last 5 minutes, about an hour after their registration.
func TestOverviewHeldAndDeliveryDelay(t *testing.T) {
	db, _ := brptest.DB(t)
	craft(t, db)
	ctx := context.Background()
	o, err := operate.ReadOverview(ctx, db, operate.OverviewConfig{Layout: brptest.Layout()})
	if err != nil {
		t.Fatal(err)
	}
	if o.HeldBehindFout != 2 || o.HeldBehindFoutPersonen != 2 {
		t.Errorf("held behind fout %d of %d persons, want 2 of 2", o.HeldBehindFout, o.HeldBehindFoutPersonen)
	}
	d := o.DeliveryDelay
	if d == nil || d.Deliveries != 2 || d.P50Seconds < 3500 || d.P50Seconds > 3600 || d.P99Seconds < d.P50Seconds || d.P99Seconds > 3600 {
		t.Errorf("delivery delay %+v, want 2 deliveries about 59 minutes after registration", d)
	}
	if o.Future != 0 || o.FirstFuture != nil {
		t.Errorf("future %d %+v, want none", o.Future, o.FirstFuture)
	}
	if o, err := operate.ReadOverview(ctx, db, operate.OverviewConfig{Layout: brptest.Layout(), FoutPolicy: "skip"}); err != nil || o.HeldBehindFout != 0 {
		t.Errorf("under skip: held %d (%v), want 0", o.HeldBehindFout, err)
	}
	// Nothing delivered in the last 5 minutes: no delay, and the page and the command say so.
	db.MustExec(`update admhnd set tslev = now() - interval '6 minutes' where tslev > now() - interval '6 minutes'`)
	if o, err := operate.ReadOverview(ctx, db, operate.OverviewConfig{Layout: brptest.Layout()}); err != nil || o.DeliveryDelay != nil {
		t.Errorf("no recent deliveries: delay %+v (%v), want nil", o.DeliveryDelay, err)
	}
	srv, _ := servePages(t, db, nil)
	if code, body := get(t, srv.URL+"/"); code != http.StatusOK || !strings.Contains(body, "no deliveries in the last 5 minutes") {
		t.Errorf("GET /: %d, no word of the missing deliveries:\n%s", code, body)
	}
	if out := mustCLI(t, operate.CLI{DB: db, Config: operate.OverviewConfig{Layout: brptest.Layout()}}, "status"); !strings.Contains(out, "\ndelivery delay      no deliveries in the last 5 minutes\n") {
		t.Errorf("status:\n%s", out)
	}
}

// A fout of person A, then a handeling of A and B, then 100 of B: the command and the page
// count the 101 held, where the blocked persons list only A behind the fout.
func TestHeldBehindFoutShown(t *testing.T) {
	db, _ := brptest.DB(t)
	base := time.Now().Add(-time.Hour)
	hs := []load.Handeling{
		{ID: 1, Soort: "HUWELIJK", Tsreg: base, Personen: []int64{1}},
		{ID: 2, Soort: "HUWELIJK", Tsreg: base.Add(time.Second), Personen: []int64{1, 2}},
	}
	for i := range int64(100) {
		hs = append(hs, load.Handeling{ID: 10 + i, Soort: "VERHUIZING", Tsreg: base.Add(time.Minute + time.Duration(i)*time.Second), Personen: []int64{2}})
	}
	if err := load.Insert(context.Background(), db, hs); err != nil {
		t.Fatal(err)
	}
	sqlExec(t, db, `update admhnd set statuslev = 'fout', foutreden = 'x' where id = 1`)
	out := mustCLI(t, operate.CLI{DB: db, Config: operate.OverviewConfig{Layout: brptest.Layout()}}, "status")
	if !strings.Contains(out, "\nheld behind fout       101  handeling(en) of 2 person(s), also through multi-person handelingen\n") ||
		!strings.Contains(out, "\nblocked persons: 1\n") {
		t.Errorf("status:\n%s", out)
	}
	srv, _ := servePages(t, db, nil)
	code, body := get(t, srv.URL+"/")
	if code != http.StatusOK || !strings.Contains(body, "holding back 101 handeling(en) of 2 person(s)") ||
		!strings.Contains(body, "<b>101</b> handeling(en) of 2 person(s) wait behind fout handelingen") {
		t.Errorf("GET /: %d, no word of the 101 held:\n%s", code, body)
	}
}

// A handeling a year ahead of the database clock is counted and named by the command and the
// page; the oldest undelivered is the oldest not in the future, and with only the future one
// left there is none, never a negative age.
func TestFutureHandelingShown(t *testing.T) {
	db, _ := brptest.DB(t)
	now := time.Now()
	if err := load.Insert(context.Background(), db, []load.Handeling{
		{ID: 4711, Soort: "GEBOORTE", Tsreg: now.Add(365 * 24 * time.Hour), Personen: []int64{1}},
		{ID: 12, Soort: "GEBOORTE", Tsreg: now.Add(-time.Minute), Personen: []int64{2}},
	}); err != nil {
		t.Fatal(err)
	}
	o, err := operate.ReadOverview(context.Background(), db, operate.OverviewConfig{Layout: brptest.Layout()})
	if err != nil {
		t.Fatal(err)
	}
	if o.Backlog != 2 || o.Future != 1 || o.FirstFuture == nil || o.FirstFuture.ID != 4711 || o.FirstFuture.AheadSeconds < 364*24*3600 {
		t.Fatalf("backlog %d, future %d, first %+v: want 2, 1 and 4711 a year ahead", o.Backlog, o.Future, o.FirstFuture)
	}
	if o.Oldest == nil || o.Oldest.ID != 12 || o.Oldest.AgeSeconds < 55 {
		t.Fatalf("oldest %+v, want 12, a minute old", o.Oldest)
	}
	out := masked(mustCLI(t, operate.CLI{DB: db, Config: operate.OverviewConfig{Layout: brptest.Layout()}}, "status"))
	for _, want := range []string{
		"\nin the future          1  tsreg over 5s ahead of the database clock\n",
		"\nfirst in the future 4711 GEBOORTE, registered YYYY-MM-DD hh:mm:ss.fff, ahead AGE: waits until then\n",
		"\noldest undelivered  12 GEBOORTE,",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	srv, _ := servePages(t, db, nil)
	code, body := get(t, srv.URL+"/")
	if code != http.StatusOK || !strings.Contains(body, `Registered in the future</div><div class="value">1</div>`) ||
		!strings.Contains(body, `first <a href="/fout/4711">4711</a>`) {
		t.Errorf("GET /: %d, no word of 4711 in the future:\n%s", code, body)
	}

	sqlExec(t, db, `update admhnd set statuslev = 'geleverd', tslev = now() where id = 12`)
	o, err = operate.ReadOverview(context.Background(), db, operate.OverviewConfig{Layout: brptest.Layout()})
	if err != nil || o.Oldest != nil || o.Future != 1 {
		t.Fatalf("only 4711 left: oldest %+v, future %d (%v); want none and 1", o.Oldest, o.Future, err)
	}
	if out := mustCLI(t, operate.CLI{DB: db, Config: operate.OverviewConfig{Layout: brptest.Layout()}}, "status"); !strings.Contains(out, "\noldest undelivered  none\n") || strings.Contains(out, "age never") {
		t.Errorf("status with only a handeling in the future:\n%s", out)
	}
	if _, body := get(t, srv.URL+"/"); !strings.Contains(body, "Only handelingen registered in the future wait.") {
		t.Errorf("GET / with only a handeling in the future:\n%s", body)
	}
}
