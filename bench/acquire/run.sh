#!/usr/bin/env bash
# bench/acquire/run.sh — sandbox acquire latency (create → first command output),
# p50/p99 over RUNS runs (default 200) each:
#   tusko-sandboxd, warm pool      (SANDBOX_WARM_POOL_SIZE=2)
#   tusko-sandboxd, cold           (no pool: namespaces, mounts, cgroups, execd from scratch)
#   bwrap --unshare-all            (the same command in the same image, no service around it:
#                                   with the image's /bin/sh (dash), and with /bin/bash, which
#                                   is what execd runs commands with)
#   tusko-sandboxd docker runtime, warm pool and cold (SANDBOX_RUNTIME=docker)
#   docker run --rm --network none (the same image, tusko-sandbox:<hash>, in the same engine)
# All on this machine, in this run. Needs root (namespaces, cgroups) and a built
# tree (make). The Docker rows use the engine at DOCKER_HOST, or one started by
# scripts/dockerd.sh (and stopped at the end); docker.io must be installed
# (scripts/deps.sh). Environment: RUNS, DOCKER_RUNS (default RUNS), BENCH_DOCKER=0
# to leave Docker out.
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
RUNS=${RUNS:-200}
BUILD=${BENCH_BUILD:-build}
OUT=$ROOT/var/bench
mkdir -p "$OUT"
KEY=k-bench-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')

if [ "$(id -u)" != 0 ]; then
  echo "bench/acquire: needs root (the native runtime makes namespaces and cgroups)"
  exit 1
fi
PKGS="libmicrohttpd libcurl jansson libpq libsodium openssl libseccomp libzmq"
cc -O2 -std=c17 -D_GNU_SOURCE -Isrc -o "$OUT/acquire" bench/acquire/acquire.c "$BUILD/libtusko.a" \
  $(pkg-config --libs $PKGS) -lpthread -lm || exit 1

ROOTFS=${SANDBOX_IMAGE_DIR:-$(images/sandbox/build.sh --print-path)} || { echo "no sandbox image"; exit 1; }

pids=()
STARTED_DOCKERD=0
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$OUT/state-warm" "$OUT/state-cold" "$OUT/state-dwarm" "$OUT/state-dcold"
  [ "$STARTED_DOCKERD" = 1 ] && scripts/dockerd.sh stop
}
trap cleanup EXIT

start_sandboxd() { # name pool [VAR=value...] → sets URL
  local name=$1 pool=$2 log=$OUT/sandboxd-$1.log
  shift 2
  rm -rf "$OUT/state-$name"
  env SANDBOXD_API_KEY="$KEY" SANDBOXD_LISTEN=127.0.0.1:0 SANDBOXD_STATE_DIR="$OUT/state-$name" \
    SANDBOX_IMAGE_DIR="$ROOTFS" SANDBOX_WARM_POOL_SIZE="$pool" LOG_LEVEL=info "$@" "$BUILD/tusko-sandboxd" >"$log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1200); do
    URL=$(grep -o 'msg="listening" url=[^ ]*' "$log" | head -1 | sed 's/.*url=//')
    [ -n "$URL" ] && return 0
    sleep 0.05
  done
  echo "tusko-sandboxd did not start:"; cat "$log"; exit 1
}

echo "sandbox acquire latency: create → first output of \"echo ready\", $RUNS runs each ($(nproc) cores, $(uname -r), load average $(cut -d" " -f1-3 /proc/loadavg) at the start)"
echo
"$OUT/acquire" header

start_sandboxd warm 2
sleep 0.5
"$OUT/acquire" sandboxd "$URL" "$KEY" 5 "(warm-up)" warm >/dev/null
"$OUT/acquire" sandboxd "$URL" "$KEY" "$RUNS" "tusko-sandboxd native, warm pool" warm
start_sandboxd cold 0
"$OUT/acquire" sandboxd "$URL" "$KEY" 5 "(warm-up)" cold >/dev/null
"$OUT/acquire" sandboxd "$URL" "$KEY" "$RUNS" "tusko-sandboxd native, cold" cold

if command -v bwrap >/dev/null; then
  "$OUT/acquire" exec "$RUNS" "bwrap --unshare-all" -- bwrap --unshare-all --die-with-parent \
    --ro-bind "$ROOTFS" / --dev /dev --proc /proc --tmpfs /tmp --tmpfs /workspace --chdir /workspace \
    /bin/sh -c 'echo ready'
  "$OUT/acquire" exec "$RUNS" "bwrap --unshare-all, bash -c" -- bwrap --unshare-all --die-with-parent \
    --ro-bind "$ROOTFS" / --dev /dev --proc /proc --tmpfs /tmp --tmpfs /workspace --chdir /workspace \
    /bin/bash -c 'echo ready'
else
  printf '%-34s unavailable: bwrap is not installed (apt-get install bubblewrap)\n' "bwrap --unshare-all"
fi

# --- Docker: the docker runtime's rows and plain `docker run`, same engine, same image ---
docker_rows() {
  local runs=${DOCKER_RUNS:-$RUNS} why="" dk tag
  if [ "${BENCH_DOCKER:-1}" = 0 ]; then
    why="skipped (BENCH_DOCKER=0)"
  elif ! dk=$(scripts/dockerd.sh start 2>"$OUT/dockerd-start.log"); then
    why="unavailable: $(cut -c1-160 "$OUT/dockerd-start.log")"
  else
    export DOCKER_HOST=${dk% *}
    [ "${dk#* }" = 1 ] && STARTED_DOCKERD=1
    # the image as the runtime names it (tusko-sandbox:<recipe hash>): imported
    # here once, so no row pays for the import
    local hash
    hash=$(sed -n 's/.*"hash": *"\([0-9a-f]*\)".*/\1/p' "$ROOTFS/image.json" "$ROOTFS/../image.json" 2>/dev/null | head -1)
    tag=tusko-sandbox:$hash
    if [ -z "$hash" ]; then
      why="unavailable: $ROOTFS has no image.json recipe hash"
    elif ! docker image inspect "$tag" >/dev/null 2>&1 &&
      ! tar -C "$ROOTFS" --numeric-owner --one-file-system --exclude='./dev/*' --exclude='./proc/*' \
        --exclude='./sys/*' -cf - . | docker import --change 'WORKDIR /workspace' - "$tag" >/dev/null; then
      why="unavailable: docker import failed"
    fi
  fi
  if [ -n "$why" ]; then
    for l in "tusko-sandboxd docker, warm pool" "tusko-sandboxd docker, cold" "docker run --rm --network none"; do
      printf '%-34s %s\n' "$l" "$why"
    done
    return
  fi
  start_sandboxd dwarm 2 SANDBOX_RUNTIME=docker DOCKER_HOST="$DOCKER_HOST"
  ACQUIRE_POOL_DIR=$OUT/state-dwarm "$OUT/acquire" sandboxd "$URL" "$KEY" 3 "(warm-up)" warm >/dev/null
  ACQUIRE_POOL_DIR=$OUT/state-dwarm "$OUT/acquire" sandboxd "$URL" "$KEY" "$runs" "tusko-sandboxd docker, warm pool" warm
  kill "${pids[-1]}" && wait "${pids[-1]}" 2>/dev/null
  start_sandboxd dcold 0 SANDBOX_RUNTIME=docker DOCKER_HOST="$DOCKER_HOST"
  "$OUT/acquire" sandboxd "$URL" "$KEY" 3 "(warm-up)" cold >/dev/null
  "$OUT/acquire" sandboxd "$URL" "$KEY" "$runs" "tusko-sandboxd docker, cold" cold
  kill "${pids[-1]}" && wait "${pids[-1]}" 2>/dev/null
  docker run --rm --network none "$tag" /bin/sh -c 'echo ready' >/dev/null 2>&1 # warm-up
  "$OUT/acquire" exec "$runs" "docker run --rm --network none" -- docker run --rm --network none "$tag" /bin/sh -c 'echo ready'
}
docker_rows
echo
echo "targets: warm p50 ≤ 5 ms, cold p50 ≤ 30 ms (measured, never asserted)"
