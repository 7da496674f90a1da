package levering_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/brp/levering/handeling"
	"github.com/brp/levering/internal/setting"
	"github.com/brp/levering/levering"
)

// Config.Validate refuses each field's bad values, naming the field, and takes every bound.
// It needs no services.
func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name  string
		cfg   levering.Config
		field string // "": valid
	}{
		{"defaults", levering.Config{}, ""},
		{"every bound", levering.Config{Workers: 64, Batch: 10_000, Prefetch: 100_000, BatchTimeout: time.Hour, ShutdownGrace: time.Hour}, ""},
		{"skip policy", levering.Config{FoutPolicy: handeling.Skip}, ""},
		{"own queues", levering.Config{Queue: "/queue/a", VerzendingQueue: "/queue/b", DeadLetterQueue: "/queue/c"}, ""},
		{"negative workers", levering.Config{Workers: -1}, "Workers"},
		{"too many workers", levering.Config{Workers: 65}, "Workers"},
		{"negative batch", levering.Config{Batch: -1}, "Batch"},
		{"too large a batch", levering.Config{Batch: 10_001}, "Batch"},
		{"negative prefetch", levering.Config{Prefetch: -1}, "Prefetch"},
		{"too large a prefetch", levering.Config{Prefetch: 100_001}, "Prefetch"},
		{"unknown fout policy", levering.Config{FoutPolicy: "lenient"}, "FoutPolicy"},
		{"negative shutdown grace", levering.Config{ShutdownGrace: -time.Second}, "ShutdownGrace"},
		{"negative batch timeout", levering.Config{BatchTimeout: -time.Second}, "BatchTimeout"},
		{"too long a batch timeout", levering.Config{BatchTimeout: time.Hour + time.Second}, "BatchTimeout"},
		{"queue is the verzending queue", levering.Config{Queue: handeling.VerzendingQueue}, "Queue"},
		{"queue is the dead-letter queue", levering.Config{Queue: "/queue/x", DeadLetterQueue: "/queue/x"}, "Queue"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			var se *setting.Error
			if !errors.As(err, &se) || se.Field != tt.field || !errors.Is(err, levering.ErrConfig) {
				t.Fatalf("Validate() = %v, want a levering.ErrConfig naming %s", err, tt.field)
			}
		})
	}
}

// A zero field takes its default; the default prefetch is a batch for every worker, within its
// bound.
func TestConfigDefaults(t *testing.T) {
	got := levering.Config{}.WithDefaults()
	if got.Queue != handeling.PublicationQueue || got.VerzendingQueue != handeling.VerzendingQueue ||
		got.DeadLetterQueue != handeling.DeadLetterQueue || !slices.Equal(got.Excluded, handeling.DefaultExcluded()) ||
		got.FoutPolicy != handeling.Strict || got.Workers != levering.DefaultWorkers || got.Batch != levering.DefaultBatch ||
		got.Prefetch != levering.DefaultWorkers*levering.DefaultBatch || got.ShutdownGrace != 10*time.Second ||
		got.BatchTimeout != levering.DefaultBatchTimeout {
		t.Fatalf("defaults %+v", got)
	}
	if got := (levering.Config{Excluded: []string{}}).WithDefaults().Excluded; got == nil || len(got) != 0 {
		t.Fatalf("an empty exclusion became %v, want it kept empty", got)
	}
	if got := (levering.Config{Workers: 3, Batch: 7}).WithDefaults().Prefetch; got != 21 {
		t.Fatalf("prefetch of 3 workers of batches of 7 %d, want 21", got)
	}
	if got := (levering.Config{Workers: 64, Batch: 10_000}).WithDefaults(); got.Prefetch != 100_000 || got.Validate() != nil {
		t.Fatalf("prefetch of 64 workers of batches of 10,000 %d (%v), want 100000", got.Prefetch, got.Validate())
	}
}
