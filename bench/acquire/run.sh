#!/usr/bin/env bash
# bench/acquire/run.sh — sandbox acquire latency (create → first command output),
# p50/p99 over RUNS runs (default 200) each:
#   tusko-sandboxd, warm pool      (SANDBOX_WARM_POOL_SIZE=2)
#   tusko-sandboxd, cold           (no pool: namespaces, mounts, cgroups, execd from scratch)
#   bwrap --unshare-all            (the same command in the same image, no service around it)
#   docker run --rm --network none (the same image imported into Docker; started here if it can be)
# All on this machine, in this run. Needs root (namespaces, cgroups) and a built
# tree (make). Environment: RUNS, BENCH_DOCKER=0 to leave Docker out.
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
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$OUT/state-warm" "$OUT/state-cold"
}
trap cleanup EXIT

start_sandboxd() { # name pool → sets URL
  local name=$1 pool=$2 log=$OUT/sandboxd-$1.log
  rm -rf "$OUT/state-$name"
  SANDBOXD_API_KEY=$KEY SANDBOXD_LISTEN=127.0.0.1:0 SANDBOXD_STATE_DIR=$OUT/state-$name \
    SANDBOX_IMAGE_DIR=$ROOTFS SANDBOX_WARM_POOL_SIZE=$pool LOG_LEVEL=info "$BUILD/tusko-sandboxd" >"$log" 2>&1 &
  pids+=($!)
  for _ in $(seq 200); do
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
else
  printf '%-34s unavailable: bwrap is not installed (apt-get install bubblewrap)\n' "bwrap --unshare-all"
fi

docker_row() {
  local label="docker run --rm --network none"
  if [ "${BENCH_DOCKER:-1}" = 0 ]; then printf '%-34s skipped (BENCH_DOCKER=0)\n' "$label"; return; fi
  if ! command -v dockerd >/dev/null; then
    if ! apt-get install -y --no-install-recommends docker.io >"$OUT/docker-install.log" 2>&1; then
      printf '%-34s unavailable: docker.io could not be installed (see %s)\n' "$label" "$OUT/docker-install.log"; return
    fi
  fi
  if ! docker info >/dev/null 2>&1; then
    (dockerd >"$OUT/dockerd.log" 2>&1 &)
    for _ in $(seq 100); do docker info >/dev/null 2>&1 && break; sleep 0.2; done
    if ! docker info >/dev/null 2>&1; then
      printf '%-34s unavailable: dockerd does not start here: %s\n' "$label" "$(grep -iE 'level=(fatal|error)' "$OUT/dockerd.log" | tail -1 | cut -c1-160)"
      return
    fi
    STARTED_DOCKERD=1
  fi
  local tag=tusko-sandbox:bench
  if ! docker image inspect "$tag" >/dev/null 2>&1; then
    tar -C "$ROOTFS" -c . | docker import - "$tag" >/dev/null || { printf '%-34s unavailable: docker import failed\n' "$label"; return; }
  fi
  docker run --rm --network none "$tag" /bin/sh -c 'echo ready' >/dev/null 2>&1 # warm-up
  "$OUT/acquire" exec "$RUNS" "$label" -- docker run --rm --network none "$tag" /bin/sh -c 'echo ready'
}
docker_row
if [ "${STARTED_DOCKERD:-0}" = 1 ]; then
  kill "$(cat /var/run/docker.pid 2>/dev/null)" 2>/dev/null
fi
echo
echo "targets: warm p50 ≤ 5 ms, cold p50 ≤ 30 ms (measured, never asserted)"
