#!/usr/bin/env bash
# bench/run.sh — `make bench`: runs every bench/*/run.sh and prints their tables.
set -uo pipefail
cd "$(dirname "$0")/.."
status=0
for b in bench/*/run.sh; do
  [ -x "$b" ] || continue
  echo "=== $(dirname "$b") ==="
  "$b" || status=1
  echo
done
exit $status
