#!/usr/bin/env bash
# bench/browser — tusko-browserd on this machine: session acquire (create to the
# first navigation done) from the warm pool and cold, beside a bare
# `chromium --headless` start to the same page; /v1/scrape pages per second;
# memory of an idle session's Chromium.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -x build/tusko-browserd ] || make -j2 build/tusko-browserd >/dev/null
[ -d tests/node_modules ] || (cd tests && npm ci --no-audit --no-fund --loglevel=error)
TUSKO_BUILD=build exec nice -n 10 node bench/browser/bench.mjs "$@"
