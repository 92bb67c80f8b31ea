# Shell helpers of the scripts that start processes and wait on them (scripts/ha, scripts/upgrade).
# The sourcing script defines die MESSAGE.

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# wait_for SECONDS WHAT COMMAND...: runs COMMAND until it succeeds, failing the test after SECONDS.
wait_for() {
  local limit=$1 what=$2 deadline=$((SECONDS + $1))
  shift 2
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || die "$what: not within ${limit}s"
    sleep 0.2
  done
}
