#!/usr/bin/env bash
# Measures how fast workloads of different shapes are delivered (uniform, a hot set, runs per
# person, one person at the head of the queue, a very wide handeling, a 1,000,000-handeling
# catch-up, round time under blocked work) with the default settings, and writes
# docs/shapes/results.md. One PostgreSQL and ActiveMQ of its own, a fresh database per shape
# (scenarios.BenchmarkWorkloadShapes); about 25 minutes on 2 CPUs. BRP_SHAPES_BACKLOG and
# BRP_SHAPES_WIDE shrink the big shapes; extra arguments go to go test (for example
# -bench 'WorkloadShapes/runs'). With --render it measures nothing and writes results.md again
# from bench.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
out=docs/shapes
mkdir -p "$out"
raw=$out/bench.txt
if [[ ${1:-} != --render ]]; then
  scripts/services.sh up >/dev/null # installs PostgreSQL and ActiveMQ when missing
  # The code measured is what go test builds now, not what the tree holds when it is done.
  git rev-parse --short HEAD >"$out/code"
  git diff --quiet HEAD -- . ':!docs' ':!README.md' || echo ' + uncommitted changes' >>"$out/code"
  bench=${*:-"-bench ^BenchmarkWorkloadShapes\$"}
  # shellcheck disable=SC2086 # the arguments are words for go test
  go test -run '^$' $bench -benchtime 1x -timeout 150m ./scenarios/ | grep -v '"level"' | tee "$raw"
fi
code=$(tr -d '\n' <"$out/code")
{
  printf '# Workload shapes, measured\n\n'
  # shellcheck disable=SC2016 # the backquotes are markdown
  printf 'Written by `scripts/shapes-report.sh` on %s, code %s, %s CPUs; default settings, 1 publicatie\n' \
    "$(date -u +%Y-%m-%d)" "$code" "$(nproc)"
  printf '+ 4 mutatielevering. Shapes and columns: scenarios/shapes_bench_test.go; raw output: bench.txt.\n\n'
  printf '| shape | handelingen/s | vs uniform | longest chain | link p50 | chain bound | vs bound | other figures |\n'
  printf '|---|---:|---:|---:|---:|---:|---:|---|\n'
  awk '/^BenchmarkWorkloadShapes\// {
    name = $1; sub(/^BenchmarkWorkloadShapes\//, "", name); sub(/-[0-9]+$/, "", name)
    delete m
    for (i = 3; i < NF; i += 2) if ($(i + 1) ~ /_/ || $(i + 1) == "hps") m[$(i + 1)] = $i
    if (name == "uniform") uni = m["hps"]
    if (name == "uniform_multi33") uni33 = m["hps"]
    if (name == "others_alone") alone = m["hps"]
    ref = (name == "hot") ? uni33 : uni
    rate = ("hps" in m) ? sprintf("%.0f", m["hps"]) : ""
    vs = (("hps" in m) && ref > 0 && name ~ /^(hot|runs_|catch_up)/) ? sprintf("%.2fx", m["hps"] / ref) : ""
    chain = ("longest_chain" in m) ? sprintf("%d", m["longest_chain"]) : ""
    link = ("link_p50_ms" in m) ? sprintf("%.1f ms", m["link_p50_ms"]) : ""
    bound = ("chain_bound_hps" in m) ? sprintf("%.0f/s", m["chain_bound_hps"]) : ""
    vsb = ("chain_bound_hps" in m) ? sprintf("%.2fx", m["hps"] / m["chain_bound_hps"]) : ""
    other = ""
    if ("others_hps" in m) other = sprintf("the 10,000 others: %.0f/s, %.2fx their rate alone", m["others_hps"], m["others_hps"] / alone)
    if ("message_bytes" in m) { other = sprintf("its round %.0f ms, message %.0f bytes, geleverd %.0f ms after its round began", m["round_ms"], m["message_bytes"], m["delivered_ms"]); rate = chain = link = "" }
    if ("round_p50_ms" in m) other = sprintf("rounds after the intake: p50 %.2f ms, p90 %.2f ms", m["round_p50_ms"], m["round_p90_ms"])
    printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", name, rate, vs, chain, link, bound, vsb, other
  }' "$raw"
  # What a table cannot say (how to read the targets, earlier measurements) is kept by hand.
  if [[ -f $out/notes.md ]]; then cat "$out/notes.md"; fi
} >"$out/results.md"
echo "shapes-report: wrote $out/results.md" >&2
