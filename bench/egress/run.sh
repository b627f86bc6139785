#!/usr/bin/env bash
# bench/egress/run.sh — what the checked way out (lib/egress) costs on loopback:
# a 256 MiB download direct and through a CONNECT tunnel, and a small request
# direct, through the proxy in absolute form, and refused (bench.c says how).
# Needs a built tree (make). Environment: RUNS (default 2000), MIB (default 256).
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BENCH_BUILD:-build}
OUT=var/bench
mkdir -p "$OUT"
PKGS="libmicrohttpd libcurl jansson libpq libsodium openssl libseccomp libzmq libidn2"
cc -O2 -std=c17 -D_GNU_SOURCE -Isrc -o "$OUT/egress" bench/egress/bench.c "$BUILD/libtusko.a" \
  $(pkg-config --libs $PKGS) -lpthread -lm || exit 1
"$OUT/egress"
