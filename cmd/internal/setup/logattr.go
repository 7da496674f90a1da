package setup

import (
	"log/slog"
	"strings"
)

// durationSeconds writes a duration as seconds under its key with "_seconds" appended
// (delay=5s becomes delay_seconds=5): slog's JSON handler would write nanoseconds, which
// nobody reads right, and Prometheus names its durations in seconds too.
func durationSeconds(groups []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() != slog.KindDuration {
		return a
	}
	key := a.Key
	if !strings.HasSuffix(key, "_seconds") {
		key += "_seconds"
	}
	return slog.Float64(key, a.Value.Duration().Seconds())
}
