#!/usr/bin/env bash
# The high-availability test (make ha-test, docs/deploy.md): etcd, two Patroni-managed PostgreSQL 15
# instances with synchronous replication, HAProxy routing to the primary by Patroni's /primary check, and
# four skiplock nodes (api, api, dispatcher, api+dispatcher) behind it, all on 127.0.0.1 under a temp
# folder. `skiplock-bench ha` keeps a load on them while this script kills and restarts a node, runs a
# switchover, kills the primary (Patroni and postmaster: a failover), brings it back as a replica and
# kills a node again; then the bench drains the queues and checks the history. Everything it started is
# stopped, and the folder removed, however the run ends.
#
# Usage: scripts/ha/run.sh [path to the folder holding skiplock and skiplock-bench]
set -euo pipefail

BIN="$(cd "${1:-target/release}" && pwd)"
PGBIN="${PGBIN:-/usr/lib/postgresql/15/bin}"
STEP_SECONDS="${HA_STEP_SECONDS:-6}"

log() { printf '%s ha: %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { log "FAILED: $*"; exit 1; }

# --- What the test needs --------------------------------------------------------------------------
need=()
command -v patroni >/dev/null || need+=(patroni)
command -v etcd >/dev/null || need+=(etcd-server)
command -v haproxy >/dev/null || need+=(haproxy)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    log "installing ${need[*]}"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  else
    die "install ${need[*]} (apt-get install ${need[*]}), or run as root so that the test installs them"
  fi
fi
[ -x "$PGBIN/postgres" ] || die "no PostgreSQL 15 binaries in $PGBIN (apt-get install postgresql-15, or set PGBIN)"
[ -x "$BIN/skiplock" ] && [ -x "$BIN/skiplock-bench" ] || die "build first: cargo build --release --bins"
# PostgreSQL refuses to run as root: as root, Patroni runs as the postgres user.
AS=()
if [ "$(id -u)" = 0 ]; then
  id postgres >/dev/null 2>&1 || die "no postgres user (apt-get install postgresql-15)"
  AS=(setpriv --reuid=postgres --regid=postgres --init-groups)
fi

# --- Cleanup, whatever happens ---------------------------------------------------------------------
DIR="$(mktemp -d /tmp/skiplock-ha.XXXXXX)"
chmod 755 "$DIR"
declare -A PID=()
cleanup() {
  local rc=$?
  set +e
  local name pm deadline
  # The nodes and the load first, then HAProxy, Patroni (which stops its PostgreSQL), etcd last.
  for name in bench api1 api2 disp both haproxy pg1 pg2 etcd; do
    [ -n "${PID[$name]:-}" ] || continue
    kill -TERM "${PID[$name]}" 2>/dev/null
    deadline=$((SECONDS + 15))
    while kill -0 "${PID[$name]}" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
    kill -KILL "${PID[$name]}" 2>/dev/null
  done
  for pg in pg1 pg2; do
    pm="$(head -1 "$DIR/$pg/postmaster.pid" 2>/dev/null)"
    [ -n "$pm" ] && kill -KILL "$pm" 2>/dev/null
  done
  if [ $rc -ne 0 ] && [ -d "$DIR" ]; then
    for f in "$DIR"/*.log; do log "--- last lines of $(basename "$f")"; tail -n 15 "$f" >&2; done
  fi
  rm -rf "$DIR"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

source "$(dirname "$0")/../lib/processes.sh"

# --- etcd ------------------------------------------------------------------------------------------
ETCD=$(free_port) ETCD_PEER=$(free_port)
etcd --name ha --data-dir "$DIR/etcd" \
  --listen-client-urls "http://127.0.0.1:$ETCD" --advertise-client-urls "http://127.0.0.1:$ETCD" \
  --listen-peer-urls "http://127.0.0.1:$ETCD_PEER" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER" \
  --initial-cluster "ha=http://127.0.0.1:$ETCD_PEER" >"$DIR/etcd.log" 2>&1 &
PID[etcd]=$!
wait_for 30 "etcd answering" curl -sf "http://127.0.0.1:$ETCD/health"

# --- Two Patroni-managed PostgreSQL instances -------------------------------------------------------
declare -A PGPORT=() REST=()
for pg in pg1 pg2; do
  PGPORT[$pg]=$(free_port)
  REST[$pg]=$(free_port)
  cat >"$DIR/$pg.yml" <<EOF
scope: skiplock-ha
name: $pg
restapi:
  listen: 127.0.0.1:${REST[$pg]}
  connect_address: 127.0.0.1:${REST[$pg]}
etcd3:
  hosts: 127.0.0.1:$ETCD
bootstrap:
  dcs:
    ttl: 20
    loop_wait: 2
    retry_timeout: 5
    synchronous_mode: true
    postgresql:
      use_pg_rewind: true
      parameters:
        max_connections: 200
        wal_log_hints: "on"
        synchronous_commit: "on"
  initdb:
  - encoding: UTF8
  - locale: C.UTF-8
postgresql:
  listen: 127.0.0.1:${PGPORT[$pg]}
  connect_address: 127.0.0.1:${PGPORT[$pg]}
  data_dir: $DIR/$pg
  bin_dir: $PGBIN
  pgpass: $DIR/$pg.pgpass
  authentication:
    superuser: {username: postgres, password: postgres}
    replication: {username: replicator, password: replicator}
    rewind: {username: postgres, password: postgres}
  pg_hba:
  - local all all trust
  - host all all 127.0.0.1/32 trust
  - host replication all 127.0.0.1/32 trust
  parameters:
    unix_socket_directories: $DIR
    fsync: "on"
EOF
done
[ ${#AS[@]} -eq 0 ] || chown postgres "$DIR"
# Patroni and patronictl run from $DIR: as postgres they could not enter a checkout in a private home
# (mode 700), and Patroni's worker processes start by changing to the directory they were started from.
start_patroni() {
  (cd "$DIR" && HOME="$DIR" exec "${AS[@]}" patroni "$DIR/$1.yml") >>"$DIR/$1.log" 2>&1 &
  PID[$1]=$!
}
start_patroni pg1
wait_for 60 "pg1 primary" curl -sf "http://127.0.0.1:${REST[pg1]}/primary"
start_patroni pg2
wait_for 90 "pg2 replica" curl -sf "http://127.0.0.1:${REST[pg2]}/replica"
# Synchronous: pg2 is the synchronous standby before any load starts.
wait_for 60 "pg2 synchronous" curl -sf "http://127.0.0.1:${REST[pg2]}/sync"
patronictl() { (cd "$DIR" && HOME="$DIR" "${AS[@]}" patronictl -c "$DIR/pg1.yml" "$@"); }

# --- HAProxy ---------------------------------------------------------------------------------------
HAPORT=$(free_port)
cat >"$DIR/haproxy.cfg" <<EOF
global
  maxconn 2000
defaults
  mode tcp
  timeout connect 2s
  timeout client 30m
  timeout server 30m
  timeout check 1s
listen primary
  bind 127.0.0.1:$HAPORT
  option httpchk OPTIONS /primary
  http-check expect status 200
  default-server inter 500ms fall 2 rise 1 on-marked-down shutdown-sessions
  server pg1 127.0.0.1:${PGPORT[pg1]} maxconn 500 check port ${REST[pg1]}
  server pg2 127.0.0.1:${PGPORT[pg2]} maxconn 500 check port ${REST[pg2]}
EOF
haproxy -db -f "$DIR/haproxy.cfg" >"$DIR/haproxy.log" 2>&1 &
PID[haproxy]=$!
ADMIN="postgresql://postgres:postgres@127.0.0.1:$HAPORT/postgres"
DATABASE_URL="postgresql://postgres:postgres@127.0.0.1:$HAPORT/skiplock"
writable() { [ "$(psql -qtAX "$ADMIN" -c 'select not pg_is_in_recovery()')" = t ]; }
# HAProxy starts with every server up until its checks say otherwise, and takes turns between the servers
# it thinks up: only several writable connections in a row show that it routes to the primary alone.
only_primary() { for _ in 1 2 3 4; do writable || return 1; done; }
wait_for 30 "HAProxy reaching the primary only" only_primary
psql -qX "$ADMIN" -c 'create database skiplock' >/dev/null
DATABASE_URL="$DATABASE_URL" "$BIN/skiplock" migrate >/dev/null
account_json="$(DATABASE_URL="$DATABASE_URL" "$BIN/skiplock" account create --name ha)"
ACCOUNT="$(sed -E 's/.*"account_id":"([0-9a-f]+)".*/\1/' <<<"$account_json")"
TOKEN="$(sed -E 's/.*"token":"([^"]+)".*/\1/' <<<"$account_json")"

# --- skiplock nodes --------------------------------------------------------------------------------
declare -A ROLES=([api1]=api [api2]=api [disp]=dispatcher [both]=api,dispatcher) PORT=()
for node in api1 api2 disp both; do PORT[$node]=$(free_port); done
start_node() {
  DATABASE_URL="$DATABASE_URL" SKIPLOCK_BIND="127.0.0.1:${PORT[$1]}" SKIPLOCK_METRICS_BIND="127.0.0.1:$(free_port)" SKIPLOCK_ADMIN_BIND=127.0.0.1:0 \
    SKIPLOCK_LOG=warn SKIPLOCK_RATE_LIMIT=0 SKIPLOCK_PUBLISH_RATE_LIMIT=0 SKIPLOCK_WEBHOOK_TIMEOUT_MS=2000 SKIPLOCK_DB_POOL_SIZE=8 \
    SKIPLOCK_WEBHOOK_ALLOW_CIDRS=127.0.0.0/8 \
    "$BIN/skiplock" serve --no-migrate --roles "${ROLES[$1]}" >>"$DIR/$1.log" 2>&1 &
  PID[$1]=$!
  if [ "${ROLES[$1]}" != dispatcher ]; then
    wait_for 30 "$1 ready" curl -sf "http://127.0.0.1:${PORT[$1]}/readyz"
  fi
}
for node in api1 api2 disp both; do start_node "$node"; done
NODES="http://127.0.0.1:${PORT[api1]},http://127.0.0.1:${PORT[api2]},http://127.0.0.1:${PORT[both]}"

# --- The load, and the faults under it --------------------------------------------------------------
"$BIN/skiplock-bench" ha --nodes "$NODES" --account "$ACCOUNT" --token "$TOKEN" \
  --ready-file "$DIR/ready" --stop-file "$DIR/stop" --rate "${HA_RATE:-100}" >"$DIR/report.md" 2>"$DIR/bench.log" &
PID[bench]=$!
wait_for 60 "the load starting" test -e "$DIR/ready"
kills=0
kill_node() {
  log "SIGKILL $1 (${ROLES[$1]}) and start it again"
  kill -KILL "${PID[$1]}"
  wait "${PID[$1]}" 2>/dev/null || true
  kills=$((kills + 1))
  start_node "$1"
}
primary() {
  local pg
  for pg in pg1 pg2; do curl -sf "http://127.0.0.1:${REST[$pg]}/primary" >/dev/null && { echo "$pg"; return; }; done
  return 1
}
other() { [ "$1" = pg1 ] && echo pg2 || echo pg1; }

sleep "$STEP_SECONDS" # the load runs undisturbed for a while first
kill_node api1
sleep "$STEP_SECONDS"
kill_node disp

old="$(primary)"
new="$(other "$old")"
log "switchover $old -> $new"
patronictl switchover --leader "$old" --candidate "$new" --force >>"$DIR/patronictl.log" 2>&1
wait_for 60 "$new primary after the switchover" curl -sf "http://127.0.0.1:${REST[$new]}/primary"
wait_for 60 "HAProxy reaching $new only" only_primary
wait_for 90 "$old back as a synchronous replica" curl -sf "http://127.0.0.1:${REST[$old]}/sync"
sleep "$STEP_SECONDS"
kill_node both

old="$(primary)"
new="$(other "$old")"
log "failover: SIGKILL $old's Patroni and postmaster"
postmaster="$(head -1 "$DIR/$old/postmaster.pid")"
kill -KILL "${PID[$old]}" "$postmaster"
wait "${PID[$old]}" 2>/dev/null || true
unset "PID[$old]"
failover_started=$SECONDS
wait_for 120 "$new promoted" curl -sf "http://127.0.0.1:${REST[$new]}/primary"
wait_for 60 "HAProxy reaching $new only" only_primary
failover_seconds=$((SECONDS - failover_started))
log "failover took ${failover_seconds}s to a writable primary"
sleep "$STEP_SECONDS"
log "restarting $old as a replica"
start_patroni "$old"
wait_for 120 "$old back as a synchronous replica" curl -sf "http://127.0.0.1:${REST[$old]}/sync"
kill_node api2
sleep "$STEP_SECONDS"
echo "node kills=$kills switchovers=1 failovers=1 failover-to-writable=${failover_seconds}s" >"$DIR/stop"

status=0
wait "${PID[bench]}" || status=$?
unset "PID[bench]"
cat "$DIR/report.md"
grep '^ha: ' "$DIR/bench.log" >&2 || true
[ $status -eq 0 ] || die "the checker found violations (skiplock-bench exited $status)"
log "passed"
