#!/usr/bin/env bash
# Project-owned PostgreSQL and ActiveMQ (STOMP) for development, the demo and CI, and on request
# RabbitMQ, an ActiveMQ master/slave pair, a network of brokers and a PostgreSQL standby.
#
#   scripts/services.sh up      install what is missing, start PostgreSQL and ActiveMQ
#   scripts/services.sh env     print export lines: eval "$(scripts/services.sh env)"
#   scripts/services.sh down    stop everything
#   scripts/services.sh help    every command and setting
#
# A thin wrapper: the work is done by cmd/services (package internal/stack), which the tests
# also use for services of their own. It is built into .run/bin on first use.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=.run/bin/brp-services
mkdir -p .run/bin
go build -o "$bin" ./cmd/services
exec "$bin" "$@"
