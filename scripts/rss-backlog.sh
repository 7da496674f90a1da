#!/usr/bin/env bash
# Peak-RSS check under a large backlog (issue 5): loads N handelingen still to be delivered
# (default 1,000,000, over N/10 persons) into a database of its own, runs one publicatie and two
# mutatielevering processes for a while and prints each process's resident memory every 5 s.
# Flat columns mean memory does not grow with the backlog. Usage: scripts/rss-backlog.sh [N] [seconds]
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-1000000}
secs=${2:-90}
scripts/services.sh up
eval "$(scripts/services.sh env)"
mkdir -p bin .run/rss
go build -o bin/ ./cmd/publicatie ./cmd/mutatielevering
db=brp_rss
base=${BRP_DATABASE_URL%%\?*}
admin=$BRP_DATABASE_URL
url="${base%/*}/$db?${BRP_DATABASE_URL#*\?}"
psql -q "$admin" -c "drop database if exists $db with (force)" -c "create database $db"
BRP_DATABASE_URL=$url bin/publicatie migrate >/dev/null
echo "loading $n handelingen..." >&2
psql -q "$url" <<SQL
insert into admhnd (id, soort, tsreg)
  select g, 'VERHUIZING', now() - interval '1 day' + g * interval '1 ms' from generate_series(1, $n) g;
insert into admhnd_persoon select g, 1 + g % greatest($n / 10, 1) from generate_series(1, $n) g;
analyze admhnd; analyze admhnd_persoon;
SQL
q=/queue/brp.rss.$(date +%s)
export BRP_DATABASE_URL=$url BRP_LEVERING_ADMHNDPUBLICATIE_QUEUE=$q.publicatie BRP_LEVERING_VERZENDING_QUEUE=$q.verzending \
  BRP_LEVERING_MUTATIELEVERING_DLQ=$q.dlq BRP_HTTP_ADDR=127.0.0.1:0 BRP_LOG_FORMAT=json
bin/publicatie > .run/rss/publicatie.log 2>&1 & p=$!
bin/mutatielevering > .run/rss/mutatielevering-1.log 2>&1 & c1=$!
bin/mutatielevering > .run/rss/mutatielevering-2.log 2>&1 & c2=$!
trap 'kill $p $c1 $c2 2>/dev/null; wait 2>/dev/null; psql -q "$admin" -c "drop database if exists $db with (force)"' EXIT
rss() { awk '/VmRSS/ {printf "%6.1f", $2/1024}' "/proc/$1/status"; }
printf '%6s %10s %12s %12s %12s\n' s geleverd publicatie_MB consumer1_MB consumer2_MB
for ((t = 5; t <= secs; t += 5)); do
  sleep 5
  g=$(psql -Atq "$url" -c "select count(*) from admhnd where statuslev = 'geleverd'")
  printf '%6d %10d %12s %12s %12s\n' "$t" "$g" "$(rss $p)" "$(rss $c1)" "$(rss $c2)"
done
for pid in $p $c1 $c2; do awk '/VmHWM/ {printf "peak %s: %.1f MB\n", "'"$pid"'", $2/1024}' "/proc/$pid/status"; done
