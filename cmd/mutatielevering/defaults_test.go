package main

import (
	"testing"

	"github.com/brp/levering/cmd/internal/setup"
	"github.com/brp/levering/handeling"
)

// The queues default to the contract's (handeling).
func TestQueueDefaults(t *testing.T) {
	for _, d := range setup.DefaultsDiffer(config{}, map[string]string{
		"BRP_LEVERING_ADMHNDPUBLICATIE_QUEUE": handeling.PublicationQueue,
		"BRP_LEVERING_VERZENDING_QUEUE":       handeling.VerzendingQueue,
		"BRP_LEVERING_MUTATIELEVERING_DLQ":    handeling.DeadLetterQueue,
	}) {
		t.Error(d)
	}
}

// Every numeric setting has an upper bound (a max tag, checked at start).
func TestEveryNumericSettingHasABound(t *testing.T) {
	if u := setup.Unbounded(config{}); len(u) > 0 {
		t.Errorf("numeric settings without a max tag: %v", u)
	}
}
