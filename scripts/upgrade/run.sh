#!/usr/bin/env bash
# The rolling-upgrade test (make upgrade-test, docs/deploy.md "Upgrading"): two nodes of the previous
# release (api + dispatcher each) serve a load on a fresh database of its schema; this release's
# `skiplock migrate` runs under the load, so the old nodes work on the expanded schema for a while; then
# each node in turn is stopped (SIGTERM, as an orchestrator does) and started again as this release.
# `skiplock-bench ha` keeps the load (a pulled queue, a webhook queue, batch and single publishes through
# both nodes) and, once the stop file appears, drains and judges the history with the crash suite's
# checker: lost 0, no redelivery after an ack, and no 5xx but the documented retryable 503.
#
# Usage: scripts/upgrade/run.sh COMMIT [folder holding this release's skiplock and skiplock-bench]
# The previous release is built from COMMIT (a commit of this repository) in the same target folder, so
# it reuses the compiled dependencies; its binary is kept as target/upgrade-from/skiplock-COMMIT.
set -euo pipefail

FROM="${1:?usage: scripts/upgrade/run.sh COMMIT [bin folder]}"
ROOT="$(cd "$(dirname "$0")/../.." && pwd -P)"
BIN="$(cd "${2:-$ROOT/target/debug}" && pwd)"
STEP_SECONDS="${UPGRADE_STEP_SECONDS:-6}"

log() { printf '%s upgrade: %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { log "FAILED: $*"; exit 1; }

[ -x "$BIN/skiplock" ] && [ -x "$BIN/skiplock-bench" ] || die "build first: cargo build --workspace --bins"
# A shallow clone may lack the commit: fetch it from where the clone came from.
git -C "$ROOT" cat-file -e "$FROM^{commit}" 2>/dev/null || git -C "$ROOT" fetch --quiet origin "$FROM" 2>/dev/null || true
git -C "$ROOT" cat-file -e "$FROM^{commit}" 2>/dev/null \
  || die "commit $FROM is not in this clone and could not be fetched (git fetch --unshallow)"

# --- The previous release's binary ------------------------------------------------------------------
KEEP="$ROOT/target/upgrade-from"
OLD="$KEEP/skiplock-$FROM"
if [ ! -x "$OLD" ]; then
  log "building the previous release ($FROM)"
  src="$KEEP/src-$FROM"
  rm -rf "$src" && mkdir -p "$src"
  git -C "$ROOT" archive "$FROM" | tar -x -C "$src"
  # Built into this checkout's target folder: the dependencies both releases share compile once. Cargo
  # then links the previous release's binary where this one's debug binary was; building this release
  # again as make builds it (nothing to compile) links its own back.
  current="$(sha256sum "$ROOT/target/debug/skiplock" 2>/dev/null | cut -c1-64 || true)"
  (cd "$src" && CARGO_TARGET_DIR="$ROOT/target" cargo build --quiet --bin skiplock)
  cp "$ROOT/target/debug/skiplock" "$OLD.tmp" && mv "$OLD.tmp" "$OLD"
  (cd "$ROOT" && cargo build --quiet --workspace --bins)
  if [ -n "$current" ] && [ "$(sha256sum "$ROOT/target/debug/skiplock" | cut -c1-64)" != "$current" ]; then
    die "target/debug/skiplock is not this release's binary again after building $FROM"
  fi
  rm -rf "$src"
fi

# --- Cleanup, whatever happens ---------------------------------------------------------------------
DIR="$(mktemp -d /tmp/skiplock-upgrade.XXXXXX)"
declare -A PID=()
cleanup() {
  local rc=$?
  set +e
  local name
  for name in bench n1 n2; do
    [ -n "${PID[$name]:-}" ] || continue
    kill -KILL "${PID[$name]}" 2>/dev/null
    wait "${PID[$name]}" 2>/dev/null
  done
  if [ $rc -ne 0 ]; then
    for f in "$DIR"/*.log; do [ -e "$f" ] && { log "--- last lines of $(basename "$f")"; tail -n 15 "$f" >&2; }; done
  fi
  [ -n "${ADMIN:-}" ] && psql -qX "$ADMIN" -c "drop database if exists $DB with (force)" >/dev/null 2>&1
  rm -rf "$DIR"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

source "$ROOT/scripts/lib/processes.sh"

# --- A fresh database of the previous release's schema ----------------------------------------------
ADMIN="${DATABASE_URL:-$("$ROOT/scripts/pg.sh" start)}"
DB="skiplock_upgrade_$$"
psql -qX "$ADMIN" -c "create database $DB" >/dev/null
URL="${ADMIN%/*}/$DB"
DATABASE_URL="$URL" "$OLD" migrate >/dev/null
account_json="$(DATABASE_URL="$URL" "$OLD" account create --name upgrade)"
ACCOUNT="$(sed -E 's/.*"account_id":"([0-9a-f]+)".*/\1/' <<<"$account_json")"
TOKEN="$(sed -E 's/.*"token":"([^"]+)".*/\1/' <<<"$account_json")"

# --- Two nodes of the previous release ----------------------------------------------------------------
declare -A PORT=([n1]=$(free_port) [n2]=$(free_port)) RELEASE=()
start_node() { # NAME BINARY
  DATABASE_URL="$URL" SKIPLOCK_BIND="127.0.0.1:${PORT[$1]}" SKIPLOCK_METRICS_BIND="127.0.0.1:$(free_port)" \
    SKIPLOCK_ADMIN_BIND=127.0.0.1:0 SKIPLOCK_LOG=warn SKIPLOCK_RATE_LIMIT=0 SKIPLOCK_PUBLISH_RATE_LIMIT=0 \
    SKIPLOCK_WEBHOOK_TIMEOUT_MS=2000 SKIPLOCK_DB_POOL_SIZE=8 SKIPLOCK_WEBHOOK_ALLOW_CIDRS=127.0.0.0/8 \
    "$2" serve --no-migrate --roles api,dispatcher >>"$DIR/$1.log" 2>&1 &
  PID[$1]=$!
  RELEASE[$1]="$2"
  wait_for 30 "$1 ready" curl -sf "http://127.0.0.1:${PORT[$1]}/readyz"
}
start_node n1 "$OLD"
start_node n2 "$OLD"

"$BIN/skiplock-bench" ha --nodes "http://127.0.0.1:${PORT[n1]},http://127.0.0.1:${PORT[n2]}" \
  --account "$ACCOUNT" --token "$TOKEN" --ready-file "$DIR/ready" --stop-file "$DIR/stop" \
  --rate "${UPGRADE_RATE:-100}" --allowed-server-errors 503 >"$DIR/report.md" 2>"$DIR/bench.log" &
PID[bench]=$!
wait_for 60 "the load starting" test -e "$DIR/ready"
sleep "$STEP_SECONDS"

log "migrating to this release's schema under the load"
DATABASE_URL="$URL" "$BIN/skiplock" migrate >/dev/null
sleep "$STEP_SECONDS" # both nodes of the previous release on the new schema

# Stopped as an orchestrator stops a pod: SIGTERM, then up to 30 s to finish what it holds.
replace() {
  log "replacing $1: SIGTERM the previous release, start this one"
  kill -TERM "${PID[$1]}"
  local deadline=$((SECONDS + 30))
  while kill -0 "${PID[$1]}" 2>/dev/null; do
    [ $SECONDS -lt $deadline ] || die "$1 did not stop within 30 s of SIGTERM"
    sleep 0.2
  done
  wait "${PID[$1]}" 2>/dev/null || true
  start_node "$1" "$BIN/skiplock"
}
replace n1
sleep "$STEP_SECONDS" # one node of each release
replace n2
sleep "$STEP_SECONDS"
echo "upgraded from=$FROM nodes=2 kills=0" >"$DIR/stop"

status=0
wait "${PID[bench]}" || status=$?
unset "PID[bench]"
cat "$DIR/report.md"
grep '^ha: ' "$DIR/bench.log" >&2 || true
[ $status -eq 0 ] || die "the checker found violations (skiplock-bench exited $status)"
log "passed: from $FROM to this release, two nodes replaced under load"
