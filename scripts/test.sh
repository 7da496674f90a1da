#!/usr/bin/env bash
# Runs every test against a real PostgreSQL and ActiveMQ: starts them (installing what is
# missing), then go vet and go test. Extra arguments go to go test (for example: -run EndToEnd).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/services.sh up
eval "$(scripts/services.sh env)"
go vet ./...
go test -count=1 -timeout 60m "$@" ./...
