package publicatie

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lib/pq"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Round failures are attributed to the dependency that failed, and only to it: an error of
// the publisher itself (a hook, an encoding) is neither the broker's nor the database's.
func TestRoundFailuresNameTheirDependency(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err  error
		want string
	}{
		{dbErr(errors.New("relation admhnd does not exist")), "database"},
		{fmt.Errorf("round: %w", brokerErr(errors.New("connection refused"))), "broker"},
		{fmt.Errorf("encode publication 7: %w", errors.New("unsupported value")), "publicatie"},
	} {
		if got := dependency(c.err); got != c.want {
			t.Errorf("dependency(%v) = %s, want %s", c.err, got, c.want)
		}
	}
}

// A round the database ended to break a deadlock (another session took its locks in another
// order) runs again at once, logged as a warning with PostgreSQL's account of the cycle: no
// "publication round failed" error, no outage counted, no back-off.
func TestRoundEndedByADeadlockRunsAgainAtOnce(t *testing.T) {
	t.Parallel()
	e := newRoundEnv(t, Config{})
	var log syncBuffer
	e.pub.log = slog.New(slog.NewJSONHandler(&log, nil))
	e.insert(h(1, 1, 10))
	var calls atomic.Int32
	e.pub.cfg.Hooks.AfterIntake = func(context.Context) error {
		if calls.Add(1) == 1 {
			return dbErr(fmt.Errorf("read blocked persons: %w", &pq.Error{Code: "40P01", Message: "deadlock detected",
				Detail: "Process 1 waits for ShareLock on relation 2 of database 3; blocked by process 4."}))
		}
		return nil
	}
	published := make(chan []int64, 10)
	e.pub.cfg.Hooks.RoundCommitted = func(ids []int64) {
		if len(ids) > 0 {
			published <- ids
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan struct{})
	go func() { defer close(ran); _ = e.pub.Run(ctx) }()
	select {
	case ids := <-published:
		wantIDs(t, "after the deadlock", ids, 1)
	case <-time.After(10 * time.Second):
		t.Fatal("nothing published after the deadlock")
	}
	cancel()
	<-ran
	if l := log.lines(t, "publication round ended by a deadlock with another session's locks; running it again"); len(l) != 1 ||
		l[0]["level"] != "WARN" || !strings.Contains(fmt.Sprint(l[0]["detail"]), "waits for ShareLock") {
		t.Fatalf("deadlock logged as %v, want one warning with the detail", l)
	}
	if l := log.lines(t, "publication round failed, retrying"); len(l) != 0 {
		t.Fatalf("the deadlock was logged as a failure: %v", l)
	}
	if n := testutil.ToFloat64(e.pub.m.reconnects.WithLabelValues("database")); n != 0 {
		t.Fatalf("the deadlock counted as %v database outages", n)
	}
}
