//go:build faults

// Package fault turns BRP_FAULT into a crash at a named step, for the robustness scenarios. It
// is compiled only with the build tag "faults"; production builds get the no-op in nofault.go.
//
// BRP_FAULT=<point>:<action>[:<n>] acts the n-th time (default 1) the process passes point.
// Actions: kill (SIGKILL itself), stop (SIGSTOP itself), exit (os.Exit(3)).
package fault

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

var (
	point, action string
	nth           int64 = 1
	seen          atomic.Int64
)

func init() {
	spec := os.Getenv("BRP_FAULT")
	if spec == "" {
		return
	}
	parts := strings.Split(spec, ":")
	if len(parts) < 2 {
		fmt.Fprintf(os.Stderr, "BRP_FAULT=%q: expected point:action[:n]\n", spec)
		os.Exit(2)
	}
	point, action = parts[0], parts[1]
	if len(parts) > 2 {
		n, err := strconv.ParseInt(parts[2], 10, 64)
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "BRP_FAULT=%q: n must be a positive integer\n", spec)
			os.Exit(2)
		}
		nth = n
	}
}

// At marks that the process passes the named point; it acts if BRP_FAULT names it.
func At(name string) {
	if name != point || seen.Add(1) != nth {
		return
	}
	fmt.Fprintf(os.Stderr, "{\"msg\":\"fault injected\",\"fault_point\":%q,\"fault_action\":%q}\n", name, action)
	switch action {
	case "kill":
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	case "stop":
		// A process-directed SIGSTOP may let this thread run on for a moment before every
		// thread is stopped; the pause keeps it at the fault point until then (and after
		// SIGCONT it simply continues).
		_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
		time.Sleep(100 * time.Millisecond)
	case "exit":
		os.Exit(3)
	}
}
