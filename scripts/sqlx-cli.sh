#!/usr/bin/env bash
# Installs sqlx-cli (`cargo sqlx`, `sqlx`) when it is missing or not of sqlx 0.8: `make lint` runs
# `cargo sqlx prepare --check` and `sqlx migrate run` with it (docs/testing.md, "Checked SQL").
# A few minutes of compiling, once; `cargo install` works as any user.
set -euo pipefail

case "$(cargo sqlx --version 2>/dev/null || true)" in
  *" 0.8."*) command -v sqlx >/dev/null && exit 0 ;;
esac
echo "sqlx-cli: installing sqlx-cli 0.8 (cargo install, a few minutes)" >&2
cargo install sqlx-cli --version '^0.8' --no-default-features --features postgres,rustls --locked --quiet >&2
