#!/usr/bin/env bash
# A private PostgreSQL cluster for development and tests, one per checkout.
#   scripts/pg.sh start    initialise if needed, start, print the DATABASE_URL
#   scripts/pg.sh stop     stop it
#   scripts/pg.sh url      print the DATABASE_URL
#   scripts/pg.sh destroy  stop it and delete its data (make clean)
# Uses the machine's initdb/pg_ctl. A normal user's cluster lives in .data/pg (ignored by git).
# As root, the server runs as the postgres user, who cannot enter a checkout in a private home such
# as /root: the cluster then lives in a folder of its own, /var/lib/skiplock-pg/<checkout>-<hash>
# (SKIPLOCK_PG_ROOT changes the parent), and .data/pg is a symlink to it. As root it also installs
# the postgresql package with apt-get when it is missing.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd -P)"
data="$root/.data"
link="$data/pg"
outside_root="${SKIPLOCK_PG_ROOT:-/var/lib/skiplock-pg}"

is_root() { [ "$(id -u)" = 0 ]; }
fail() {
  echo "pg.sh: $1" >&2
  shift
  local line
  for line in "$@"; do echo "       $line" >&2; done
  exit 1
}

# The cluster's data directory, existing or to be created.
cluster_dir() {
  if [ -L "$link" ]; then
    readlink "$link"
  elif [ -f "$link/PG_VERSION" ] || ! is_root; then
    # Clusters made in the checkout (by a normal user, or by root before they moved out) stay there.
    echo "$link"
  else
    local hash name
    hash="$(printf '%s' "$root" | sha256sum | cut -c1-12)"
    name="$(basename "$root" | tr -c 'A-Za-z0-9._\n-' '_' | cut -c1-24)"
    echo "$outside_root/$name-$hash"
  fi
}

# Each checkout's cluster keeps the port it was given at first start, so clusters of two checkouts
# on one machine do not collide.
port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
choose_port() {
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
}

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

need_bin() {
  bin="$(find_bin || true)"
  [ -n "$bin" ] && return
  if is_root && command -v apt-get >/dev/null; then
    echo "pg.sh: installing PostgreSQL (apt-get install postgresql)" >&2
    apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
    bin="$(find_bin)"
  else
    fail "PostgreSQL's server programs (initdb, pg_ctl) are missing." \
      "Install them (Debian/Ubuntu: sudo apt-get install postgresql), or set DATABASE_URL."
  fi
}

# Runs a PostgreSQL program as the cluster's owner: postgres when root, which initdb and the server
# require. From / so that it does not warn about a working directory it cannot enter.
as_owner() {
  if is_root; then (cd / && runuser -u postgres -- "$@"); else "$@"; fi
}

running() { [ -f "$1/PG_VERSION" ] && as_owner "$bin/pg_ctl" -D "$1" status >/dev/null 2>&1; }

# As root: the cluster's folder exists, belongs to postgres, and postgres can reach it.
prepare_for_postgres() {
  local cluster="$1"
  id -u postgres >/dev/null 2>&1 \
    || fail "as root, the cluster runs as the postgres user, and this machine has none." \
      "Create it (useradd --system --home-dir /var/lib/postgresql postgres), run as a normal user, or set DATABASE_URL."
  if [ "$cluster" != "$link" ] && [ ! -L "$link" ]; then
    # An empty .data/pg left by an earlier failed start in the checkout gives way to the symlink.
    if [ -e "$link" ]; then
      rmdir "$link" 2>/dev/null \
        || fail "$link is not a cluster (no PG_VERSION) and not empty." "Remove it (rm -rf $link) and start again."
    fi
    mkdir -p "$(dirname "$cluster")"
    chmod a+rx "$(dirname "$cluster")"
    ln -s "$cluster" "$link"
  fi
  mkdir -p "$cluster"
  chown postgres "$cluster"
  chmod 700 "$cluster"
  as_owner test -w "$cluster" \
    || fail "the postgres user cannot reach $cluster: a folder above it is closed to other users." \
      "Set SKIPLOCK_PG_ROOT to a folder it can enter (the default is /var/lib/skiplock-pg), run \`make clean\`" \
      "and start again; or set DATABASE_URL to a server of your own."
}

start() {
  need_bin
  choose_port
  mkdir -p "$data"
  local cluster
  cluster="$(cluster_dir)"
  if [ ! -f "$cluster/PG_VERSION" ]; then
    if is_root; then prepare_for_postgres "$cluster"; else mkdir -p "$cluster"; fi
    as_owner "$bin/initdb" -D "$cluster" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >"$data/initdb.log" 2>&1 \
      || { cat "$data/initdb.log" >&2
           fail "initdb failed (its output is above and in .data/initdb.log)." \
             "\`make clean\` removes the half-made cluster; or set DATABASE_URL to a server of your own."; }
  fi
  # A server started with another port or other settings (before pg_stat_statements was configured here,
  # say) is restarted once with the current ones: the statement audit of `make test` needs them.
  if running "$cluster" && ! started_as_configured "$cluster"; then
    echo "pg.sh: restarting the cluster with its current port and settings" >&2
    as_owner "$bin/pg_ctl" -D "$cluster" -m fast -w stop >/dev/null \
      || fail "pg_ctl could not stop the server of $cluster (see $cluster/server.log)."
  fi
  if ! running "$cluster"; then
    port_in_use "$port" \
      && fail "port $port is taken by another program." \
        "Remove .data/pg-port to have a free port chosen, or set SKIPLOCK_PG_PORT."
    local tries=1
    until start_server "$cluster"; do
      # The port was taken between the check and the start (another checkout's cluster starting, or a
      # connection's ephemeral port, since these ports lie in Linux's ephemeral range): take the next
      # free one, unless the port was given.
      if [ -z "${SKIPLOCK_PG_PORT:-}" ] && [ "$tries" -lt 5 ] \
          && tail -5 "$cluster/server.log" | grep -q 'Address already in use'; then
        tries=$((tries + 1))
        port=$((port + 1))
        while port_in_use "$port"; do port=$((port + 1)); done
        echo "$port" >"$data/pg-port"
        url="postgres://postgres@127.0.0.1:$port/postgres"
        continue
      fi
      cat "$data/pg_ctl.log" >&2
      tail -20 "$cluster/server.log" >&2
      fail "the server did not start; its log ends above ($cluster/server.log)."
    done
  fi
  echo "$url"
}

# The server's settings beyond its address, one per line. pg_stat_statements, when this PostgreSQL has
# it (Debian's postgresql package does), records every statement the tests run, for the statement audit
# of `make test` (docs/testing.md); its table holds the statements of every test database, hence the
# large max.
server_settings() {
  echo "max_connections=400"
  echo "shared_buffers=256MB"
  local lib
  lib="$("$bin/pg_config" --pkglibdir 2>/dev/null || echo "$(dirname "$bin")/lib")"
  if [ -f "$lib/pg_stat_statements.so" ]; then
    echo "pg_stat_statements.max=100000"
    echo "shared_preload_libraries=pg_stat_statements"
  fi
}

# Whether the running server of cluster $1 was started with this port and these settings.
started_as_configured() {
  local opts setting
  opts="$(cat "$1/postmaster.opts" 2>/dev/null)" || return 1
  grep -qF -- "\"-p\" \"$port\"" <<<"$opts" || return 1
  while read -r setting; do
    grep -qF -- "\"$setting\"" <<<"$opts" || return 1
  done < <(server_settings)
}

start_server() {
  local options setting
  options="-c listen_addresses=127.0.0.1 -p $port -c unix_socket_directories='$1'"
  while read -r setting; do options+=" -c $setting"; done < <(server_settings)
  as_owner "$bin/pg_ctl" -D "$1" -l "$1/server.log" -w -t 60 start -o "$options" >"$data/pg_ctl.log" 2>&1
}

stop() {
  local cluster
  cluster="$(cluster_dir)"
  [ -f "$cluster/PG_VERSION" ] || return 0
  need_bin
  if running "$cluster"; then
    as_owner "$bin/pg_ctl" -D "$cluster" -m fast -w stop >/dev/null \
      || fail "pg_ctl could not stop the server of $cluster (see $cluster/server.log)."
  fi
}

destroy() {
  stop
  if [ -L "$link" ]; then
    local cluster
    cluster="$(readlink "$link")"
    # Only a folder that is a cluster (or an empty one) is deleted, wherever the symlink points.
    if [ -e "$cluster" ]; then
      if [ -f "$cluster/PG_VERSION" ] || [ -z "$(ls -A "$cluster")" ]; then
        rm -rf -- "$cluster"
      else
        fail "$link points to $cluster, which is not a PostgreSQL cluster: left alone." \
          "Delete it yourself if it is no longer needed, then remove $link."
      fi
    fi
    rm -f -- "$link"
  fi
  rm -rf -- "$link"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  url) choose_port; echo "$url" ;;
  destroy) destroy ;;
  *) echo "usage: $0 start|stop|url|destroy" >&2; exit 2 ;;
esac
