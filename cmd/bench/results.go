package main

// Results is everything one run measured; it is written as results.json.
type Results struct {
	StartedAt       string     `json:"started_at"`
	DurationSeconds float64    `json:"duration_seconds"`
	Machine         Machine    `json:"machine"`
	Settings        Settings   `json:"settings"`
	Pipeline        []Pipeline `json:"pipeline"`
	Chain           []Chain    `json:"chain"`
	Seed            *Pipeline  `json:"seed_mode"`
	Raw             []Raw      `json:"raw_ceiling"`
	Pairs           []Pair     `json:"pairs"`
	Scale           []Scale    `json:"scale"`
	Ratios          Ratios     `json:"ratios"`
	Services        Services   `json:"services"`
	Notes           []string   `json:"notes"`
	Errors          []string   `json:"errors"`
}

// Machine describes where the run happened.
type Machine struct {
	CPUs     int    `json:"cpus"`
	Kernel   string `json:"kernel"`
	Postgres string `json:"postgres"`
	Broker   string `json:"broker"`
	Code     string `json:"code"`
	Bench    string `json:"bench_build"`
}

// Settings are the workload and the settings of the processes.
type Settings struct {
	N               int      `json:"n"`
	Personen        int      `json:"personen"`
	Multi           float64  `json:"multi_person_share"`
	Excluded        float64  `json:"excluded_share"`
	Consumers       []int    `json:"consumers"`
	Workers         string   `json:"workers_per_process"`
	Delay           string   `json:"delay"`
	Limit           string   `json:"limit"`
	MaxInLevering   string   `json:"max_in_levering"`
	ExtraEnv        []string `json:"extra_env"`
	Chain           int      `json:"chain"`
	ChainBackground int      `json:"chain_background"`
	SeedN           int      `json:"seed_n"`
	SeedPersonen    int      `json:"seed_personen"`
	SeedWindow      float64  `json:"seed_window_seconds"`
	RawN            int      `json:"raw_n"`
	RawBatch        int      `json:"raw_batch"`
	History         []int64  `json:"history"`
	Backlog         int      `json:"backlog"`
	BacklogPersonen int      `json:"backlog_personen"`
	ScaleConsumers  int      `json:"scale_consumers"`
	Quick           bool     `json:"quick"`
}

// Pipeline is one run of the real processes over a seeded workload.
type Pipeline struct {
	Label     string  `json:"label"`
	Consumers int     `json:"consumers"`
	Seeded    int     `json:"seeded"`
	Expected  int     `json:"expected"` // non-excluded handelingen
	Geleverd  int     `json:"geleverd"`
	Fout      int     `json:"fout"`
	Complete  bool    `json:"complete"`
	Seconds   float64 `json:"seconds"` // process start until the last tslev (or the window)
	// Rate is geleverd / Seconds: handelingen per second from process start.
	Rate float64 `json:"rate"`
	// FirstSeconds is process start until the first tslev (start-up and the first round);
	// SteadyRate is geleverd / (last tslev - first tslev).
	FirstSeconds      float64    `json:"first_geleverd_seconds"`
	SteadyRate        float64    `json:"steady_rate"`
	ExcludedTouched   int        `json:"excluded_touched"`
	Verzending        Verzending `json:"verzending"`
	Rounds            RoundStats `json:"rounds"`
	Processes         []ProcStat `json:"processes"`
	CPU               CPUSeconds `json:"cpu_seconds"`
	ConsumerBatchMean float64    `json:"consumer_processing_ms_mean"`
	Error             string     `json:"error,omitempty"`
	Extra             []string   `json:"extra_env,omitempty"`
	MaxInLevering     int        `json:"max_in_levering_seen"`
	// Warnings are the processes' WARN and ERROR log lines (a consumer that lost its broker
	// connection, a failed round), prefixed with the process.
	Warnings []string    `json:"warnings"`
	Poll     []PollPoint `json:"progress,omitempty"`
}

// PollPoint is one progress sample (seconds since start, geleverd so far).
type PollPoint struct {
	T        float64 `json:"t"`
	Geleverd int     `json:"geleverd"`
}

// Verzending is what was read back from the verzending queue and the order check.
type Verzending struct {
	Messages   int      `json:"messages"`
	Distinct   int      `json:"distinct"`
	Duplicates int      `json:"duplicates"`
	Violations int      `json:"violations"`
	Samples    []string `json:"violation_samples,omitempty"`
}

// RoundStats is the publisher's round time: from its /metrics histogram and, exactly, from its
// debug log lines "round committed".
type RoundStats struct {
	Count        int     `json:"count"` // rounds that published something (histogram count)
	MeanMs       float64 `json:"mean_ms"`
	P50Ms        float64 `json:"p50_ms"` // interpolated in the histogram's buckets
	P95Ms        float64 `json:"p95_ms"`
	LogCount     int     `json:"log_count"`
	LogP50Ms     float64 `json:"log_p50_ms"`
	LogP95Ms     float64 `json:"log_p95_ms"`
	LogMaxMs     float64 `json:"log_max_ms"`
	LogSumMs     float64 `json:"log_sum_ms"`
	PublishedAvg float64 `json:"published_per_round"`
	FullRounds   int     `json:"rounds_publishing_500_plus"`
	FullP50Ms    float64 `json:"rounds_publishing_500_plus_p50_ms"`
}

// ProcStat is one process at the end of its run.
type ProcStat struct {
	Name       string  `json:"name"`
	PID        int     `json:"pid"`
	PeakRSSMB  float64 `json:"peak_rss_mb"` // VmHWM right before SIGTERM
	CPUSeconds float64 `json:"cpu_seconds"`
	ExitOK     bool    `json:"exit_ok"`
}

// CPUSeconds splits the CPU time of a run between its parts.
type CPUSeconds struct {
	Wall        float64 `json:"wall"`
	Publisher   float64 `json:"publisher"`
	Consumers   float64 `json:"consumers"`
	Broker      float64 `json:"broker"`
	Postgres    float64 `json:"postgres"` // every backend of the server, other databases included
	Bench       float64 `json:"bench"`
	MachineBusy float64 `json:"machine_busy"` // all CPUs, everything (other work on the machine too)
}

// Chain is the per-link latency of one person's chain of handelingen.
type Chain struct {
	Label      string  `json:"label"`
	Links      int     `json:"links"`
	Background int     `json:"background"`
	Consumers  int     `json:"consumers"`
	P50Ms      float64 `json:"p50_ms"`
	P95Ms      float64 `json:"p95_ms"`
	P99Ms      float64 `json:"p99_ms"`
	MaxMs      float64 `json:"max_ms"`
	MeanMs     float64 `json:"mean_ms"`
	FirstMs    float64 `json:"first_link_ms"`
	TotalMs    float64 `json:"total_ms"`
	Error      string  `json:"error,omitempty"`
}

// Raw is one run of the bare receive-update-send-ack loop.
type Raw struct {
	Mode  string `json:"mode"`
	Batch int    `json:"batch"`
	// AckPerBatch: one cumulative ack per batch, as the consumer does, instead of the issue's
	// one ack per item.
	AckPerBatch bool       `json:"ack_per_batch"`
	Goroutines  int        `json:"goroutines"`
	Conns       int        `json:"connection_pairs"`
	N           int        `json:"n"`
	Seconds     float64    `json:"seconds"`
	Rate        float64    `json:"rate"`
	Verified    int        `json:"rows_geleverd"`
	CPU         CPUSeconds `json:"cpu_seconds"`
	Warnings    []string   `json:"warnings"`
	Error       string     `json:"error,omitempty"`
}

// Scale is the publisher's round time at one size of delivered history.
type Scale struct {
	History     int64      `json:"history_target"`
	Rows        int64      `json:"admhnd_rows"`
	FillSeconds float64    `json:"fill_seconds"`
	Backlog     int        `json:"backlog"`
	Seconds     float64    `json:"seconds"`
	Rate        float64    `json:"rate"`
	Rounds      RoundStats `json:"rounds"`
	// Isolated are full rounds of the publisher alone: the same backlog, no consumers; after
	// each round the bench sets what it published back to "te leveren", so every round reads
	// LIMIT candidates and publishes as many as the persons allow.
	Isolated   RoundStats `json:"isolated_rounds"`
	Violations int        `json:"violations"`
	Processes  []ProcStat `json:"processes"`
	CPU        CPUSeconds `json:"cpu_seconds"`
	Warnings   []string   `json:"warnings"`
	Error      string     `json:"error,omitempty"`
}

// Ratios are the comparisons the issue asks for.
type Ratios struct {
	At int `json:"consumers"`
	// PairsPipeline and PairsRaw are the medians of Pairs; when there are pairs, the ratios
	// with the raw ceiling and seed mode use them.
	PairsPipeline float64 `json:"pairs_pipeline_median"`
	PairsRaw      float64 `json:"pairs_raw_batched_median"`
	// PairsRawAckPerBatch is the median of the pairs' raw loops that ack once per batch, and
	// PipelineVsRawAckPerBatch the pipeline's median over it: the stricter comparison.
	PairsRawAckPerBatch      float64 `json:"pairs_raw_batched_ack_per_batch_median"`
	PipelineVsRawAckPerBatch float64 `json:"pipeline_vs_raw_batched_ack_per_batch"`
	RawGoroutines            int     `json:"raw_goroutines"` // the raw ceiling compared with: the pipeline's concurrency
	PipelineVsRawBatch       float64 `json:"pipeline_vs_raw_batched"`
	PipelineVsRawSingle      float64 `json:"pipeline_vs_raw_single"`
	PipelineVsSeed           float64 `json:"pipeline_vs_seed_mode"`
	ScaleLargestVsFirst      float64 `json:"round_p50_largest_vs_smallest_history"`
	ScaleIsolated            float64 `json:"isolated_round_p50_largest_vs_smallest_history"`
	ScaleLargest             int64   `json:"scale_largest_history"`
	ScaleSmallest            int64   `json:"scale_smallest_history"`
}

// Services are the shared services' own figures, when they could be read.
type Services struct {
	BrokerPID         int     `json:"broker_pid"`
	BrokerRSSMB       float64 `json:"broker_rss_mb"`
	BrokerPeakRSSMB   float64 `json:"broker_peak_rss_mb"` // since the broker started: other users included
	PostgresPID       int     `json:"postgres_pid"`
	PostgresPSSMB     float64 `json:"postgres_pss_mb"`      // all server processes at the end
	PostgresPeakPSSMB float64 `json:"postgres_peak_pss_mb"` // highest sample taken during the runs
	DatabaseMB        float64 `json:"bench_database_mb"`
}

// Pair is the headline measured once more: the pipeline at Ratios.At consumers, then the
// batched raw ceiling at the same concurrency. The pairs run one after the other, so a
// machine that gets faster or slower during the run moves both sides of the ratio alike.
type Pair struct {
	Pipeline float64 `json:"pipeline"`
	Raw      float64 `json:"raw_batched"`
	// RawAckPerBatch is the batched raw loop with one ack per batch, as the consumer acks.
	RawAckPerBatch float64 `json:"raw_batched_ack_per_batch"`
	// The CPU of the three runs and the CPU milliseconds per handeling of their measured
	// parts, which show which side a change saves on.
	PipelineCPU         CPUSeconds `json:"pipeline_cpu_seconds"`
	RawCPU              CPUSeconds `json:"raw_batched_cpu_seconds"`
	RawAckPerBatchCPU   CPUSeconds `json:"raw_batched_ack_per_batch_cpu_seconds"`
	PipelineCPUms       float64    `json:"pipeline_cpu_ms_per_handeling"`
	RawCPUms            float64    `json:"raw_batched_cpu_ms_per_item"`
	RawAckPerBatchCPUms float64    `json:"raw_batched_ack_per_batch_cpu_ms_per_item"`
	Error               string     `json:"error,omitempty"`
}
