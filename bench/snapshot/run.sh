#!/usr/bin/env bash
# bench/snapshot — a workspace snapshot and its restore through the whole path
# (tusko, tusko-sandboxd's native runtime, execd, s3rver on loopback) for a
# 200 MiB workspace, beside `tar czf` of the same tree in the sandbox plus a
# plain signed upload of the archive with curl; tusko's peak RSS (VmHWM).
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -x build/tusko ] || make -j2 programs >/dev/null
[ -d tests/node_modules ] || (cd tests && npm ci --no-audit --no-fund --loglevel=error)
export SANDBOX_IMAGE_DIR=${SANDBOX_IMAGE_DIR:-$(cat /work/coord/image.path 2>/dev/null || true)}
TUSKO_BUILD=build exec node bench/snapshot/bench.mjs "$@"
