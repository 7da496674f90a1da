#!/usr/bin/env bash
# Project-owned PostgreSQL and ActiveMQ (STOMP) for development, the demo and CI, and on request
# RabbitMQ (STOMP) as a second broker for the broker conformance suite.
#
#   scripts/services.sh up              install what is missing, start both, wait until ready
#   scripts/services.sh down            stop both (and whatever else of the list below runs)
#   scripts/services.sh status          print whether each runs (exit 0 only if both are ready)
#   scripts/services.sh env             print export lines: eval "$(scripts/services.sh env)"
#   scripts/services.sh restart-db      stop and start PostgreSQL only (data kept)
#   scripts/services.sh stop-db         stop PostgreSQL only (up starts it again)
#   scripts/services.sh up-db           start PostgreSQL only
#   scripts/services.sh restart-broker  stop and start ActiveMQ only (data kept)
#   scripts/services.sh up-rabbitmq     optional second STOMP broker: install, start RabbitMQ
#   scripts/services.sh down-rabbitmq   stop RabbitMQ (and its epmd)
#   scripts/services.sh restart-rabbitmq  stop and start RabbitMQ (data kept)
#   scripts/services.sh up-amq-pair     ActiveMQ master/slave: two brokers on one store, two ports
#   scripts/services.sh up-amq-network  two ActiveMQ brokers joined by network connectors
#   scripts/services.sh up-pg-standby   a streaming standby of PostgreSQL (pg_basebackup)
#   scripts/services.sh promote-pg-standby  make the standby a primary (failover)
#   scripts/services.sh down-amq-pair | down-amq-network | down-pg-standby  stop them (a
#                                       standby's copy of the data is removed)
#
# Every command is idempotent. State lives in ${BRP_RUN_DIR:-<repo>/.run}:
#   pg/data  pg/socket  pg/log/postgres.log                  (owned by the postgres user)
#   activemq/conf  activemq/data/{kahadb,activemq.log,console.log}  activemq/activemq.pid
#   rabbitmq/conf  rabbitmq/mnesia  rabbitmq/log/{rabbit.log,console.log}  rabbitmq/rabbitmq.pid
# Ports: BRP_DEV_PG_PORT (default 55432), BRP_DEV_STOMP_PORT (default 61613), both on 127.0.0.1.
# BRP_DEV_OPENWIRE_PORT, when set, adds an OpenWire listener (the JMS clients' protocol) on
# 127.0.0.1 to the default broker, for afnemers written in Java (scenarios/jms_test.go); unset,
# the broker has only STOMP. It takes effect when the broker starts.
# BRP_ACTIVEMQ_HOME (default /usr/share/activemq, the Debian package) may point at another install.
# The broker configuration is versioned in scripts/activemq/ and copied to the run dir on start.
#
# High availability topologies (for the tests of docs/operations.md "High availability"; down stops them):
# - up-amq-pair: a master on BRP_DEV_PAIR_STOMP_PORT_A (default 61631) and a slave on
#   BRP_DEV_PAIR_STOMP_PORT_B (61632) sharing the KahaDB store amq-pair/shared/kahadb. The slave
#   blocks on the store's lock and opens its port only when the master is gone (kill it: the
#   slave takes over within about a second plus its start-up). Dirs amq-pair/{a,b}.
# - up-amq-network: brokers brp-net-a and brp-net-b, STOMP on BRP_DEV_NET_STOMP_PORT_A/_B
#   (61641/61642), OpenWire for their bridges on BRP_DEV_NET_OPENWIRE_PORT_A/_B (61643/61644),
#   each with a network connector to the other (scripts/activemq/network-*.xml). Dirs
#   amq-network/{a,b}.
# - up-pg-standby: a hot standby on BRP_DEV_PG_STANDBY_PORT (55433), copied with pg_basebackup
#   from BRP_DEV_PG_REPLICATION_ADDR (default the primary, 127.0.0.1:BRP_DEV_PG_PORT; a proxy in
#   between lets a test cut replication) and streaming from there. BRP_DEV_PG_SYNC=on (the
#   default) makes the primary wait for it at every commit (synchronous_standby_names = '*',
#   in the primary's brp-replication.conf); off: asynchronous. Dir pg-standby.
#
# RabbitMQ (Debian rabbitmq-server with rabbitmq_stomp) runs only after up-rabbitmq; status and
# env mention it only while it runs (env then adds BRP_RABBITMQ_STOMP_ADDR/LOGIN/PASSCODE/HOST).
# Everything is on 127.0.0.1 and off RabbitMQ's default ports, so a system RabbitMQ can run too:
# STOMP BRP_DEV_RABBIT_STOMP_PORT (default 61614), no AMQP listener, Erlang distribution
# BRP_DEV_RABBIT_DIST_PORT (default 25673), epmd BRP_DEV_RABBIT_EPMD_PORT (default 4371), node
# brp-dev@localhost, user brp/brp, vhost /. Its configuration is versioned in scripts/rabbitmq/.
# Progress goes to stderr; only `env` and `status` write to stdout.
set -euo pipefail

SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
REPO_DIR=$(dirname -- "$SCRIPT_DIR")
RUN_DIR=${BRP_RUN_DIR:-$REPO_DIR/.run}
case $RUN_DIR in
  /*) ;;
  *) RUN_DIR=$PWD/$RUN_DIR ;;
esac
PRIMARY_PG_PORT=${BRP_DEV_PG_PORT:-55432}
STOMP_PORT=${BRP_DEV_STOMP_PORT:-61613}
OPENWIRE_PORT=${BRP_DEV_OPENWIRE_PORT:-}
PG_DB=brp
PG_USER=postgres

# pg_instance points the pg_* functions at one server: the primary (dir pg) or the standby.
pg_instance() { # dir port
  PG_BASE=$RUN_DIR/$1
  PG_DATA=$PG_BASE/data
  PG_SOCK=$PG_BASE/socket
  PG_LOGDIR=$PG_BASE/log
  PG_LOG=$PG_LOGDIR/postgres.log
  PG_PORT=$2
}
pg_instance pg "$PRIMARY_PG_PORT"
STANDBY_PG_PORT=${BRP_DEV_PG_STANDBY_PORT:-55433}
REPLICATION_ADDR=${BRP_DEV_PG_REPLICATION_ADDR:-127.0.0.1:$PRIMARY_PG_PORT}
PG_SYNC=${BRP_DEV_PG_SYNC:-on}

AMQ_HOME=${BRP_ACTIVEMQ_HOME:-/usr/share/activemq}
AMQ_JAR=$AMQ_HOME/bin/activemq.jar

# amq_instance points the amq_* functions at one broker: the default one (dir activemq), or a
# node of the master/slave pair or of the network of brokers.
amq_instance() { # dir stomp-port [kahadb-dir [broker-name [openwire-port peer-openwire-port]]]
  AMQ_BASE=$RUN_DIR/$1
  AMQ_CONF=$AMQ_BASE/conf
  AMQ_DATA=$AMQ_BASE/data
  AMQ_TMP=$AMQ_BASE/tmp
  AMQ_PIDFILE=$AMQ_BASE/activemq.pid
  AMQ_LOG=$AMQ_DATA/activemq.log
  AMQ_OUT=$AMQ_DATA/console.log
  AMQ_PORT=$2
  AMQ_KAHADB=${3:-$AMQ_DATA/kahadb}
  AMQ_NAME=${4:-brp-dev}
  AMQ_OPENWIRE_PORT=${5:-}
  AMQ_PEER_PORT=${6:-}
}
amq_instance activemq "$STOMP_PORT" "" "" "$OPENWIRE_PORT"

PAIR_PORT_A=${BRP_DEV_PAIR_STOMP_PORT_A:-61631}
PAIR_PORT_B=${BRP_DEV_PAIR_STOMP_PORT_B:-61632}
NET_PORT_A=${BRP_DEV_NET_STOMP_PORT_A:-61641}
NET_PORT_B=${BRP_DEV_NET_STOMP_PORT_B:-61642}
NET_OPENWIRE_A=${BRP_DEV_NET_OPENWIRE_PORT_A:-61643}
NET_OPENWIRE_B=${BRP_DEV_NET_OPENWIRE_PORT_B:-61644}

# Node a or b of the master/slave pair: one broker name and one store.
pair_node() { # a|b
  local port=$PAIR_PORT_A
  [[ $1 == b ]] && port=$PAIR_PORT_B
  amq_instance "amq-pair/$1" "$port" "$RUN_DIR/amq-pair/shared/kahadb" brp-pair
}

# Node a or b of the network of brokers: a store of its own, a bridge to the other.
net_node() { # a|b
  if [[ $1 == a ]]; then
    amq_instance amq-network/a "$NET_PORT_A" "" brp-net-a "$NET_OPENWIRE_A" "$NET_OPENWIRE_B"
  else
    amq_instance amq-network/b "$NET_PORT_B" "" brp-net-b "$NET_OPENWIRE_B" "$NET_OPENWIRE_A"
  fi
}

PG_WAIT_SECONDS=30
AMQ_WAIT_SECONDS=60
AMQ_STOP_SECONDS=15

RMQ_BIN=${BRP_RABBITMQ_BIN:-/usr/lib/rabbitmq/bin}
RMQ_STOMP_PORT=${BRP_DEV_RABBIT_STOMP_PORT:-61614}
RMQ_DIST_PORT=${BRP_DEV_RABBIT_DIST_PORT:-25673}
RMQ_EPMD_PORT=${BRP_DEV_RABBIT_EPMD_PORT:-4371}
RMQ_NODE=brp-dev@localhost
RMQ_USER=brp
RMQ_PASS=brp
RMQ_VHOST=/
RMQ_BASE=$RUN_DIR/rabbitmq
RMQ_CONF=$RMQ_BASE/conf
RMQ_MNESIA=$RMQ_BASE/mnesia
RMQ_LOGDIR=$RMQ_BASE/log
RMQ_LOG=$RMQ_LOGDIR/rabbit.log
RMQ_OUT=$RMQ_LOGDIR/console.log
RMQ_PIDFILE=$RMQ_BASE/rabbitmq.pid
RMQ_WAIT_SECONDS=90
RMQ_STOP_SECONDS=30

log() { printf 'services: %s\n' "$*" >&2; }

show_tail() { # file [lines]
  if [[ -s $1 ]]; then
    printf -- '----- last lines of %s -----\n' "$1" >&2
    tail -n "${2:-30}" -- "$1" >&2 || true
    printf -- '-----\n' >&2
  fi
}

die() { log "ERROR: $*"; exit 1; }

is_root() { [[ $(id -u) -eq 0 ]]; }

database_url() { printf 'postgres://%s@127.0.0.1:%s/%s?sslmode=disable' "$PG_USER" "$PG_PORT" "$PG_DB"; }

# True if something accepts TCP connections on 127.0.0.1:$1.
port_open() {
  # shellcheck disable=SC2016 # $1 expands in the inner bash
  timeout 2 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1"' _ "$1" 2>/dev/null
}

# Holds an exclusive lock (fd 9) so that concurrent up/down/restart calls do not race.
# Long-lived children must be started with 9>&- or they would keep holding it.
take_lock() {
  mkdir -p -- "$RUN_DIR"
  exec 9>>"$RUN_DIR/.services.lock"
  flock -w 300 9 || die "another services.sh is still busy on $RUN_DIR (lock $RUN_DIR/.services.lock)"
}

# ---------------------------------------------------------------- installation

pg_bindir() {
  local d best=""
  while IFS= read -r d; do
    [[ -x $d/initdb && -x $d/pg_ctl && -x $d/postgres ]] && best=$d
  done < <(printf '%s\n' /usr/lib/postgresql/*/bin | sort -V)
  [[ -n $best ]] && printf '%s\n' "$best"
}

# True if the RabbitMQ server scripts and its STOMP plugin are installed.
rmq_installed() {
  local home
  [[ -x $RMQ_BIN/rabbitmq-server ]] || return 1
  home=$(dirname -- "$(readlink -f -- "$RMQ_BIN/rabbitmq-server")")/..
  compgen -G "$home/plugins/rabbitmq_stomp-*" >/dev/null
}

ensure_installed() { # components: pg amq rmq
  local want pkgs=()
  for want in "$@"; do
    case $want in
      pg) pg_bindir >/dev/null || pkgs+=(postgresql) ;;
      amq)
        [[ -f $AMQ_JAR ]] || pkgs+=(activemq)
        command -v java >/dev/null 2>&1 || pkgs+=(default-jre-headless)
        # Optional for the broker, but the STOMP `transformation: jms-map-json`
        # header (needed to read statisticsBrokerPlugin replies) fails without them.
        [[ -f /usr/share/java/xstream.jar ]] || pkgs+=(libxstream-java)
        [[ -f /usr/share/java/jettison.jar ]] || pkgs+=(libjettison-java)
        ;;
      rmq) rmq_installed || pkgs+=(rabbitmq-server) ;;
    esac
  done
  ((${#pkgs[@]} == 0)) && return 0
  if ! is_root; then
    die "missing ${pkgs[*]}; install as root: apt-get install -y --no-install-recommends ${pkgs[*]}"
  fi
  command -v apt-get >/dev/null 2>&1 || die "missing ${pkgs[*]} and no apt-get to install them"
  mkdir -p -- "$RUN_DIR"
  local apt_log=$RUN_DIR/apt.log t0=$SECONDS
  log "installing ${pkgs[*]} with apt-get (log: $apt_log)"
  export DEBIAN_FRONTEND=noninteractive
  # Another apt-get may hold the dpkg lock (another checkout's services.sh, a developer): wait.
  if ! apt-get -o DPkg::Lock::Timeout=300 update >"$apt_log" 2>&1; then
    show_tail "$apt_log"
    die "apt-get update failed"
  fi
  if ! apt-get install -y --no-install-recommends -o DPkg::Lock::Timeout=300 \
      -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
      "${pkgs[@]}" >>"$apt_log" 2>&1; then
    show_tail "$apt_log"
    die "apt-get install ${pkgs[*]} failed"
  fi
  log "installed ${pkgs[*]} in $((SECONDS - t0)) s"
  for want in "$@"; do
    case $want in
      pg) pg_bindir >/dev/null || die "postgresql installed but no initdb/pg_ctl under /usr/lib/postgresql/*/bin" ;;
      amq)
        [[ -f $AMQ_JAR ]] || die "activemq installed but $AMQ_JAR is missing"
        command -v java >/dev/null 2>&1 || die "no java on PATH after installing a JRE"
        ;;
      rmq) rmq_installed || die "rabbitmq-server installed but $RMQ_BIN/rabbitmq-server or its rabbitmq_stomp plugin is missing" ;;
    esac
  done
}

# ---------------------------------------------------------------- PostgreSQL

PG_BIN=""

pg_setup_bin() {
  [[ -n $PG_BIN ]] && return 0
  PG_BIN=$(pg_bindir) || die "PostgreSQL binaries not found under /usr/lib/postgresql/*/bin"
}

# Runs a command as the postgres OS user (initdb and postgres refuse root).
# Without root, PostgreSQL simply runs as the calling user.
as_pg() {
  if is_root; then
    runuser -u "$PG_USER" -- "$@"
  else
    "$@"
  fi
}

pg_running() {
  [[ -f $PG_DATA/PG_VERSION ]] || return 1
  pg_setup_bin
  as_pg "$PG_BIN/pg_ctl" status -D "$PG_DATA" >/dev/null 2>&1
}

pg_ready() {
  pg_setup_bin
  "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT" -U "$PG_USER" -d postgres >/dev/null 2>&1
}

# The postgres user must be able to reach $PG_BASE: every parent directory needs o+x.
pg_fix_parents() {
  is_root || return 0
  id -u "$PG_USER" >/dev/null 2>&1 || die "OS user $PG_USER does not exist (is the postgresql package installed?)"
  local d=$PG_BASE
  while [[ $d != / ]]; do
    d=$(dirname -- "$d")
    if ! runuser -u "$PG_USER" -- test -x "$d" 2>/dev/null; then
      log "chmod o+x $d (so that $PG_USER can reach $PG_BASE)"
      chmod o+x -- "$d"
    fi
  done
}

pg_prepare() {
  pg_setup_bin
  mkdir -p -- "$PG_BASE" "$PG_DATA" "$PG_SOCK" "$PG_LOGDIR"
  if is_root; then
    chown "$PG_USER:$PG_USER" -- "$PG_BASE" "$PG_DATA" "$PG_SOCK" "$PG_LOGDIR"
    pg_fix_parents
  fi
  chmod 700 -- "$PG_DATA"
  if [[ ! -f $PG_DATA/PG_VERSION ]]; then
    if [[ -n $(ls -A -- "$PG_DATA") ]]; then
      die "$PG_DATA is not empty but holds no cluster (no PG_VERSION); remove it and retry"
    fi
    log "postgres: initdb $PG_DATA"
    if ! as_pg "$PG_BIN/initdb" -D "$PG_DATA" --auth=trust -U "$PG_USER" -E UTF8 --locale=C \
        >"$PG_LOGDIR/initdb.log" 2>&1; then
      show_tail "$PG_LOGDIR/initdb.log"
      die "initdb failed"
    fi
    printf '\n# Settings of scripts/services.sh (rewritten on every start).\ninclude_if_exists = %s\n' \
      "'brp-dev.conf'" | as_pg tee -a "$PG_DATA/postgresql.conf" >/dev/null
  fi
  # Rewritten on every start so that a changed BRP_DEV_PG_PORT takes effect.
  as_pg tee "$PG_DATA/brp-dev.conf" >/dev/null <<EOF
# Written by scripts/services.sh; changes are overwritten.
listen_addresses = '127.0.0.1'
port = $PG_PORT
unix_socket_directories = '$PG_SOCK'
max_connections = 200
fsync = on
# up-pg-standby writes synchronous replication here (primary only); down-pg-standby removes it.
include_if_exists = 'brp-replication.conf'
EOF
}

pg_wait_ready() {
  local deadline=$((SECONDS + PG_WAIT_SECONDS))
  until pg_ready; do
    if ((SECONDS >= deadline)); then
      show_tail "$PG_LOG"
      die "postgres does not answer on 127.0.0.1:$PG_PORT after ${PG_WAIT_SECONDS} s"
    fi
    if ! pg_running; then
      show_tail "$PG_LOG"
      die "postgres is not running (see $PG_LOG)"
    fi
    sleep 0.2
  done
}

pg_ensure_db() {
  local exists
  exists=$("$PG_BIN/psql" -X -q -At -h 127.0.0.1 -p "$PG_PORT" -U "$PG_USER" -d postgres \
    -c "SELECT 1 FROM pg_database WHERE datname = '$PG_DB'") || die "psql could not query postgres on port $PG_PORT"
  if [[ $exists != 1 ]]; then
    log "postgres: createdb $PG_DB"
    "$PG_BIN/createdb" -h 127.0.0.1 -p "$PG_PORT" -U "$PG_USER" -O "$PG_USER" "$PG_DB" \
      || die "createdb $PG_DB failed"
  fi
}

pg_start() {
  pg_setup_bin
  if pg_running; then
    log "postgres: already running on 127.0.0.1:$PG_PORT"
  else
    if port_open "$PG_PORT"; then
      die "port 127.0.0.1:$PG_PORT is taken by another process; stop it or set BRP_DEV_PG_PORT"
    fi
    pg_prepare
    log "postgres: starting on 127.0.0.1:$PG_PORT (log: $PG_LOG)"
    # The port lies in Linux's ephemeral range (32768-60999): a closed outgoing connection
    # that happened to use it as its local port holds it in TIME_WAIT for up to 60 s, and
    # postgres cannot bind it meanwhile. Wait that out instead of failing.
    local deadline=$((SECONDS + 75)) from
    while :; do
      from=$(stat -c %s "$PG_LOG" 2>/dev/null || echo 0)
      if as_pg "$PG_BIN/pg_ctl" start -D "$PG_DATA" -l "$PG_LOG" -w -t "$PG_WAIT_SECONDS" -s \
          </dev/null >/dev/null 2>&1 9>&-; then
        break
      fi
      if ((SECONDS < deadline)) && tail -c +"$((from + 1))" "$PG_LOG" 2>/dev/null | grep -q 'Address already in use'; then
        log "postgres: port $PG_PORT is still held by a closed connection (TIME_WAIT); retrying"
        sleep 2
        continue
      fi
      show_tail "$PG_LOG"
      die "postgres did not start"
    done
  fi
  pg_wait_ready
  pg_ensure_db
  log "postgres: ready, $(database_url)"
}

pg_stop() {
  if ! pg_running; then
    log "postgres: not running"
    return 0
  fi
  log "postgres: stopping"
  if ! as_pg "$PG_BIN/pg_ctl" stop -D "$PG_DATA" -m fast -w -t 60 -s >/dev/null 2>&1; then
    log "postgres: fast shutdown timed out, using immediate"
    as_pg "$PG_BIN/pg_ctl" stop -D "$PG_DATA" -m immediate -w -t 30 -s >/dev/null 2>&1 || {
      show_tail "$PG_LOG"
      die "postgres did not stop"
    }
  fi
  log "postgres: stopped"
}

# Sets the primary's synchronous_standby_names ('*' or '': asynchronous) in
# brp-replication.conf, or removes that file (none), and reloads it if it runs.
pg_primary_sync() { # '*' | '' | none
  pg_instance pg "$PRIMARY_PG_PORT"
  pg_setup_bin
  if [[ $1 == none ]]; then
    rm -f -- "$PG_DATA/brp-replication.conf"
  else
    printf "# Written by scripts/services.sh up-pg-standby.\nsynchronous_standby_names = '%s'\n" "$1" \
      | as_pg tee "$PG_DATA/brp-replication.conf" >/dev/null
  fi
  if pg_running; then
    as_pg "$PG_BIN/pg_ctl" reload -D "$PG_DATA" -s >/dev/null || die "postgres: reload failed"
  fi
}

# Starts the standby: a copy of the primary taken with pg_basebackup (through
# REPLICATION_ADDR), streaming from there; then tells the primary whether to wait for it.
pg_standby_start() {
  local sync='*'
  case $PG_SYNC in
    on) ;;
    off) sync='' ;;
    *) die "BRP_DEV_PG_SYNC=$PG_SYNC: expected on or off" ;;
  esac
  pg_instance pg-standby "$STANDBY_PG_PORT"
  pg_setup_bin
  if ! pg_running && [[ ! -f $PG_DATA/PG_VERSION ]]; then
    mkdir -p -- "$PG_BASE" "$PG_DATA"
    if is_root; then chown "$PG_USER:$PG_USER" -- "$PG_BASE" "$PG_DATA"; fi
    chmod 700 -- "$PG_DATA"
    log "postgres standby: pg_basebackup from $REPLICATION_ADDR"
    if ! as_pg "$PG_BIN/pg_basebackup" -h "${REPLICATION_ADDR%:*}" -p "${REPLICATION_ADDR##*:}" -U "$PG_USER" \
        -D "$PG_DATA" -R -X stream -c fast >"$PG_BASE/basebackup.log" 2>&1; then
      show_tail "$PG_BASE/basebackup.log"
      die "pg_basebackup failed (is the primary running?)"
    fi
    rm -f -- "$PG_DATA/brp-replication.conf" "$PG_DATA/postmaster.pid"
  fi
  pg_start
  pg_primary_sync "$sync"
  log "postgres standby: streaming from $REPLICATION_ADDR, synchronous $PG_SYNC"
}

pg_standby_stop() {
  pg_instance pg-standby "$STANDBY_PG_PORT"
  if [[ -d $PG_BASE ]]; then
    pg_setup_bin
    pg_stop
    rm -rf -- "$PG_BASE"
  fi
  # The primary must not wait for a standby that is gone.
  if [[ -f $RUN_DIR/pg/data/brp-replication.conf ]]; then
    pg_primary_sync none
  fi
  pg_instance pg "$PRIMARY_PG_PORT"
}

# ---------------------------------------------------------------- ActiveMQ

# True if $1 is a live process of this run dir's broker.
amq_is_ours() {
  [[ $1 =~ ^[0-9]+$ ]] || return 1
  local cmdline
  cmdline=$(tr '\0' '\n' 2>/dev/null <"/proc/$1/cmdline") || return 1
  grep -qxF -- "-Dactivemq.base=$AMQ_BASE" <<<"$cmdline"
}

# Prints the broker's pid if it runs: from the pid file, else by looking for
# a java process started on this base directory (a lost or stale pid file).
amq_pid() {
  local pid f
  if [[ -f $AMQ_PIDFILE ]]; then
    pid=$(<"$AMQ_PIDFILE")
    if amq_is_ours "$pid"; then
      printf '%s\n' "$pid"
      return 0
    fi
  fi
  for f in /proc/[0-9]*; do
    pid=${f#/proc/}
    if [[ $pid != "$$" ]] && amq_is_ours "$pid"; then
      printf '%s\n' "$pid"
      return 0
    fi
  done
  return 1
}

# True if 127.0.0.1:PORT (default $STOMP_PORT) answers a STOMP CONNECT with CONNECTED.
# RabbitMQ takes the host header as its virtual host and wants a login: pass them.
stomp_ping() { # [port [host [login passcode]]]
  # shellcheck disable=SC2016 # $1.. and $line expand in the inner bash
  timeout 5 bash -c '
    exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
    if [[ -n $3 ]]; then
      printf "CONNECT\naccept-version:1.2\nhost:%s\nlogin:%s\npasscode:%s\n\n\0" "$2" "$3" "$4" >&3
    else
      printf "CONNECT\naccept-version:1.2\nhost:%s\n\n\0" "$2" >&3
    fi
    IFS= read -r -t 4 line <&3 || exit 1
    [[ $line == CONNECTED* ]] || exit 1
    printf "DISCONNECT\n\n\0" >&3
  ' _ "${1:-$STOMP_PORT}" "${2:-localhost}" "${3:-}" "${4:-}" 2>/dev/null
}

# True while process $1 runs: it exists and is not a zombie (an exited child of this shell
# stays one until it is reaped).
alive() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [[ ${stat:0:1} != Z ]]
}

# Waits until the check (a command) succeeds for the broker started as pid: what says what
# is awaited. A broker just started is not java yet for a moment (its subshell execs setsid,
# which execs java): amq_is_ours would call it gone, and did on a busy machine ("exited during
# startup" with an empty console log), so only its exit counts.
amq_wait() { # pid what check...
  local pid=$1 what=$2 deadline=$((SECONDS + AMQ_WAIT_SECONDS))
  shift 2
  until "$@"; do
    if ! alive "$pid"; then
      show_tail "$AMQ_OUT"
      show_tail "$AMQ_LOG"
      die "activemq exited during startup (logs: $AMQ_OUT, $AMQ_LOG)"
    fi
    if ((SECONDS >= deadline)); then
      show_tail "$AMQ_OUT"
      show_tail "$AMQ_LOG"
      die "activemq ($AMQ_BASE) still not $what after ${AMQ_WAIT_SECONDS} s"
    fi
    sleep 0.2
  done
}

# Waits for the broker's STOMP port.
amq_wait_ready() { # pid
  amq_wait "$1" "answering STOMP on 127.0.0.1:$AMQ_PORT" stomp_ping "$AMQ_PORT"
}

# True if the broker's log, from byte offset from on, has a line matching pattern.
amq_logged() { # from pattern
  tail -c +"$(($1 + 1))" "$AMQ_LOG" 2>/dev/null | grep -q -- "$2"
}

# Writes the broker configuration: scripts/activemq/activemq.xml, with the network connector
# and the OpenWire listener for it inserted when the broker has a peer, or only the OpenWire
# listener when it has an OpenWire port (BRP_DEV_OPENWIRE_PORT).
amq_write_conf() {
  if [[ -n $AMQ_PEER_PORT ]]; then
    # Advisories tell a bridge about the peer's consumers; a queue's duplicate audit would
    # drop the messages a bridge sends back (replayWhenNoConsumers).
    sed -e "/<!-- brp:network-connectors -->/r $SCRIPT_DIR/activemq/network-connectors.xml" \
      -e "/<!-- brp:network-openwire -->/r $SCRIPT_DIR/activemq/network-openwire.xml" \
      -e 's/advisorySupport="false"/advisorySupport="true"/' -e 's/enableAudit="true"/enableAudit="false"/' \
      -- "$SCRIPT_DIR/activemq/activemq.xml" >"$AMQ_CONF/activemq.xml"
  elif [[ -n $AMQ_OPENWIRE_PORT ]]; then
    sed -e "/<!-- brp:network-openwire -->/r $SCRIPT_DIR/activemq/network-openwire.xml" \
      -- "$SCRIPT_DIR/activemq/activemq.xml" >"$AMQ_CONF/activemq.xml"
  else
    cp -- "$SCRIPT_DIR/activemq/activemq.xml" "$AMQ_CONF/"
  fi
  cp -- "$SCRIPT_DIR/activemq/log4j.properties" "$AMQ_CONF/"
}

# Starts the broker of amq_instance and waits until it answers STOMP or, as the slave of a
# master/slave pair, until it waits for its master's store lock.
amq_start() { # [slave]
  local pid java from port role=${1:-}
  AMQ_STARTED_FROM=0 # where this start's lines begin in $AMQ_LOG
  if pid=$(amq_pid); then
    log "activemq: already running (pid $pid, $AMQ_BASE)"
    printf '%s\n' "$pid" >"$AMQ_PIDFILE"
    [[ $role == slave ]] && return 0
    amq_wait_ready "$pid"
    log "activemq: ready, stomp 127.0.0.1:$AMQ_PORT"
    return 0
  fi
  for port in "$AMQ_PORT" ${AMQ_OPENWIRE_PORT:+"$AMQ_OPENWIRE_PORT"}; do
    if port_open "$port"; then
      die "port 127.0.0.1:$port is taken by another process; stop it or choose another port (see the header of $0)"
    fi
  done
  java=$(command -v java) || die "java not found"
  mkdir -p -- "$AMQ_CONF" "$AMQ_DATA" "$AMQ_TMP" "$AMQ_BASE/lib"
  # The configuration is versioned in scripts/activemq/ and copied on every start.
  amq_write_conf
  # $AMQ_BASE/lib is on the broker's extension classpath: add XStream and Jettison
  # (the Debian package leaves them out) for STOMP's jms-map-json/jms-map-xml.
  local jar
  for jar in xstream jettison; do
    if [[ -f /usr/share/java/$jar.jar ]]; then
      ln -sfn -- "/usr/share/java/$jar.jar" "$AMQ_BASE/lib/$jar.jar"
    fi
  done
  local -a opts=(
    -Xms64m -Xmx512m
    -Djava.awt.headless=true
    -Djava.io.tmpdir="$AMQ_TMP"
    -Dactivemq.home="$AMQ_HOME"
    -Dactivemq.base="$AMQ_BASE"
    -Dactivemq.conf="$AMQ_CONF"
    -Dactivemq.data="$AMQ_DATA"
    -Dactivemq.classpath="$AMQ_CONF"
    -Dlog4j.configuration="file:$AMQ_CONF/log4j.properties"
    -Dbrp.stomp.port="$AMQ_PORT"
    -Dbrp.kahadb.dir="$AMQ_KAHADB"
    -Dbrp.broker.name="$AMQ_NAME"
    --add-opens=java.base/java.lang=ALL-UNNAMED
    --add-opens=java.base/java.util=ALL-UNNAMED
    --add-opens=java.base/java.util.concurrent=ALL-UNNAMED
    --add-opens=java.base/java.io=ALL-UNNAMED
    --add-opens=java.base/java.net=ALL-UNNAMED
    --add-opens=java.base/sun.nio.ch=ALL-UNNAMED
    --add-opens=java.naming/javax.naming=ALL-UNNAMED
    --add-opens=java.rmi/sun.rmi.transport.tcp=ALL-UNNAMED
  )
  if [[ -n $AMQ_OPENWIRE_PORT ]]; then
    opts+=(-Dbrp.openwire.port="$AMQ_OPENWIRE_PORT")
  fi
  if [[ -n $AMQ_PEER_PORT ]]; then
    opts+=(-Dbrp.peer.openwire.port="$AMQ_PEER_PORT")
  fi
  log "activemq: starting $AMQ_NAME, stomp 127.0.0.1:$AMQ_PORT${AMQ_OPENWIRE_PORT:+, openwire 127.0.0.1:$AMQ_OPENWIRE_PORT}${role:+ as $role} (log: $AMQ_LOG)"
  printf '\n===== %s services.sh start =====\n' "$(date -Is)" >>"$AMQ_OUT"
  from=$(stat -c %s "$AMQ_LOG" 2>/dev/null || echo 0)
  # setsid: own session, so that the caller's Ctrl-C or process group kill does not reach it.
  (cd -- "$AMQ_BASE" && exec setsid "$java" "${opts[@]}" -jar "$AMQ_JAR" start \
    "xbean:file:$AMQ_CONF/activemq.xml") </dev/null >>"$AMQ_OUT" 2>&1 9>&- &
  pid=$!
  printf '%s\n' "$pid" >"$AMQ_PIDFILE"
  if [[ $role == slave ]]; then
    amq_wait "$pid" "waiting for the store lock" amq_logged "$from" 'is locked by another server'
    log "activemq: slave (pid $pid) waits for the store lock; stomp 127.0.0.1:$AMQ_PORT opens when the master is gone"
    return 0
  fi
  amq_wait_ready "$pid"
  log "activemq: ready (pid $pid), stomp 127.0.0.1:$AMQ_PORT"
  AMQ_STARTED_FROM=$from
}

# Starts the master/slave pair: the master first, then the slave, which waits for its lock.
amq_pair_up() {
  pair_node a
  amq_start
  pair_node b
  amq_start slave
}

# Starts both brokers of the network and waits until each one's bridge to the other is up.
amq_network_up() {
  local from_a from_b
  net_node a
  amq_start
  from_a=$AMQ_STARTED_FROM
  net_node b
  amq_start
  from_b=$AMQ_STARTED_FROM
  net_node a
  amq_wait "$(amq_pid)" "bridged to b" amq_logged "$from_a" 'Network connection between .* has been established'
  net_node b
  amq_wait "$(amq_pid)" "bridged to a" amq_logged "$from_b" 'Network connection between .* has been established'
  log "activemq network: bridges a -> b and b -> a established"
}

amq_stop() {
  local pid deadline
  if ! pid=$(amq_pid); then
    [[ ${1:-} == quiet ]] || log "activemq: not running"
    rm -f -- "$AMQ_PIDFILE"
    return 0
  fi
  log "activemq: stopping (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  deadline=$((SECONDS + AMQ_STOP_SECONDS))
  while amq_is_ours "$pid" && ((SECONDS < deadline)); do
    sleep 0.2
  done
  if amq_is_ours "$pid"; then
    log "activemq: still running after ${AMQ_STOP_SECONDS} s, sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    deadline=$((SECONDS + 10))
    while amq_is_ours "$pid" && ((SECONDS < deadline)); do
      sleep 0.2
    done
    amq_is_ours "$pid" && die "activemq (pid $pid) does not die"
  fi
  rm -f -- "$AMQ_PIDFILE"
  log "activemq: stopped"
}

# ---------------------------------------------------------------- RabbitMQ (optional)

# Every process of this run dir's node (the rabbitmq-server launcher script, the Erlang VM,
# its epmd) carries BRP_RABBITMQ_BASE=$RMQ_BASE in its environment: that is how they are found.
rmq_marker() { printf 'BRP_RABBITMQ_BASE=%s' "$RMQ_BASE"; }

# True if $1 is a live process of this run dir's RabbitMQ whose command name is one of $2...
rmq_is_ours() { # pid comm...
  local pid=$1 comm want
  shift
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  IFS= read -r comm 2>/dev/null <"/proc/$pid/comm" || return 1
  for want in "$@"; do
    if [[ $comm == "$want" ]]; then
      tr '\0' '\n' 2>/dev/null <"/proc/$pid/environ" | grep -qxF -- "$(rmq_marker)"
      return
    fi
  done
  return 1
}

# Prints the pids of this run dir's processes with one of the given command names.
rmq_pids() { # comm...
  local f
  for f in /proc/[0-9]*; do
    rmq_is_ours "${f#/proc/}" "$@" && printf '%s\n' "${f#/proc/}"
  done
  return 0
}

# Prints the Erlang VM's pid if the node runs (pid file written by RabbitMQ, else a scan).
rmq_pid() {
  local pid
  if [[ -f $RMQ_PIDFILE ]]; then
    pid=$(<"$RMQ_PIDFILE")
    if rmq_is_ours "$pid" beam.smp; then
      printf '%s\n' "$pid"
      return 0
    fi
  fi
  pid=$(rmq_pids beam.smp | head -n 1)
  [[ -n $pid ]] && printf '%s\n' "$pid"
}

rmq_ping() { stomp_ping "$RMQ_STOMP_PORT" "$RMQ_VHOST" "$RMQ_USER" "$RMQ_PASS"; }

rmq_wait_ready() { # launcher pid (empty if not started by this call)
  local launcher=$1 deadline=$((SECONDS + RMQ_WAIT_SECONDS))
  until rmq_ping; do
    if ! rmq_pid >/dev/null && ! rmq_is_ours "$launcher" rabbitmq-server; then
      show_tail "$RMQ_OUT"
      show_tail "$RMQ_LOG"
      die "rabbitmq exited during startup (logs: $RMQ_OUT, $RMQ_LOG)"
    fi
    if ((SECONDS >= deadline)); then
      show_tail "$RMQ_OUT"
      show_tail "$RMQ_LOG"
      die "rabbitmq does not answer STOMP on 127.0.0.1:$RMQ_STOMP_PORT after ${RMQ_WAIT_SECONDS} s"
    fi
    sleep 0.2
  done
}

rmq_start() {
  local pid port t0=$SECONDS
  if pid=$(rmq_pid); then
    log "rabbitmq: already running (pid $pid)"
    rmq_wait_ready ""
    log "rabbitmq: ready, stomp 127.0.0.1:$RMQ_STOMP_PORT"
    return 0
  fi
  for port in "$RMQ_STOMP_PORT" "$RMQ_DIST_PORT"; do
    if port_open "$port"; then
      die "port 127.0.0.1:$port is taken by another process; stop it or set BRP_DEV_RABBIT_STOMP_PORT / BRP_DEV_RABBIT_DIST_PORT"
    fi
  done
  # An epmd on our port is fine if it is ours (left from an earlier run); another one is not.
  if port_open "$RMQ_EPMD_PORT" && [[ -z $(rmq_pids epmd) ]]; then
    die "port 127.0.0.1:$RMQ_EPMD_PORT (epmd) is taken by another process; stop it or set BRP_DEV_RABBIT_EPMD_PORT"
  fi
  mkdir -p -- "$RMQ_CONF" "$RMQ_MNESIA" "$RMQ_LOGDIR"
  # The configuration is versioned in scripts/rabbitmq/ and rewritten on every start.
  sed -e "s/@STOMP_PORT@/$RMQ_STOMP_PORT/g" -e "s/@USER@/$RMQ_USER/g" -e "s/@PASS@/$RMQ_PASS/g" \
    -- "$SCRIPT_DIR/rabbitmq/rabbitmq.conf" >"$RMQ_CONF/rabbitmq.conf"
  printf '[rabbitmq_stomp].\n' >"$RMQ_CONF/enabled_plugins"
  # Read instead of /etc/rabbitmq/rabbitmq-env.conf, so that a system setup does not leak in.
  printf '# Written by scripts/services.sh: the project node reads no rabbitmq-env.conf.\n' \
    >"$RMQ_CONF/rabbitmq-env.conf"
  # The Erlang cookie goes to $HOME/.erlang.cookie: HOME is the run dir, not the caller's.
  # rabbitmqctl reaches this node with the same cookie and epmd (not /usr/sbin/rabbitmqctl,
  # which switches to the rabbitmq user and its HOME), for example:
  #   HOME=.run/rabbitmq RABBITMQ_NODENAME=brp-dev@localhost ERL_EPMD_PORT=4371 \
  #     /usr/lib/rabbitmq/bin/rabbitmqctl list_queues name messages
  log "rabbitmq: starting, stomp 127.0.0.1:$RMQ_STOMP_PORT (log: $RMQ_LOG)"
  printf '\n===== %s services.sh start =====\n' "$(date -Is)" >>"$RMQ_OUT"
  (
    cd -- "$RMQ_BASE"
    export "$(rmq_marker)"
    export HOME=$RMQ_BASE
    export RABBITMQ_NODENAME=$RMQ_NODE
    export RABBITMQ_CONF_ENV_FILE=$RMQ_CONF/rabbitmq-env.conf
    export RABBITMQ_CONFIG_FILE=$RMQ_CONF/rabbitmq.conf
    export RABBITMQ_ADVANCED_CONFIG_FILE=$RMQ_CONF/advanced.config
    export RABBITMQ_ENABLED_PLUGINS_FILE=$RMQ_CONF/enabled_plugins
    export RABBITMQ_ENABLED_PLUGINS=rabbitmq_stomp
    export RABBITMQ_MNESIA_BASE=$RMQ_MNESIA
    export RABBITMQ_LOG_BASE=$RMQ_LOGDIR
    export RABBITMQ_LOGS=$RMQ_LOG
    export RABBITMQ_PID_FILE=$RMQ_PIDFILE
    export RABBITMQ_DIST_PORT=$RMQ_DIST_PORT
    export ERL_EPMD_PORT=$RMQ_EPMD_PORT
    export ERL_EPMD_ADDRESS=127.0.0.1
    # The distribution listener on loopback too (RABBITMQ_DIST_PORT only sets its port).
    export RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}"
    unset RABBITMQ_NODE_IP_ADDRESS RABBITMQ_NODE_PORT RABBITMQ_USE_LONGNAME
    # setsid: own session, so that the caller's Ctrl-C or process group kill does not reach it.
    exec setsid "$RMQ_BIN/rabbitmq-server"
  ) </dev/null >>"$RMQ_OUT" 2>&1 9>&- &
  pid=$!
  rmq_wait_ready "$pid"
  log "rabbitmq: ready (pid $(rmq_pid || echo "?")) in $((SECONDS - t0)) s, stomp 127.0.0.1:$RMQ_STOMP_PORT"
}

# Waits until none of this node's processes with the given command names is left.
rmq_wait_gone() { # seconds comm...
  local deadline=$((SECONDS + $1))
  shift
  while [[ -n $(rmq_pids "$@") ]] && ((SECONDS < deadline)); do
    sleep 0.2
  done
  [[ -z $(rmq_pids "$@") ]]
}

rmq_stop() { # [quiet]: say nothing if it does not run
  local pid
  local -a pids
  if ! pid=$(rmq_pid); then
    # The launcher script without a VM, or our epmd, may still be left.
    mapfile -t pids < <(rmq_pids rabbitmq-server epmd)
    if ((${#pids[@]})); then
      log "rabbitmq: stopping leftover processes ${pids[*]}"
      kill -TERM "${pids[@]}" 2>/dev/null || true
      rmq_wait_gone 10 rabbitmq-server epmd || true
    elif [[ ${1:-} != quiet ]]; then
      log "rabbitmq: not running"
    fi
    rm -f -- "$RMQ_PIDFILE"
    return 0
  fi
  log "rabbitmq: stopping (pid $pid)"
  # RabbitMQ shuts down cleanly on SIGTERM; the launcher script exits with it.
  kill -TERM "$pid" 2>/dev/null || true
  if ! rmq_wait_gone "$RMQ_STOP_SECONDS" beam.smp rabbitmq-server; then
    log "rabbitmq: still running after ${RMQ_STOP_SECONDS} s, sending SIGKILL"
    mapfile -t pids < <(rmq_pids beam.smp rabbitmq-server)
    ((${#pids[@]})) && kill -KILL "${pids[@]}" 2>/dev/null
    rmq_wait_gone 10 beam.smp rabbitmq-server || die "rabbitmq (pid $pid) does not die"
  fi
  # epmd outlives the node it was started for; this one serves only our port.
  mapfile -t pids < <(rmq_pids epmd)
  if ((${#pids[@]})); then
    kill -TERM "${pids[@]}" 2>/dev/null || true
    rmq_wait_gone 10 epmd || true
  fi
  rm -f -- "$RMQ_PIDFILE"
  log "rabbitmq: stopped"
}

# ---------------------------------------------------------------- commands

cmd_status() {
  local rc=0 pid
  if pg_bindir >/dev/null && pg_running; then
    if pg_ready; then
      printf 'postgres: running, ready on 127.0.0.1:%s (data %s)\n' "$PG_PORT" "$PG_DATA"
    else
      printf 'postgres: running but not answering on 127.0.0.1:%s\n' "$PG_PORT"
      rc=3
    fi
  else
    printf 'postgres: stopped\n'
    rc=3
  fi
  if pid=$(amq_pid); then
    if stomp_ping; then
      printf 'activemq: running (pid %s), ready, stomp 127.0.0.1:%s (data %s)\n' "$pid" "$STOMP_PORT" "$AMQ_DATA"
    else
      printf 'activemq: running (pid %s) but not answering STOMP on 127.0.0.1:%s\n' "$pid" "$STOMP_PORT"
      rc=3
    fi
  else
    printf 'activemq: stopped\n'
    rc=3
  fi
  # The high availability topologies are mentioned only while they run.
  local node
  for node in pair_node:a pair_node:b net_node:a net_node:b; do
    "${node%:*}" "${node#*:}"
    if pid=$(amq_pid); then
      if stomp_ping "$AMQ_PORT"; then
        printf 'activemq %s: running (pid %s), ready, stomp 127.0.0.1:%s\n' "${AMQ_BASE#"$RUN_DIR"/}" "$pid" "$AMQ_PORT"
      else
        printf 'activemq %s: running (pid %s), not answering STOMP on 127.0.0.1:%s (a slave waiting for the store lock?)\n' \
          "${AMQ_BASE#"$RUN_DIR"/}" "$pid" "$AMQ_PORT"
      fi
    fi
  done
  amq_instance activemq "$STOMP_PORT" "" "" "$OPENWIRE_PORT"
  pg_instance pg-standby "$STANDBY_PG_PORT"
  if [[ -f $PG_DATA/PG_VERSION ]] && pg_running; then
    printf 'postgres standby: running on 127.0.0.1:%s (data %s)\n' "$PG_PORT" "$PG_DATA"
  fi
  pg_instance pg "$PRIMARY_PG_PORT"
  # RabbitMQ is optional: mentioned only while it runs.
  if pid=$(rmq_pid); then
    if rmq_ping; then
      printf 'rabbitmq: running (pid %s), ready, stomp 127.0.0.1:%s (data %s)\n' "$pid" "$RMQ_STOMP_PORT" "$RMQ_MNESIA"
    else
      printf 'rabbitmq: running (pid %s) but not answering STOMP on 127.0.0.1:%s\n' "$pid" "$RMQ_STOMP_PORT"
      rc=3
    fi
  fi
  return "$rc"
}

cmd_env() {
  printf "export BRP_DATABASE_URL='%s'\n" "$(database_url)"
  printf "export BRP_STOMP_ADDR='127.0.0.1:%s'\n" "$STOMP_PORT"
  if rmq_pid >/dev/null; then
    printf "export BRP_RABBITMQ_STOMP_ADDR='127.0.0.1:%s'\n" "$RMQ_STOMP_PORT"
    printf "export BRP_RABBITMQ_STOMP_LOGIN='%s'\n" "$RMQ_USER"
    printf "export BRP_RABBITMQ_STOMP_PASSCODE='%s'\n" "$RMQ_PASS"
    printf "export BRP_RABBITMQ_STOMP_HOST='%s'\n" "$RMQ_VHOST"
  fi
  pair_node a
  if amq_pid >/dev/null; then
    printf "export BRP_AMQ_PAIR_STOMP_ADDR='127.0.0.1:%s,127.0.0.1:%s'\n" "$PAIR_PORT_A" "$PAIR_PORT_B"
  fi
  net_node a
  if amq_pid >/dev/null; then
    printf "export BRP_AMQ_NETWORK_STOMP_ADDR='127.0.0.1:%s,127.0.0.1:%s'\n" "$NET_PORT_A" "$NET_PORT_B"
  fi
}

# Stops the brokers of the pair (the slave first, so that it does not take over) or of the
# network.
amq_pair_down() {
  local node
  for node in b a; do
    pair_node "$node"
    amq_stop "$@"
  done
  amq_instance activemq "$STOMP_PORT"
}

amq_network_down() {
  local node
  for node in a b; do
    net_node "$node"
    amq_stop "$@"
  done
  amq_instance activemq "$STOMP_PORT"
}

usage() {
  sed -n '2,21p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
}

main() {
  local cmd=${1:-}
  local t0=$SECONDS
  case $cmd in
    up)
      take_lock
      ensure_installed pg amq
      pg_start
      amq_start
      log "up in $((SECONDS - t0)) s; eval \"\$($0 env)\" to use them"
      ;;
    down)
      take_lock
      rmq_stop quiet
      amq_pair_down quiet
      amq_network_down quiet
      amq_stop
      if pg_bindir >/dev/null; then
        pg_standby_stop
        pg_stop
      else
        log "postgres: not installed"
      fi
      ;;
    up-db)
      take_lock
      ensure_installed pg
      pg_start
      ;;
    up-amq-pair)
      take_lock
      ensure_installed amq
      amq_pair_up
      ;;
    down-amq-pair)
      take_lock
      amq_pair_down
      ;;
    up-amq-network)
      take_lock
      ensure_installed amq
      amq_network_up
      ;;
    down-amq-network)
      take_lock
      amq_network_down
      ;;
    up-pg-standby)
      take_lock
      ensure_installed pg
      pg_standby_start
      ;;
    promote-pg-standby)
      take_lock
      pg_instance pg-standby "$STANDBY_PG_PORT"
      pg_setup_bin
      pg_running || die "postgres standby: not running (up-pg-standby starts it)"
      if [[ $("$PG_BIN/psql" -X -q -At -h 127.0.0.1 -p "$PG_PORT" -U "$PG_USER" -d postgres \
          -c 'select pg_is_in_recovery()') == f ]]; then
        log "postgres standby: already promoted; primary on 127.0.0.1:$PG_PORT"
        exit 0
      fi
      as_pg "$PG_BIN/pg_ctl" promote -D "$PG_DATA" -w -t "$PG_WAIT_SECONDS" -s >/dev/null \
        || die "postgres standby: promotion failed (see $PG_LOG)"
      log "postgres standby: promoted; primary on 127.0.0.1:$PG_PORT"
      ;;
    down-pg-standby)
      take_lock
      pg_standby_stop
      ;;
    restart-db)
      take_lock
      ensure_installed pg
      pg_stop
      pg_start
      ;;
    stop-db)
      take_lock
      ensure_installed pg
      pg_stop
      ;;
    restart-broker)
      take_lock
      ensure_installed amq
      amq_stop
      amq_start
      ;;
    up-rabbitmq)
      take_lock
      ensure_installed rmq
      rmq_start
      ;;
    down-rabbitmq)
      take_lock
      rmq_stop
      ;;
    restart-rabbitmq)
      take_lock
      ensure_installed rmq
      rmq_stop
      rmq_start
      ;;
    status) cmd_status ;;
    env) cmd_env ;;
    -h | --help | help) usage ;;
    *)
      usage
      exit 2
      ;;
  esac
}

main "$@"
