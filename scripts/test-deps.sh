#!/usr/bin/env bash
# Installs the programs the test suite drives when they are missing: Prometheus and promtool (Debian
# package prometheus), for the dashboard's browser test, Chromium (Debian package chromium), and for the
# high-availability test (scripts/ha/run.sh) Patroni, etcd and HAProxy.
# As root it uses apt-get; otherwise it says what to install and fails.
set -euo pipefail

need=()
{ command -v promtool && command -v prometheus; } >/dev/null 2>&1 || need+=(prometheus)
[ -x /usr/bin/chromium ] || need+=(chromium)
command -v npm >/dev/null 2>&1 || need+=(npm)
command -v patroni >/dev/null 2>&1 || need+=(patroni)
command -v etcd >/dev/null 2>&1 || need+=(etcd-server)
command -v haproxy >/dev/null 2>&1 || need+=(haproxy)
[ ${#need[@]} -eq 0 ] && exit 0

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "test-deps: installing ${need[*]} (apt-get)" >&2
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >&2
else
  echo "test-deps: missing ${need[*]}; install them (Debian/Ubuntu: sudo apt-get install ${need[*]})" >&2
  exit 1
fi
