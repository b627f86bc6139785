#!/usr/bin/env bash
# bench/execd — tusko-execd latencies and throughput on this machine, against
# baselines: a command through execd vs spawning bash directly; a bash-session
# run vs a fresh command; upload/download vs a local file copy.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -x build/tusko-execd ] || make -j2 build/tusko-execd >/dev/null
[ -d tests/node_modules ] || (cd tests && npm ci --no-audit --no-fund --loglevel=error)
TUSKO_BUILD=build exec node bench/execd/bench.mjs "$@"
