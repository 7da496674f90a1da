package brptest

import (
	"testing"
	"time"
)

// Eventually polls cond every 50 ms until it returns nil or timeout passes, then fails t with
// cond's last error.
func Eventually(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	EventuallyEvery(t, timeout, 50*time.Millisecond, cond)
}

// EventuallyEvery is Eventually polling every interval: for conditions that load what a
// benchmark measures (a count over a million rows).
func EventuallyEvery(t testing.TB, timeout, interval time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not reached within %v: %v", timeout, err)
		}
		time.Sleep(interval)
	}
}

// WhileProgressing polls cond every interval until it returns nil. It fails t only when cond's
// progress (a count that grows as work gets done, such as the handelingen delivered) has not
// grown for stall: on a busy machine a run may take several times as long as on an idle one,
// and that is no failure; a run that stops moving is.
func WhileProgressing(t testing.TB, stall, interval time.Duration, cond func() (progress int64, err error)) {
	t.Helper()
	var most int64 = -1
	since := time.Now()
	for {
		n, err := cond()
		if err == nil {
			return
		}
		if n > most {
			most, since = n, time.Now()
		} else if time.Since(since) > stall {
			t.Fatalf("no progress for %v (at %d): %v", stall, most, err)
		}
		time.Sleep(interval)
	}
}
