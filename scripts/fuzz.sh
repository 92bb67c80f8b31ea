#!/usr/bin/env bash
# Runs each cargo-fuzz target for SECONDS (default 60): the token parser, the lease id parser and the
# webhook-answer parser. cargo-fuzz needs the nightly toolchain: without it this says so and skips.
# Installs cargo-fuzz from crates.io when it is missing.
set -euo pipefail
seconds="${1:-60}"
cd "$(dirname "$0")/../fuzz"

if ! cargo +nightly --version >/dev/null 2>&1; then
  echo "fuzz: skipped: the nightly Rust toolchain is missing (rustup toolchain install nightly)"
  exit 0
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "fuzz: installing cargo-fuzz" >&2
  cargo install cargo-fuzz --locked --quiet
fi
mkdir -p artifacts
for target in token lease_id webhook_answer; do
  log="artifacts/$target.log"
  if ! cargo +nightly fuzz run "$target" -- -max_total_time="$seconds" >"$log" 2>&1; then
    tail -n 40 "$log"
    echo "fuzz: $target FAILED (the crashing input is under fuzz/artifacts/$target/)"
    exit 1
  fi
  echo "fuzz: $target ran ${seconds}s without a failure: $(grep -o 'Done [0-9]* runs' "$log" | tail -n 1)"
done
