#!/usr/bin/env bash
# The statement audit of `make test` (docs/testing.md, "Every statement is run by a test"), on the server
# at DATABASE_URL, which must load pg_stat_statements (the private cluster of scripts/pg.sh does):
#   scripts/statement-audit.sh reset   before the suite: forgets the statements recorded so far
#   scripts/statement-audit.sh check   after it: fails when a statement of src/store/ was not run since,
#                                      naming each (tests/statement_audit.rs)
# SKIP_STATEMENT_AUDIT=1 skips both, for a server of your own without pg_stat_statements.
set -euo pipefail
cd "$(dirname "$0")/.."

[ -n "${DATABASE_URL:-}" ] || { echo "statement-audit: DATABASE_URL is not set" >&2; exit 2; }
if [ -n "${SKIP_STATEMENT_AUDIT:-}" ]; then
  echo "statement-audit: skipped (SKIP_STATEMENT_AUDIT is set)" >&2
  exit 0
fi
loaded="$(psql -q "$DATABASE_URL" -tAc "show shared_preload_libraries")"
case ",${loaded// /}," in
  *,pg_stat_statements,*) ;;
  *) echo "statement-audit: the server at DATABASE_URL does not load pg_stat_statements" \
          "(shared_preload_libraries = '$loaded')." >&2
     echo "       Add it to shared_preload_libraries and restart the server, use the private cluster" \
          "(unset DATABASE_URL), or set SKIP_STATEMENT_AUDIT=1." >&2
     exit 1 ;;
esac

case "${1:-}" in
  reset)
    psql -q "$DATABASE_URL" -v ON_ERROR_STOP=1 -c "create extension if not exists pg_stat_statements" \
      -c "select pg_stat_statements_reset()" >/dev/null ;;
  check)
    # Built from the offline data, as the suite was (the Makefile's SQLX_OFFLINE).
    SQLX_OFFLINE="${SQLX_OFFLINE:-true}" cargo test --workspace --quiet --test statement_audit -- \
      --ignored --exact every_store_statement_ran --nocapture ;;
  *) echo "usage: $0 reset|check" >&2; exit 2 ;;
esac
