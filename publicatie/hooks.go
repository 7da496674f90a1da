package publicatie

import (
	"context"

	"github.com/brp/levering/internal/fault"
)

// Hooks are fault seams: tests use them to fail or kill at a precise step of a round. Every
// field may be nil, and nil does nothing, which is what production runs.
type Hooks struct {
	// AfterIntake runs after the round's intake into its view, before it reads which persons
	// are blocked.
	AfterIntake func(ctx context.Context) error
	// BeforeSweep runs in a round that compares its view with the database, after the intake,
	// before the checksums are read.
	BeforeSweep func(ctx context.Context) error
	// AfterMark runs after the kept handelingen were marked in_levering, before the broker send.
	AfterMark fault.Hook
	// AfterBrokerCommit runs after the broker confirmed the round's messages, before the
	// database commit. An error makes the round roll back the database.
	AfterBrokerCommit fault.Hook
	// RoundCommitted runs after a round committed the database.
	RoundCommitted func(ids []int64)
}
