#!/usr/bin/env bash
# Builds bench/search/bench against build/app.a and build/libtusko.a.
set -euo pipefail
cd "$(dirname "$0")/../.."
PKGS="libmicrohttpd libcurl jansson libpq libsodium openssl libseccomp libzmq libcmark-gfm libidn2 zlib"
mkdir -p build/bench
# shellcheck disable=SC2046
gcc -std=c17 -O2 -g -D_GNU_SOURCE -Isrc -Itests/unit/app $(pkg-config --cflags $PKGS) \
  -o build/bench/search bench/search/bench.c build/app.a build/libtusko.a \
  $(pkg-config --libs $PKGS) -lcmark-gfm-extensions -lcap -lpthread -lm
