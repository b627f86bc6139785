#!/usr/bin/env bash
# bench/soak/run.sh — the stack under a steady mix of work for SOAK_MINUTES
# (default 15; SOAK_USERS simulated users, default 6), then the counts that show
# memory, descriptors, sandboxes and cgroups stay flat and nothing is left
# behind (see soak.mjs). Needs root (the native sandbox runtime) and a built
# tree (make). SOAK_MINUTES=0 leaves it out of `make bench`.
set -uo pipefail
cd "$(dirname "$0")/../.."
if [ "${SOAK_MINUTES:-15}" = 0 ]; then
  echo "bench/soak: left out (SOAK_MINUTES=0)"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "bench/soak: needs root (the native runtime makes namespaces and cgroups)"
  exit 1
fi
export SANDBOX_IMAGE_DIR=${SANDBOX_IMAGE_DIR:-$(images/sandbox/build.sh --print-path)} || { echo "no sandbox image"; exit 1; }
export TUSKO_BUILD=${BENCH_BUILD:-build}
export TUSKO_TEST_OUT=${TUSKO_TEST_OUT:-var/bench/soak}
[ -d tests/node_modules ] || (cd tests && npm ci --silent)
ulimit -n 65536 2>/dev/null || true
exec node bench/soak/soak.mjs
