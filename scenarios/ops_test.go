package scenarios

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/brp/levering/internal/brptest"
	"github.com/brp/levering/internal/load"
	"github.com/brp/levering/internal/rig"
)

// scrape reads a process's /metrics (rig.Metrics: samples by name with labels, as written).
func scrape(t testing.TB, p *brptest.Proc) rig.Metrics {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	m, err := p.Proc.Metrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// readyz returns a process's readiness code and body.
func readyz(t testing.TB, p *brptest.Proc) (int, map[string]any) {
	t.Helper()
	resp, err := http.Get("http://" + p.HTTPAddr() + "/readyz")
	if err != nil {
		t.Fatalf("readyz of %s: %v", p.Name, err)
	}
	defer resp.Body.Close()
	var body map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body
}

func TestMetricsMoveWhenHandelingenFlow(t *testing.T) {
	t.Parallel()
	w := newWorld(t, load.Spec{N: 1000, Personen: 100, Multi: 0.3, Excluded: 0.05, NoPerson: 2, Seed: 20})
	con := w.consumerProc(t, "mutatielevering", brptest.Build(t, "cmd/mutatielevering"))
	before := scrape(t, con)
	if _, ok := before["brp_levering_delivered_total"]; !ok {
		t.Fatalf("consumer exposes no brp_levering_delivered_total: %v", before)
	}
	pub := w.publisherProc(t, "publicatie", brptest.Build(t, "cmd/publicatie"))
	rep := w.verify(t)
	pm, cm := scrape(t, pub), scrape(t, con)
	want := float64(rep.Distinct)
	for _, c := range []struct {
		from map[string]float64
		name string
		want float64
	}{
		{pm, "brp_levering_published_total", want + 2}, // the two without persons are published too
		{pm, "brp_levering_backlog_handelingen", 0},
		{pm, "brp_levering_in_levering_handelingen", 0},
		{pm, "brp_levering_fout_handelingen", 2},
		{pm, "brp_levering_fout_unreleased_handelingen", 2},
		{pm, "brp_levering_max_in_levering_handelingen", 1000},
		{pm, `brp_levering_reconnects_total{dependency="database"}`, 0},
		{cm, `brp_levering_reconnects_total{dependency="broker"}`, 0},
		{pm, "brp_levering_publicatie_leader", 1},
		{cm, "brp_levering_delivered_total", want},
		{cm, "brp_levering_fout_total", 2},
		{cm, "brp_levering_broker_connected", 1},
	} {
		if got, ok := c.from[c.name]; !ok || got != c.want {
			t.Errorf("%s = %v (present %v), want %v", c.name, got, ok, c.want)
		}
	}
	// The consumer's histogram counts batches: at least one, at most one per publication.
	if batches := cm["brp_levering_processing_duration_seconds_count"]; pm["brp_levering_publication_round_duration_seconds_count"] < 1 || batches < 1 || batches > want+2 {
		t.Errorf("histograms did not move: rounds %v, processing %v",
			pm["brp_levering_publication_round_duration_seconds_count"], cm["brp_levering_processing_duration_seconds_count"])
	}
}

func TestReadyzFollowsTheBroker(t *testing.T) {
	t.Parallel()
	svc := brptest.PrivateServices(t)
	w := newWorldOn(t, svc, load.Spec{N: 10, Personen: 10, Seed: 21})
	pub := w.publisherProc(t, "publicatie", brptest.Build(t, "cmd/publicatie"))
	con := w.consumerProc(t, "mutatielevering", brptest.Build(t, "cmd/mutatielevering"))
	w.verify(t)
	waitReady := func(want int) {
		t.Helper()
		for _, p := range []*brptest.Proc{pub, con} {
			brptest.Eventually(t, 30*time.Second, func() error {
				if code, body := readyz(t, p); code != want {
					return fmt.Errorf("%s readyz %d %v, want %d", p.Name, code, body, want)
				}
				return nil
			})
		}
	}
	waitReady(http.StatusOK)
	if _, body := readyz(t, pub); body["leader"] != true {
		t.Fatalf("publisher readyz does not say it leads: %v", body)
	}
	svc.StopBroker()
	waitReady(http.StatusServiceUnavailable)
	if _, body := readyz(t, con); body["database"] != "ok" || body["broker"] == "ok" {
		t.Fatalf("consumer readyz while the broker is down: %v", body)
	}
	svc.StartBroker()
	waitReady(http.StatusOK)
}

func TestSigtermDuringRunExitsCleanlyAndLosesNothing(t *testing.T) {
	t.Parallel()
	w := newWorld(t, load.Spec{N: 3000, Personen: 300, Multi: 0.3, Seed: 22})
	pubBin, conBin := brptest.Build(t, "cmd/publicatie"), brptest.Build(t, "cmd/mutatielevering")
	pub := w.publisherProc(t, "publicatie-1", pubBin)
	con := w.consumerProc(t, "mutatielevering-1", conBin, "BRP_LEVERING_MUTATIELEVERING_PREFETCH=50")
	w.waitDelivered(t, 300)
	const bound = 15 * time.Second
	for _, p := range []*brptest.Proc{con, pub} {
		p.Signal(syscall.SIGTERM)
		if code, err := p.Wait(bound); err != nil || code != 0 {
			t.Fatalf("%s after SIGTERM: exit %d, %v; want 0 within %v", p.Name, code, err, bound)
		}
	}
	// The stopped publisher handed its lease over: a new one leads at once, not after leaseTimeout.
	var holder string
	if err := w.db.Get(&holder, `select holder from publicatie_lease where cluster = 'default'`); err != nil || holder != "" {
		t.Fatalf("lease after SIGTERM: holder %q, %v; want released", holder, err)
	}
	started := time.Now()
	pub2 := w.publisherProc(t, "publicatie-2", pubBin)
	pub2.WaitLeader(leaseTimeout)
	if took := time.Since(started); took > leaseTimeout/2 {
		t.Fatalf("new publisher took %v to lead after a clean handover", took)
	}
	w.consumerProc(t, "mutatielevering-2", conBin)
	w.verify(t)
}

// runCLI runs a publicatie subcommand against the world's database and returns its output.
func (w *world) runCLI(t testing.TB, args ...string) string {
	t.Helper()
	cmd := exec.Command(brptest.Build(t, "cmd/publicatie"), args...)
	cmd.Env = append(os.Environ(), "BRP_DATABASE_URL="+w.dbURL, "BRP_LOG_FORMAT=json")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("publicatie %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func TestOperatorReleaseAndRetryUnblockPersons(t *testing.T) {
	t.Parallel()
	w := newWorld(t, load.Spec{N: 0})
	ins := func(id int64, persoon int64) {
		if _, err := w.db.Exec(`insert into admhnd (id, soort, tsreg) values ($1, 'VERHUIZING', now() - interval '1 hour' + $2 * interval '1 ms')`, id, id); err != nil {
			t.Fatal(err)
		}
		if _, err := w.db.Exec(`insert into admhnd_persoon values ($1, $2)`, id, persoon); err != nil {
			t.Fatal(err)
		}
	}
	// h1 of person 10 and h3 of person 30 ended in fout (a known error of an earlier run).
	ins(1, 10)
	ins(2, 10)
	ins(3, 30)
	ins(4, 30)
	if _, err := w.db.Exec(`update admhnd set statuslev = 'fout', foutreden = 'afnemerindicatie ontbreekt' where id in (1, 3)`); err != nil {
		t.Fatal(err)
	}
	w.consumers(t, 1, 2)
	pub := w.publisherProc(t, "publicatie", brptest.Build(t, "cmd/publicatie"))
	time.Sleep(2 * time.Second)
	if s2, s4 := brptest.Status(t, w.db, 2), brptest.Status(t, w.db, 4); s2 != "" || s4 != "" {
		t.Fatalf("strict policy let later handelingen pass a fout one: 2=%q 4=%q", s2, s4)
	}
	if out := w.runCLI(t, "fout", "list"); !strings.Contains(out, "afnemerindicatie ontbreekt") {
		t.Fatalf("fout list does not show the reason:\n%s", out)
	}
	w.runCLI(t, "fout", "release", "1", "--door", "beheerder-a", "--note", "afnemer informed")
	w.runCLI(t, "fout", "retry", "3", "--door", "beheerder-b")
	brptest.Eventually(t, 30*time.Second, func() error {
		for id, want := range map[int64]string{1: "fout", 2: "geleverd", 3: "geleverd", 4: "geleverd"} {
			if got := brptest.Status(t, w.db, id); got != want {
				return fmt.Errorf("handeling %d is %q, want %q", id, got, want)
			}
		}
		return nil
	})
	brptest.Eventually(t, 10*time.Second, func() error {
		ids := w.verzending.IDs()
		if len(ids) != 3 || !slices.Contains(ids, 2) || slices.Index(ids, 3) < 0 || slices.Index(ids, 3) > slices.Index(ids, 4) {
			return fmt.Errorf("verzending %v, want 2, 3 and 4, with 3 before 4", ids)
		}
		return nil
	})
	// 1 stays fout, released: it needs no operator any more.
	if m := scrape(t, pub); m["brp_levering_fout_handelingen"] != 1 || m["brp_levering_fout_unreleased_handelingen"] != 0 {
		t.Errorf("after release and retry: fout %v, unreleased %v; want 1 and 0",
			m["brp_levering_fout_handelingen"], m["brp_levering_fout_unreleased_handelingen"])
	}
	var audit []string
	if err := w.db.Select(&audit, `select admhnd_id || ':' || actie || ':' || door from admhnd_beheer order by id`); err != nil {
		t.Fatal(err)
	}
	if strings.Join(audit, ",") != "1:release:beheerder-a,3:retry:beheerder-b" {
		t.Fatalf("audit %v", audit)
	}
}

// WAKEUP=false is the seed's behaviour, kept for comparison: a round every DELAY and nothing
// else, so a person's chain of four needs at least three delays.
func TestWakeupOffGivesTheSeedsFixedDelay(t *testing.T) {
	t.Parallel()
	w := newWorld(t, load.Spec{N: 4, Personen: 1, Seed: 23})
	w.consumers(t, 1, 1)
	const delay = 400 * time.Millisecond
	w.publisherProc(t, "publicatie", brptest.Build(t, "cmd/publicatie"),
		"BRP_LEVERING_ADMHNDPUBLICATIE_WAKEUP=false", "BRP_LEVERING_ADMHNDPUBLICATIE_DELAY=400ms")
	w.verify(t)
	var spread time.Duration
	if err := w.db.Get(&spread, `select (extract(epoch from max(tslev) - min(tslev)) * 1e9)::bigint from admhnd`); err != nil {
		t.Fatal(err)
	}
	if spread < 3*delay-50*time.Millisecond {
		t.Fatalf("chain of 4 delivered within %v; with a fixed delay of %v it takes at least %v", spread, delay, 3*delay)
	}
}
