#!/usr/bin/env bash
# Runs every test against a real PostgreSQL and ActiveMQ: starts them (installing what is
# missing), then go vet and go test. The chaos test runs on its own and verbosely, so its
# counts (published, delivered, duplicates, kills) are printed; a smoke run of the benchmark
# comes last. Extra arguments go to both go test runs (for example: -run EndToEnd) and skip the
# benchmark.
set -euo pipefail
cd "$(dirname "$0")/.."
# The unit lane first, as on a clean clone: nothing but Go on PATH and no service settings
# (the environment reduced to HOME and Go's own variables). Tests that need a service or a tool
# skip in -short and say which. Only for the whole suite, not for a selection of tests.
if (($# == 0)); then
  clean=(HOME="$HOME" PATH="$(dirname "$(command -v go)")")
  while IFS= read -r kv; do clean+=("$kv"); done < <(env | grep -E '^(GO[A-Z0-9_]*|CGO_ENABLED|TMPDIR)=' || true)
  env -i "${clean[@]}" go test -short -count=1 ./...
fi
scripts/services.sh up
scripts/services.sh up-rabbitmq
# Tools the tests run, from Debian packages: headless Chromium (the status page), promtool
# (package prometheus: the alert rules and their unit tests), docker-compose (the compose files,
# checked without an engine), javac (package default-jdk-headless: the JMS afnemer of
# scenarios/jms_test.go; the activemq package brings only a runtime).
missing=()
command -v chromium >/dev/null || missing+=(chromium)
command -v javac >/dev/null || missing+=(default-jdk-headless)
command -v promtool >/dev/null || missing+=(prometheus)
command -v docker-compose >/dev/null || missing+=(docker-compose)
if ((${#missing[@]})); then
  echo "test: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=300 update -qq
  apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # Only promtool is wanted: where systemd runs, Debian starts the packaged Prometheus server.
  if [[ " ${missing[*]} " == *" prometheus "* && -d /run/systemd/system ]]; then
    systemctl disable --now prometheus >/dev/null 2>&1 || true
  fi
fi
# Tools from the Go module proxy, pinned: helm (the chart's lint and rendering) and kubeconform
# (the rendered manifests against the Kubernetes and Prometheus Operator schemas).
tools=$PWD/.run/bin
mkdir -p "$tools"
export PATH=$tools:$PATH
command -v helm >/dev/null || GOBIN=$tools go install helm.sh/helm/v3/cmd/helm@v3.16.3
command -v kubeconform >/dev/null || GOBIN=$tools go install github.com/yannh/kubeconform/cmd/kubeconform@v0.6.7
eval "$(scripts/services.sh env)"
go vet ./...
go vet -tags faults ./...
# Four tests of a package at once rather than one a core: the scenario tests spend much of
# their time waiting out a fault (a pause, a timeout, a restart), and the machine would sit
# idle meanwhile (docs/performance.md, "The full lane").
go test -count=1 -timeout 60m -parallel 4 -skip '^TestChaos$' "$@" ./...
# The core packages once more on a statuslev that bijhouding made an enum (CONTRACT.md section 1;
# brptest.DB reads BRP_TEST_STATUSLEV); the end-to-end scenario runs on both forms by itself.
# Here and on the kern layout 8 random histories of the reference model a test, not 24: they
# look for a statement that fails on that form, the main run searches the rules.
BRP_TEST_STATUSLEV=enum BRP_REFERENCE_SEEDS=8 go test -count=1 -timeout 20m "$@" ./publicatie/ ./levering/ ./operate/ ./schema/ ./cmd/...
go test -count=1 -timeout 20m -v -run '^TestChaos$' "$@" ./scenarios/ | grep -E '^\s*(=== RUN|--- |chaos_test.go|ok|FAIL|PASS)'
# The kern layout (BRP_DATABASE_LAYOUT=kern, docs/kern.md): the core packages, the hostile
# bijhouding and the chaos test once more on a BRP kern database (brptest.Layout). The kern
# layout's own tests (migrate's refusals, migrate beside bijhouding, the commands) run above;
# the slow and bulk writers (issue 48) run on it too.
BRP_TEST_LAYOUT=kern BRP_REFERENCE_SEEDS=8 go test -count=1 -timeout 30m "$@" ./publicatie/ ./levering/ ./operate/ ./handeling/
BRP_TEST_LAYOUT=kern go test -count=1 -timeout 20m -run '^(TestHostileBijhouding|TestSlowWritersEndNothingInFout)$' "$@" ./scenarios/
BRP_TEST_LAYOUT=kern go test -count=1 -timeout 20m -v -run '^TestChaos$/^ActiveMQ$' "$@" ./scenarios/ | grep -E '^\s*(=== RUN|--- |chaos_test.go|ok|FAIL|PASS)'
# The benchmark, small (scripts/bench.sh measures for real): every measurement runs, checks
# per-person order and is rendered. Only for the whole suite, not for a selection of tests.
if (($# == 0)); then
  smoke=$(mktemp -d)
  BRP_BENCH_QUICK=1 BRP_BENCH_OUT=$smoke scripts/bench.sh
  rm -rf -- "$smoke"
fi
