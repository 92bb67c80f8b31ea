#!/usr/bin/env bash
# Installs the official Cloudflare clients that tests/api/clients.rs drives, from package-lock.json:
#   cloudflare5 (cloudflare@5.x), cloudflare7 (cloudflare@7.3.0), wrangler-4.86, wrangler-4.164, and
#   the npm package `node` (Node 22, which wrangler 4.164 needs; its install script fetches the
#   node-<os>-<arch> binary package from the same npm registry).
# Everything comes from the npm registry. A second run with the same lock file does nothing.
# Usage (from anywhere): bash tests/clients/setup.sh
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
stamp="$here/node_modules/.skiplock-installed"

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "clients/setup.sh: node and npm are required (node 20 or newer)" >&2
  exit 1
fi

want="$(cat "$here/package.json" "$here/package-lock.json" | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ] || [ ! -x "$here/node_modules/node/bin/node" ]; then
  echo "clients/setup.sh: installing the Cloudflare clients and Node 22 (npm ci)"
  npm ci --prefix "$here" --no-audit --no-fund --loglevel=error
  echo "$want" >"$stamp"
fi

node22="$here/node_modules/node/bin/node"
if ! "$node22" --version 2>/dev/null | grep -q '^v22\.'; then
  echo "clients/setup.sh: $node22 is not a working Node 22 (its install script fetches it; is npm's registry reachable?)" >&2
  rm -f "$stamp"
  exit 1
fi
version() { node -p "require('$here/node_modules/$1/package.json').version"; }
echo "clients/setup.sh: ready (cloudflare $(version cloudflare5) and $(version cloudflare7)," \
  "wrangler $(version wrangler-4.86) and $(version wrangler-4.164), node $("$node22" --version))"
