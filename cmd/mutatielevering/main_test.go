package main

import (
	"testing"

	"github.com/brp/levering/cmd/internal/setup"
	"github.com/brp/levering/handeling"
	"github.com/brp/levering/internal/brptest"
	"github.com/brp/levering/levering"
)

// --help shows the defaults that package levering owns (the queues are the contract's).
func TestHelpShowsThePackagesDefaults(t *testing.T) {
	brptest.HelpShows(t, run,
		"BRP_LEVERING_ADMHNDPUBLICATIE_QUEUE "+handeling.PublicationQueue,
		"BRP_LEVERING_VERZENDING_QUEUE "+handeling.VerzendingQueue,
		"BRP_LEVERING_MUTATIELEVERING_DLQ "+handeling.DeadLetterQueue,
		"BRP_LEVERING_MUTATIELEVERING_WORKERS 2",
		"BRP_LEVERING_MUTATIELEVERING_BATCHTIMEOUT 20s",
		"BRP_STOMP_RANDOMIZE true",
	)
}

// Every numeric setting has an upper bound: the command's own a max tag, checked at start,
// and the package's settings its Config's Validate, which the command names back (Explain).
func TestEveryNumericSettingHasABound(t *testing.T) {
	var c levering.Config
	if u := setup.Unbounded(&config{}, func() error { return c.Validate() }, vars(&c)...); len(u) > 0 {
		t.Errorf("numeric settings without a bound: %v", u)
	}
}
