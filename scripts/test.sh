#!/usr/bin/env bash
# Runs every test against a real PostgreSQL and ActiveMQ: starts them (installing what is
# missing), then go vet and go test. The chaos test runs in a pass of its own and verbosely,
# so its counts (published, delivered, duplicates, kills) are printed; a smoke run of the
# benchmark comes last in its stream. Extra arguments go to every go test run (for example:
# -run EndToEnd) and skip the unit lane and the benchmark.
#
# The passes run in three streams side by side (docs/performance.md, "The full lane"): the
# main run; the core packages on the other forms (statuslev an enum, the kern layout); the
# chaos tests, kern's writers and the benchmark's smoke run. Each stream writes to a file of
# its own, printed whole when the stream ends, so a pass's output is never interleaved with
# another's; the lane fails if any pass failed, after every stream has ended.
set -euo pipefail
cd "$(dirname "$0")/.."
logs=$(mktemp -d)
# streams maps each running stream's pid (its process group: job control is on while they
# start) to its name. Interrupted or ended early, the lane takes its streams down with it.
declare -A streams=()
finish() {
  for p in "${!streams[@]}"; do kill -TERM -- "-$p" 2>/dev/null || true; done
  rm -rf -- "$logs"
}
trap finish EXIT
trap 'exit 130' INT TERM
# The services start while the unit lane runs: it reaches none of them.
# The lane's PostgreSQL runs without fsync (BRP_DEV_PG_DURABLE=off): its databases are thrown
# away, and its flushes cost CPU the tests need (docs/performance.md, "The full lane").
(BRP_DEV_PG_DURABLE=off scripts/services.sh up && scripts/services.sh up-rabbitmq) >"$logs/services" 2>&1 &
services=$!
# The unit lane first, as on a clean clone: nothing but Go on PATH and no service settings
# (the environment reduced to HOME and Go's own variables). Tests that need a service or a tool
# skip in -short and say which. Only for the whole suite, not for a selection of tests.
if (($# == 0)); then
  clean=(HOME="$HOME" PATH="$(dirname "$(command -v go)")")
  while IFS= read -r kv; do clean+=("$kv"); done < <(env | grep -E '^(GO[A-Z0-9_]*|CGO_ENABLED|TMPDIR)=' || true)
  env -i "${clean[@]}" go test -short -count=1 ./...
fi
up=0
wait "$services" || up=$?
cat "$logs/services"
((up == 0)) || exit "$up"
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

# pass name command...: runs one pass of a stream, says how long it took, and remembers a
# failure (the stream goes on with its next pass).
pass() {
  local name=$1 start=$SECONDS rc=0
  shift
  echo "test: pass $name"
  "$@" || rc=$?
  echo "test: pass $name: exit $rc after $((SECONDS - start)) s"
  ((rc == 0)) || failed+=("$name")
}
# chaos runs the scenario tests its arguments select verbosely, filtered down to the tests'
# outcomes and the chaos test's counts (published, delivered, duplicates, kills).
chaos() { go test -count=1 -timeout 20m -v "$@" ./scenarios/ | grep -E '^\s*(=== RUN|--- |chaos_test.go|ok|FAIL|PASS)'; }

main_run() {
  # Four tests of a package at once rather than one a core: the scenario tests spend much of
  # their time waiting out a fault (a pause, a timeout, a restart).
  pass main go test -count=1 -timeout 60m -parallel 4 -skip '^TestChaos$' "$@" ./...
}
forms() {
  # The core packages once more on a statuslev that bijhouding made an enum (CONTRACT.md
  # section 1; brptest.DB reads BRP_TEST_STATUSLEV); the end-to-end scenario runs on both
  # forms by itself. Here and on the kern layout 8 random histories of the reference model a
  # test, not 24: they look for a statement that fails on that form, the main run searches
  # the rules.
  BRP_TEST_STATUSLEV=enum BRP_REFERENCE_SEEDS=8 pass enum go test -count=1 -timeout 20m "$@" ./publicatie/ ./levering/ ./operate/ ./schema/ ./cmd/...
  # The kern layout (BRP_DATABASE_LAYOUT=kern, docs/kern.md): the core packages once more on
  # a BRP kern database (brptest.Layout). The kern layout's own tests (migrate's refusals,
  # migrate beside bijhouding, the commands) run in the main run.
  BRP_TEST_LAYOUT=kern BRP_REFERENCE_SEEDS=8 pass kern go test -count=1 -timeout 30m "$@" ./publicatie/ ./levering/ ./operate/ ./handeling/
}
faults() {
  pass chaos chaos -run '^TestChaos$' "$@"
  # The hostile bijhouding, the slow and bulk writers (issue 48) and the chaos test on kern.
  BRP_TEST_LAYOUT=kern pass kern-writers go test -count=1 -timeout 20m -run '^(TestHostileBijhouding|TestSlowWritersEndNothingInFout)$' "$@" ./scenarios/
  BRP_TEST_LAYOUT=kern pass kern-chaos chaos -run '^TestChaos$/^ActiveMQ$' "$@"
  # The benchmark, small (scripts/bench.sh measures for real): every measurement runs, checks
  # per-person order and is rendered. Only for the whole suite, not for a selection of tests.
  if (($# == 0)); then
    smoke=$(mktemp -d)
    BRP_BENCH_QUICK=1 BRP_BENCH_OUT=$smoke pass smoke scripts/bench.sh
    rm -rf -- "$smoke"
  fi
}

# Job control gives each stream a process group of its own, so that finish can end a stream
# with everything it started (go test, the test binaries, their processes); stdin is
# /dev/null, as it is for a background command without job control.
set -m
for s in main_run forms faults; do
  (
    failed=()
    started=$SECONDS
    "$s" "$@"
    echo "test: stream $s: $((SECONDS - started)) s${failed[*]:+, failed: ${failed[*]}}"
    ((${#failed[@]} == 0))
  ) </dev/null >"$logs/$s" 2>&1 &
  streams[$!]=$s
done
set +m
bad=()
while ((${#streams[@]})); do
  rc=0
  wait -n -p done "${!streams[@]}" || rc=$?
  s=${streams[$done]}
  unset "streams[$done]"
  echo "==> stream $s ($(date -u +%T)), exit $rc"
  cat "$logs/$s"
  ((rc == 0)) || bad+=("$s")
done
if ((${#bad[@]})); then
  echo "test: failed: ${bad[*]}" >&2
  exit 1
fi
