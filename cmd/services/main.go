// Command services runs the project-owned PostgreSQL, ActiveMQ and RabbitMQ (package
// internal/stack) for development, the demo, the tests and CI. scripts/services.sh builds and
// runs it; `scripts/services.sh help` prints its commands and settings (stack.Usage).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"

	"github.com/brp/levering/internal/stack"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case err == nil:
	case errors.Is(err, stack.ErrUsage):
		_ = stack.Usage(os.Stderr)
		os.Exit(2)
	default:
		fmt.Fprintf(os.Stderr, "services: ERROR: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 1 && slices.Contains([]string{"help", "-h", "--help"}, args[0]) {
		return stack.Usage(stdout)
	}
	if len(args) != 1 {
		return stack.ErrUsage
	}
	repo, err := os.Getwd()
	if err != nil {
		return err
	}
	cfg, err := stack.FromEnv(repo)
	if err != nil {
		return err
	}
	cfg.Log = stderr
	return stack.Run(ctx, cfg, args[0], stdout)
}
