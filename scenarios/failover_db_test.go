package scenarios

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/brp/levering/internal/brptest"
	"github.com/brp/levering/internal/load"
)

// dbFailover is a pipeline whose processes reach PostgreSQL through the endpoint of a
// replicated pair (brptest.ReplicatedDB), on the tests' broker.
type dbFailover struct {
	*world
	r *brptest.ReplicatedDB
}

func newDBFailover(t *testing.T, sync bool, spec load.Spec) *dbFailover {
	t.Helper()
	r := brptest.PrivateReplicatedDB(t, sync)
	w := emptyWorldAt(t, r.ServerURL(), brptest.Broker(), spec)
	if err := load.Insert(context.Background(), w.db, w.hs); err != nil {
		t.Fatal(err)
	}
	return &dbFailover{world: w, r: r}
}

// direct is the URL of the test's database on the server at hostport, around the endpoint.
func (f *dbFailover) direct(t testing.TB, hostport string) string {
	t.Helper()
	u, err := url.Parse(f.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = hostport
	return u.String()
}

// geleverd reads the handelingen that are geleverd, with their tslev, on the server at
// hostport.
func (f *dbFailover) geleverd(t testing.TB, hostport string) map[int64]time.Time {
	t.Helper()
	db, err := sqlx.Open("postgres", f.direct(t, hostport))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var rows []struct {
		ID    int64     `db:"id"`
		Tslev time.Time `db:"tslev"`
	}
	if err := db.Select(&rows, `select id, tslev from admhnd where statuslev = 'geleverd'`); err != nil {
		t.Fatalf("read geleverd on %s: %v", hostport, err)
	}
	out := make(map[int64]time.Time, len(rows))
	for _, r := range rows {
		out[r.ID] = r.Tslev
	}
	return out
}

// failOver kills the primary, promotes the standby and switches the endpoint to it, as
// Patroni would, and returns when each step was done (measured from the kill) and how many
// handelingen were geleverd on the new primary before anyone could reach it.
func (f *dbFailover) failOver(t testing.TB) (killed time.Time, promoted, switched time.Duration, kept int) {
	t.Helper()
	f.r.KillPrimary()
	killed = time.Now()
	f.r.Promote()
	promoted = time.Since(killed)
	kept = len(f.geleverd(t, "127.0.0.1:"+strconv.Itoa(f.r.StandbyPort)))
	f.r.SwitchEndpoint()
	switched = time.Since(killed)
	// The test's own pool: connections to the dead primary are gone.
	f.db.SetMaxIdleConns(0)
	f.db.SetMaxIdleConns(2)
	return killed, promoted, switched, kept
}

// waitResumed waits until more handelingen are geleverd on the new primary than the n that
// were when the primary died, and returns when.
func (f *dbFailover) waitResumed(t testing.TB, n int) time.Time {
	t.Helper()
	brptest.Eventually(t, 2*time.Minute, func() error {
		var d int
		if err := f.db.Get(&d, `select count(*) from admhnd where statuslev = 'geleverd'`); err != nil {
			return err
		}
		if d <= n {
			return errorf("%d geleverd on the new primary, %d at the failover", d, n)
		}
		return nil
	})
	return time.Now()
}

// PostgreSQL with a synchronous standby behind one endpoint: the primary is killed mid-run,
// the standby promoted and the endpoint switched. Every geleverd committed before the kill is
// still there, unchanged, on the new primary (a commit returns only once the standby has it),
// and the run completes in order.
func TestDatabaseFailoverSynchronous(t *testing.T) {
	// Not parallel with the other scenarios: two servers of its own, and failover times to measure.
	f := newDBFailover(t, true, load.Spec{N: 12000, Personen: 1200, Multi: 0.3, Excluded: 0.05, Seed: 82})
	f.publisherProc(t, "publicatie", brptest.Build(t, "cmd/publicatie"))
	for i := range 3 {
		f.consumerProc(t, fmt.Sprintf("mutatielevering-%d", i+1), brptest.Build(t, "cmd/mutatielevering"))
	}
	f.waitInFlight(t, 1000)
	before := f.geleverd(t, f.r.Endpoint.Addr())
	killed, promoted, switched, kept := f.failOver(t)
	resumed := f.waitResumed(t, kept).Sub(killed)
	rep := f.verify(t)

	after := f.geleverd(t, f.r.Endpoint.Addr())
	var lost []int64
	for id, tslev := range before {
		if !after[id].Equal(tslev) {
			lost = append(lost, id)
		}
	}
	if len(lost) > 0 {
		t.Fatalf("%d of the %d geleverd committed before the kill vanished with synchronous replication: %v",
			len(lost), len(before), lost[:min(len(lost), 20)])
	}
	t.Logf("primary killed with %d geleverd, all of them kept; standby promoted after %v, endpoint switched after %v, "+
		"deliveries resumed after %v; %d verzending messages, %d duplicates",
		len(before), promoted.Round(time.Millisecond), switched.Round(time.Millisecond), resumed.Round(time.Millisecond),
		rep.Messages, rep.Duplicates)
}

// PostgreSQL with an asynchronous standby whose replication is cut while the primary goes on
// committing: then the leader freezes, the follower takes the lease over, publishes and the
// consumers deliver, all on the primary only. The primary is killed, the standby promoted
// and the endpoint switched: those commits are gone. What the service does:
//   - each geleverd that vanished is delivered again, a duplicate with the same admhnd-id
//     after its first occurrence (its handeling was in levering or not yet published on the
//     standby, so it blocked its persons meanwhile); per-person order holds;
//   - the follower's lease epoch vanished too: the lease row on the new primary names the
//     frozen leader. The follower's fence checks its epoch in each round's own transaction on
//     whichever primary is current, so it commits nothing more under the lost epoch: it
//     reports the lost lease before it commits again, and one publisher leads.
func TestDatabaseFailoverAsynchronousLosesLastCommits(t *testing.T) {
	// Not parallel with the other scenarios: two servers of its own, and failover times to measure.
	f := newDBFailover(t, false, load.Spec{N: 12000, Personen: 1200, Multi: 0.3, Excluded: 0.05, Seed: 83})
	bin := brptest.Build(t, "cmd/publicatie")
	// The republication of what vanished in levering (its publication was acknowledged on
	// the lost timeline) waits for the redelivery timeout: shorter here than the default 60 s.
	redelivery := "BRP_LEVERING_ADMHNDPUBLICATIE_REDELIVERYTIMEOUT=10"
	a := f.publisherProc(t, "publicatie-a", bin, redelivery)
	a.WaitLeader(20 * time.Second)
	b := f.publisherProc(t, "publicatie-b", bin, redelivery)
	b.WaitReady(20 * time.Second)
	for i := range 3 {
		f.consumerProc(t, fmt.Sprintf("mutatielevering-%d", i+1), brptest.Build(t, "cmd/mutatielevering"))
	}
	f.waitInFlight(t, 1000)

	f.r.Replication.Cut()
	atCut := len(f.geleverd(t, f.r.Endpoint.Addr()))
	a.Signal(syscall.SIGSTOP)
	became := b.WaitLog(leaseTimeout+time.Minute, "became leader")
	epochB := int64(became["epoch"].(float64))
	// Both: the frozen leader's last rounds (up to MAXINLEVERING in flight) alone can bring
	// 500 deliveries after the cut, before the follower's first round commits.
	brptest.Eventually(t, time.Minute, func() error {
		if n := len(f.geleverd(t, f.r.Endpoint.Addr())); n < atCut+500 {
			return errorf("%d geleverd, %d at the cut: waiting for deliveries under the new leader", n, atCut)
		}
		if committedRounds(b)[epochB] == 0 {
			return errorf("the follower committed no round under epoch %d yet", epochB)
		}
		return nil
	})
	before := f.geleverd(t, f.r.Endpoint.Addr())
	killed, promoted, switched, kept := f.failOver(t)
	var holder string
	var epoch int64
	if err := f.db.QueryRow(`select holder, epoch from publicatie_lease`).Scan(&holder, &epoch); err != nil {
		t.Fatal(err)
	}
	t.Logf("lease on the new primary: holder %s, epoch %d; the follower led under epoch %d on the lost timeline", holder, epoch, epochB)
	if epoch >= epochB {
		t.Fatalf("the lease epoch %d of the follower survived the failover (%d on the new primary): the test lost nothing", epochB, epoch)
	}
	// The follower's lines from the switch on are about the new primary: nothing could commit
	// between the kill and the switch. It may have found its lease lost before this test read
	// the lease above (a full lane on a busy machine: its lost-lease line came first, then a
	// lease of its own on the new primary and its commits), so the lines are taken by their
	// time, not from here.
	fromB := linesSince(b, killed.Add(switched))
	a.Signal(syscall.SIGCONT)
	resumed := f.waitResumed(t, kept).Sub(killed)
	rep := f.verify(t)

	after := f.geleverd(t, f.r.Endpoint.Addr())
	count := map[int64]int{}
	for _, id := range f.verzending.IDs() {
		count[id]++
	}
	var vanished []int64
	for id, tslev := range before {
		if !after[id].Equal(tslev) {
			vanished = append(vanished, id)
			if count[id] < 2 {
				t.Errorf("handeling %d: its geleverd vanished, but it is on the verzending queue %d times, want a duplicate", id, count[id])
			}
		}
	}
	if len(vanished) == 0 {
		t.Fatalf("none of the %d geleverd committed after the cut vanished", len(before)-atCut)
	}

	// The follower under its lost epoch: a lost-lease line before any further commit.
	lostAt, committedAt, lostLine := -1, -1, ""
	for i, raw := range b.Output()[fromB:] {
		switch {
		case lostAt < 0 && (strings.Contains(raw, `"msg":"lost the lease during a round; the round was rolled back"`) ||
			strings.Contains(raw, `"msg":"lease taken over by another instance; now follower"`) ||
			strings.Contains(raw, `"msg":"rounds made no progress for the lease timeout; handing the lease over"`)):
			lostAt, lostLine = i, raw
		case committedAt < 0 && strings.Contains(raw, `"msg":"round committed"`) && !strings.Contains(raw, `"published":0,`):
			committedAt = i
		}
	}
	if lostAt < 0 || (committedAt >= 0 && committedAt < lostAt) {
		t.Fatalf("the follower under the lost epoch %d: lost-lease line at %d, first commit at %d (of its lines after the switch)",
			epochB, lostAt, committedAt)
	}
	t.Logf("the follower after the switch: %s", lostLine)
	sa, sb := status(t, a), status(t, b)
	if sa.Leader == sb.Leader {
		t.Fatalf("after the failover a leads: %v, b leads: %v; want exactly one", sa.Leader, sb.Leader)
	}
	t.Logf("replication cut with %d geleverd on the primary, %d at the failover; %d vanished (not replicated) and were "+
		"delivered again (duplicates); standby promoted after %v, endpoint switched after %v, deliveries resumed after %v; "+
		"%d verzending messages, %d duplicates; the lease now held by %s",
		atCut, len(before), len(vanished), promoted.Round(time.Millisecond), switched.Round(time.Millisecond),
		resumed.Round(time.Millisecond), rep.Messages, rep.Duplicates, map[bool]string{true: "a", false: "b"}[sa.Leader])
}

// linesSince is the index in p.Output() of p's first line logged at or after at.
func linesSince(p *brptest.Proc, at time.Time) int {
	out := p.Output()
	for i, raw := range out {
		var l struct {
			Time time.Time `json:"time"`
		}
		if json.Unmarshal([]byte(raw), &l) == nil && !l.Time.Before(at) {
			return i
		}
	}
	return len(out)
}
