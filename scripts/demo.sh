#!/usr/bin/env bash
# The main job: start PostgreSQL and ActiveMQ (installed if missing), build the commands, and run
# one publicatie and three mutatielevering processes over a demo load with visible progress.
# Extra arguments go to the demo (for example: -n 10000 -personen 1000 -consumers 4).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/services.sh up
eval "$(scripts/services.sh env)"
mkdir -p bin
go build -o bin/ ./cmd/publicatie ./cmd/mutatielevering ./cmd/demo
exec bin/demo "$@"
