#!/usr/bin/env bash
# Measures what each gray failure costs (a frozen or cut-off consumer or leader, a paused
# broker or database) with the default settings, and writes docs/gray/results.md: the table
# that docs/robustness.md quotes. Each fault runs on a PostgreSQL and an ActiveMQ of its own
# (scenarios.BenchmarkGrayFailures); about 20 minutes on 2 CPUs. BRP_GRAY_N sets the backlog
# (default 240000 handelingen); extra arguments go to go test (for example -bench
# 'GrayFailures/leader').
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/services.sh up >/dev/null # installs PostgreSQL and ActiveMQ when missing
out=docs/gray
mkdir -p "$out"
raw=$out/bench.txt
# The code measured is what go test builds now, not what the tree holds when it is done.
code="$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!docs' || echo ' + uncommitted changes')"
bench=${*:-"-bench ^BenchmarkGrayFailures\$"}
# shellcheck disable=SC2086 # the arguments are words for go test
go test -run '^$' $bench -benchtime 1x -timeout 120m ./scenarios/ | grep -v '"level"' | tee "$raw"
{
  printf '# Gray failures, measured\n\n'
  # shellcheck disable=SC2016 # the backquotes are markdown
  printf 'Written by `scripts/gray-report.sh` on %s, code %s, %s CPUs, backlog %s handelingen;\n' \
    "$(date -u +%Y-%m-%d)" "$code" "$(nproc)" "${BRP_GRAY_N:-240000}"
  printf 'default settings. The columns are explained in docs/robustness.md; raw output: bench.txt.\n\n'
  printf '| fault | detected after | taken over / flowing again after | flow of the others | lost | order violations | duplicates |\n'
  printf '|---|---:|---:|---:|---:|---:|---:|\n'
  awk '/^BenchmarkGrayFailures\// {
    name = $1; sub(/^BenchmarkGrayFailures\//, "", name); sub(/-[0-9]+$/, "", name); gsub(/_/, " ", name)
    delete m
    for (i = 5; i < NF; i += 2) m[$(i + 1)] = $i
    flow = ("flow_ratio" in m) ? sprintf("%.2fx", m["flow_ratio"]) : "n/a"
    printf "| %s | %.1f s | %.1f s | %s | %d | %d | %d |\n", name, m["detect_s"], m["recover_s"], flow, m["lost"], m["order_violations"], m["duplicates"]
  }' "$raw"
} >"$out/results.md"
echo "gray-report: wrote $out/results.md" >&2
