package scenarios

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/brp/levering/internal/brptest"
	"github.com/brp/levering/internal/load"
	"github.com/brp/levering/publicatie"
)

// TestJMSAfnemer reads the service's messages as a Java afnemer does: with ActiveMQ's own JMS
// client over OpenWire (brptest.ReadJMS, a private broker with an OpenWire listener). Every
// verzending message of a load run by a publisher and three consumers must be a persistent
// TextMessage whose admhnd-id string property is the body's id, and the first occurrences
// must keep per-person order (docs/contract.md section 3 and guarantee 2). The publications are
// read the same way, before any consumer runs.
func TestJMSAfnemer(t *testing.T) {
	t.Parallel()
	svc := brptest.PrivateJMSServices(t)

	t.Run("Publicatie", func(t *testing.T) {
		// Without consumers the publisher publishes each person's first handeling and then
		// waits: what it published is what is in levering once that stops growing.
		w := jmsWorld(t, svc, load.Spec{N: 300, Personen: 1000, Multi: 1.0 / 3, Excluded: 0.05, Seed: 7})
		// One handeling a publication, so that the messages to read are as many as are in levering.
		w.publisher(t, publicatie.Config{MaxInLevering: len(w.hs), Delay: 50 * time.Millisecond, GroupSize: 1})
		var want, same int
		brptest.EventuallyEvery(t, time.Minute, 200*time.Millisecond, func() error {
			n := brptest.Statuses(t, w.db)["in_levering"]
			if n > 0 && n == want {
				same++
			} else {
				want, same = n, 0
			}
			if same < 5 {
				return errorf("%d in levering (the same for %d polls), waiting for the publisher to settle", n, same)
			}
			return nil
		})
		got := brptest.ReadJMS(t, svc.OpenWirePort, w.q.Publicatie, want, 60*time.Second)()
		for i, m := range got {
			var p struct {
				ID       int64   `json:"id"`
				Personen []int64 `json:"personen"`
			}
			checkJMS(t, "publication", i, m, &p)
			if m.AdmhndID != strconv.FormatInt(p.ID, 10) || len(p.Personen) == 0 {
				t.Fatalf("publication %d: admhnd-id %q, body %q", i, m.AdmhndID, m.Body)
			}
		}
		t.Logf("%d publications read as TextMessage by a JMS client", len(got))
	})

	t.Run("Verzending", func(t *testing.T) {
		w := jmsWorld(t, svc, load.Spec{N: 2000, Personen: 200, Multi: 1.0 / 3, Excluded: 0.05, Seed: 42})
		want := load.Deliverable(w.hs)
		read := brptest.ReadJMS(t, svc.OpenWirePort, w.q.Verzending, want, 60*time.Second)
		w.consumers(t, 3, 2)
		w.publisher(t, publicatie.Config{MaxInLevering: 200})
		got := read()
		ids := make([]int64, len(got))
		for i, m := range got {
			var v struct {
				ID       int64     `json:"id"`
				Soort    string    `json:"soort"`
				Tsreg    time.Time `json:"tsreg"`
				Tslev    time.Time `json:"tslev"`
				Personen []int64   `json:"personen"`
			}
			checkJMS(t, "verzending", i, m, &v)
			if m.AdmhndID != strconv.FormatInt(v.ID, 10) || v.Soort == "" || v.Tsreg.IsZero() || v.Tslev.IsZero() || len(v.Personen) == 0 {
				t.Fatalf("verzending %d: admhnd-id %q, body %q", i, m.AdmhndID, m.Body)
			}
			ids[i] = v.ID
		}
		rep := load.CheckOrder(ids, load.ByID(w.hs))
		if rep.Distinct != want {
			t.Fatalf("the JMS afnemer saw %d distinct handelingen, want %d", rep.Distinct, want)
		}
		if len(rep.Violations) > 0 {
			t.Fatalf("per-person order violated as the JMS afnemer read it:\n%v", rep.Violations)
		}
		t.Logf("%d verzending messages (%d duplicates) read as persistent TextMessage by a JMS client, in per-person order",
			rep.Messages, rep.Duplicates)
	})
}

// jmsWorld is a world on svc without a STOMP reader of the verzending queue: the JMS afnemer
// reads it instead.
func jmsWorld(t *testing.T, svc *brptest.Services, spec load.Spec) *world {
	t.Helper()
	w := &world{svc: svc, broker: svc.Broker(), q: brptest.NewQueues(t), hs: load.Generate(spec)}
	w.db, w.dbURL = brptest.DBOn(t, svc.DatabaseURL())
	if err := load.Insert(context.Background(), w.db, w.hs); err != nil {
		t.Fatal(err)
	}
	return w
}

// checkJMS fails t unless m is a persistent TextMessage with a String admhnd-id property and
// a JSON body, which it decodes into v.
func checkJMS(t *testing.T, what string, i int, m brptest.JMSMessage, v any) {
	t.Helper()
	if m.Type != "TextMessage" || !m.Persistent || m.PropertyType != "String" {
		t.Fatalf("%s %d arrived as %s, persistent %v, admhnd-id property of type %s; want a persistent TextMessage with a String property",
			what, i, m.Type, m.Persistent, m.PropertyType)
	}
	if err := json.Unmarshal([]byte(m.Body), v); err != nil {
		t.Fatalf("%s %d: body %q: %v", what, i, m.Body, err)
	}
}
