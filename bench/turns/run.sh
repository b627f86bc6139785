#!/usr/bin/env bash
# bench/turns: 2,000 concurrent chat turns against the scripted model server
# (each streams for ~5 s); prints tusko's CPU per turn and memory per idle and
# active session. Uses the optimised build (make); BENCH_TURNS to change N.
set -euo pipefail
cd "$(dirname "$0")/../.."
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
exec node bench/turns/bench.mjs "$@"
