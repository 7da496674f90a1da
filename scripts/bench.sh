#!/usr/bin/env bash
# The benchmark: start a PostgreSQL and an ActiveMQ of its own (installed if missing; fresh
# data, under .run/bench, on ports 55442 and 61623), build the commands into bin/, and run
# bin/bench, which measures in one run the pipeline's throughput at 1/2/4/8 consumer
# processes, chain latency, peak RSS, the publisher's round time, the raw ceiling and seed mode
# on the same services, the headline ratio again in alternating pairs, and round time as the
# history grows to 10M rows. Results go to stdout and docs/bench/ (results.md, results.json,
# throughput.svg). Extra arguments go to the bench (for example: -quick, or -consumers 1,4
# -history 10k,1M; bin/bench -h lists them).
#
# Why services of its own: a broker's speed depends on what its store holds. One that has
# served the test suite keeps thousands of destinations and leftover messages in KahaDB and
# was measured here at up to 2.7x the CPU per message of a fresh one, which made every figure
# depend on the machine's history. The bench's services start empty each time and are
# stopped and removed at the end (BRP_BENCH_KEEP=1 keeps them).
set -euo pipefail
cd "$(dirname "$0")/.."
export BRP_RUN_DIR=$PWD/.run/bench BRP_DEV_PG_PORT=${BRP_BENCH_PG_PORT:-55442} BRP_DEV_STOMP_PORT=${BRP_BENCH_STOMP_PORT:-61623}
scripts/services.sh down >/dev/null 2>&1 || true
rm -rf -- "$BRP_RUN_DIR"
cleanup() {
  if [[ ${BRP_BENCH_KEEP:-} != 1 ]]; then
    scripts/services.sh down >/dev/null 2>&1 || true
    rm -rf -- "$BRP_RUN_DIR"
  fi
}
trap cleanup EXIT
scripts/services.sh up
eval "$(scripts/services.sh env)"
mkdir -p bin
go build -o bin/ ./cmd/publicatie ./cmd/mutatielevering ./cmd/bench
bin/bench "$@"
