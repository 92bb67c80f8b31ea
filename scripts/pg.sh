#!/usr/bin/env bash
# A private PostgreSQL cluster for development and tests, under .data/ (ignored by git).
#   scripts/pg.sh start   initialise if needed, start, print the DATABASE_URL
#   scripts/pg.sh stop    stop it
#   scripts/pg.sh url     print the DATABASE_URL
# Uses the machine's initdb/pg_ctl; as root it runs them as the postgres user and installs the
# postgresql package with apt-get when it is missing.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
data="$root/.data"
cluster="$data/pg"

# Each checkout's cluster keeps the port it was given at first start, so clusters of two checkouts
# on one machine do not collide.
port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
if [ -n "${SKIPLOCK_PG_PORT:-}" ]; then
  port="$SKIPLOCK_PG_PORT"
elif [ -s "$data/pg-port" ]; then
  port="$(cat "$data/pg-port")"
else
  port=54329
  while port_in_use "$port"; do port=$((port + 1)); done
  mkdir -p "$data" && echo "$port" >"$data/pg-port"
fi
url="postgres://postgres@127.0.0.1:$port/postgres"

find_bin() {
  local dir
  if command -v pg_config >/dev/null 2>&1 && [ -x "$(pg_config --bindir)/initdb" ]; then
    pg_config --bindir; return
  fi
  for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    [ -x "$dir/initdb" ] && { echo "$dir"; return; }
  done
  command -v initdb >/dev/null 2>&1 && { dirname "$(command -v initdb)"; return; }
  return 1
}

bin="$(find_bin || true)"
if [ -z "$bin" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "pg.sh: installing PostgreSQL (apt-get install postgresql)" >&2
    apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
    bin="$(find_bin)"
  else
    echo "pg.sh: PostgreSQL's server programs (initdb, pg_ctl) are missing." >&2
    echo "       Install them (Debian/Ubuntu: sudo apt-get install postgresql), or set DATABASE_URL." >&2
    exit 1
  fi
fi

as_owner() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

start() {
  mkdir -p "$data"
  if [ ! -f "$cluster/PG_VERSION" ]; then
    mkdir -p "$cluster"
    [ "$(id -u)" = 0 ] && chown postgres "$cluster" && chmod 700 "$cluster"
    as_owner "$bin/initdb" -D "$cluster" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >"$data/initdb.log" 2>&1 \
      || { cat "$data/initdb.log" >&2; exit 1; }
  fi
  if ! as_owner "$bin/pg_ctl" -D "$cluster" status >/dev/null 2>&1; then
    as_owner "$bin/pg_ctl" -D "$cluster" -l "$cluster/server.log" -w -t 60 start \
      -o "-c listen_addresses=127.0.0.1 -p $port -c unix_socket_directories='$cluster' -c max_connections=400 -c shared_buffers=256MB" \
      >/dev/null || { tail -20 "$cluster/server.log" >&2; exit 1; }
  fi
  echo "$url"
}

case "${1:-}" in
  start) start ;;
  stop) as_owner "$bin/pg_ctl" -D "$cluster" -m fast stop >/dev/null 2>&1 || true ;;
  url) echo "$url" ;;
  *) echo "usage: $0 start|stop|url" >&2; exit 2 ;;
esac
