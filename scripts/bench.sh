#!/usr/bin/env bash
# The benchmark: runs scenarios.BenchmarkPipeline and renders its output with cmd/bench into
# docs/bench/ (results.md, throughput.svg, and go test's raw output bench.txt). In one run it
# measures the headline ratio in alternating pairs (the pipeline with 4 consumers, then the raw
# ceiling at the same concurrency), the pipeline's throughput at 1/2/4/8 consumer processes,
# chain latency, seed mode, the raw ceiling, and the publisher's round time as the delivered
# history grows to 10M rows; about 8 minutes on 2 CPUs.
#
# The benchmark starts a PostgreSQL and an ActiveMQ of its own (installed if missing), with
# fresh data on free ports, and removes them at the end. Why: a broker's speed depends on what
# its store holds. One that has served the test suite keeps thousands of destinations and
# leftover messages in KahaDB and was measured here at up to 2.7x the CPU per message of a
# fresh one, which made every figure depend on the machine's history.
#
# BRP_BENCH_QUICK=1 makes every size small (a smoke run of about a minute); BRP_BENCH_OUT
# writes elsewhere than docs/bench; extra arguments go to go test (for example
# -bench 'Pipeline/(pair|seed)'). With --render it measures nothing and writes results.md and
# throughput.svg again from bench.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${BRP_BENCH_OUT:-docs/bench}
mkdir -p "$out"
raw=$out/bench.txt
if [[ ${1:-} != --render ]]; then
  bench=${*:-"-bench ^BenchmarkPipeline\$"}
  {
    # Configuration lines of the benchmark format, for cmd/bench. The code measured is what
    # go test builds now, not what the tree holds when it is done.
    printf 'date: %s\ncode: %s' "$(date -u +%Y-%m-%d)" "$(git rev-parse --short=12 HEAD)"
    git diff --quiet HEAD -- . ':!docs' ':!README.md' || printf ' + uncommitted changes'
    printf '\n'
    # shellcheck disable=SC2086 # the arguments are words for go test
    go test -run '^$' $bench -benchtime 1x -timeout 90m ./scenarios/
  } | grep -v '"level"' | tee "$raw.new"
  mv "$raw.new" "$raw"
fi
go run ./cmd/bench -out "$out" "$raw"
echo "bench: wrote $out/results.md and $out/throughput.svg" >&2
