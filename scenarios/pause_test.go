package scenarios

// The broker and the database paused (SIGSTOP to their processes, as a VM pause or live
// migration would): their sockets stay open and their kernels answer, but nothing comes back.
// Every wait on them is bounded, so the service's processes notice, reconnect and catch up
// once they resume.

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/brp/levering/internal/brptest"
	"github.com/brp/levering/internal/load"
)

// stompTimeout is BRP_STOMP_TIMEOUT in the pause tests, short so that a pause of twice its
// length stays short too.
const stompTimeout = 10 * time.Second

func pausedPipeline(t testing.TB, svc *brptest.Services, seed uint64) (*world, *brptest.Proc, []*brptest.Proc) {
	t.Helper()
	w := newWorldOn(t, svc, load.Spec{N: 4000, Personen: 400, Multi: 0.3, Excluded: 0.05, Seed: seed})
	timeout := "BRP_STOMP_TIMEOUT=" + stompTimeout.String()
	pub := w.publisherProc(t, "publicatie", brptest.Build(t, "cmd/publicatie"), timeout)
	var consumers []*brptest.Proc
	for i := range 3 {
		consumers = append(consumers, w.consumerProc(t, fmt.Sprintf("mutatielevering-%d", i+1),
			brptest.Build(t, "cmd/mutatielevering"), timeout))
	}
	w.waitDelivered(t, 500)
	return w, pub, consumers
}

// The broker frozen for 2 x BRP_STOMP_TIMEOUT mid-run, on both brokers: the consumers notice
// the missing heart-beats, the publisher's rounds fail within the timeout; after the broker
// resumes, everything is delivered in order.
func TestBrokerPausedMidRun(t *testing.T) {
	t.Parallel()
	for name, svc := range map[string]func(testing.TB) *brptest.Services{
		"ActiveMQ": brptest.PrivateServices, "RabbitMQ": brptest.PrivateRabbitMQ} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := svc(t)
			w, _, consumers := pausedPipeline(t, s, 70)
			s.PauseBroker()
			time.Sleep(2 * stompTimeout)
			s.ResumeBroker()
			resumed := time.Now()
			rep := w.verify(t)
			t.Logf("all delivered %v after the broker resumed; %d verzending messages, %d duplicates",
				time.Since(resumed).Round(time.Second), rep.Messages, rep.Duplicates)
			if !slices.ContainsFunc(consumers, func(c *brptest.Proc) bool {
				return len(c.Lines("broker connection lost, reconnecting")) > 0
			}) {
				t.Fatal("no consumer noticed that the broker was frozen")
			}
		})
	}
}

// PostgreSQL frozen for 40 s mid-run (longer than every database bound of the service): the
// processes' statements give up on it instead of waiting for good; after it resumes,
// everything is delivered in order.
func TestDatabasePausedMidRun(t *testing.T) {
	t.Parallel()
	s := brptest.PrivateServices(t)
	w, pub, consumers := pausedPipeline(t, s, 71)
	s.PauseDB()
	time.Sleep(40 * time.Second)
	s.ResumeDB()
	resumed := time.Now()
	rep := w.verify(t)
	t.Logf("all delivered %v after the database resumed; %d verzending messages, %d duplicates",
		time.Since(resumed).Round(time.Second), rep.Messages, rep.Duplicates)
	if len(pub.Lines("publication round failed, retrying")) == 0 && len(pub.Lines("could not record polling activity")) == 0 {
		t.Fatal("the publisher did not notice that the database was frozen")
	}
	_ = consumers
}
