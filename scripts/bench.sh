#!/usr/bin/env bash
# The benchmark: start PostgreSQL and ActiveMQ (installed if missing), build the commands into
# bin/, and run bin/bench, which measures in one run the pipeline's throughput at 1/2/4/8
# consumer processes, chain latency, peak RSS, the publisher's round time, the raw ceiling and
# seed mode on the same services, and round time as the history grows to 10M rows. Results go to
# stdout and docs/bench/ (results.md, results.json, throughput.svg). Extra arguments go to the
# bench (for example: -quick, or -consumers 1,4 -history 10k,1M; bin/bench -h lists them).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/services.sh up
eval "$(scripts/services.sh env)"
mkdir -p bin
go build -o bin/ ./cmd/publicatie ./cmd/mutatielevering ./cmd/bench
exec bin/bench "$@"
