#!/usr/bin/env bash
# Runs every test against a real PostgreSQL and ActiveMQ: starts them (installing what is
# missing), then go vet and go test. The chaos test runs last, on its own and verbosely, so its
# counts (published, delivered, duplicates, kills) are printed. Extra arguments go to both go
# test runs (for example: -run EndToEnd).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/services.sh up
scripts/services.sh up-rabbitmq
# The status page is tested in headless Chromium.
if ! command -v chromium >/dev/null; then
  echo "test: installing chromium for the status page test" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=300 update -qq
  apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends chromium >/dev/null
fi
eval "$(scripts/services.sh env)"
go vet ./...
go vet -tags faults ./...
go test -count=1 -timeout 60m -skip '^TestChaos$' "$@" ./...
go test -count=1 -timeout 20m -v -run '^TestChaos$' "$@" ./scenarios/ | grep -E '^\s*(=== RUN|--- |chaos_test.go|ok|FAIL|PASS)'
