package setup

import (
	"log/slog"
	"strings"

	"github.com/brp/levering/internal/dbsession"
)

// replaceAttr is the loggers' last word on every attribute: durations in seconds, no secrets.
func replaceAttr(groups []string, a slog.Attr) slog.Attr {
	switch a.Value.Kind() {
	case slog.KindDuration:
		return durationSeconds(groups, a)
	case slog.KindString:
		if s := a.Value.String(); strings.Contains(s, "://") || strings.Contains(strings.ToLower(s), "password") {
			return slog.String(a.Key, dbsession.Redact(s))
		}
	case slog.KindAny:
		if err, ok := a.Value.Any().(error); ok {
			return slog.String(a.Key, dbsession.Redact(err.Error()))
		}
	}
	return a
}

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
