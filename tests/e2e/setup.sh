#!/usr/bin/env bash
# Installs what the dashboard's end-to-end test needs, when it is missing:
#   - Chromium at /usr/bin/chromium (Debian package `chromium`; installed only when running as root)
#   - playwright-core from tests/e2e/package-lock.json (npm ci)
# Usage (from the repository root or anywhere): bash tests/e2e/setup.sh
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "setup.sh: node and npm are required (node 20 or newer)" >&2
  exit 1
fi

if [ ! -x /usr/bin/chromium ]; then
  if [ "$(id -u)" = "0" ]; then
    echo "setup.sh: installing chromium (Debian package)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq chromium >/dev/null
  else
    echo "setup.sh: /usr/bin/chromium is missing and this is not root;" \
      "install it with: sudo apt-get install -y chromium" >&2
    exit 1
  fi
fi
if [ ! -x /usr/bin/chromium ]; then
  echo "setup.sh: /usr/bin/chromium is still missing after installing the chromium package" >&2
  exit 1
fi

if [ ! -f "$here/node_modules/playwright-core/package.json" ]; then
  echo "setup.sh: installing playwright-core (npm ci)"
  npm ci --prefix "$here" --no-audit --no-fund --loglevel=error
fi

echo "setup.sh: ready ($(/usr/bin/chromium --version 2>/dev/null || echo chromium), playwright-core $(node -p "require('$here/node_modules/playwright-core/package.json').version"))"
