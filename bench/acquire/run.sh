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
#   tusko-sandboxd kubernetes runtime, warm pool and cold, against the STAND-IN
#                                  API server and process kubelet of the tests (not a
#                                  cluster: sandboxd's side only; K8S_RUNS, default 100;
#                                  BENCH_K8S=0 leaves them out)
# All on this machine, in this run. Needs root (namespaces, cgroups) and a built
# tree (make). The Docker rows use the engine at DOCKER_HOST, or one started by
# scripts/dockerd.sh (and stopped at the end); docker.io must be installed
# (scripts/deps.sh). Environment: RUNS, DOCKER_RUNS (default RUNS), BENCH_DOCKER=0
# to leave Docker out, ACQUIRE_ONLY=k8s for the kubernetes rows alone.
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
  rm -rf "$OUT/state-warm" "$OUT/state-cold" "$OUT/state-dwarm" "$OUT/state-dcold" "$OUT/state-kwarm" "$OUT/state-kcold"
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

if [ "${ACQUIRE_ONLY:-}" != k8s ]; then
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
fi

# --- kubernetes runtime against the stand-in (tests/lib/k8s-cluster.mjs) ---
# sandboxd's own time in a create: the create's time (api "sandbox created"
# ms) less the waits on the cluster and on execd the runtime logs with it
# ("sandbox pod ready" cluster_ms, execd_ms), p50 over the creates of a kind
own_share() { # log how
  awk -v how="$2" '
    /msg="sandbox pod ready"/ && $0 ~ ("how=" how " ") {
      id = ""; c = ""; e = ""
      for (i = 1; i <= NF; i++) {
        if ($i ~ /^id=/) id = substr($i, 4)
        if ($i ~ /^cluster_ms=/) c = substr($i, 12)
        if ($i ~ /^execd_ms=/) e = substr($i, 10)
      }
      wait_ms[id] = c + e; cl[id] = c; ex[id] = e
    }
    /msg="sandbox created"/ {
      id = ""; ms = ""
      for (i = 1; i <= NF; i++) {
        if ($i ~ /^id=/) id = substr($i, 4)
        if ($i ~ /^ms=/) ms = substr($i, 4)
      }
      if (id in wait_ms) { n++; own[n] = ms - wait_ms[id]; cm[n] = cl[id]; em[n] = ex[id] }
    }
    function p50(a, k,   i, j, t) {
      for (i = 2; i <= k; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
      return a[int((k + 1) / 2)]
    }
    END {
      if (!n) { printf "%-34s no creates logged\n", "  sandboxd own, " how; exit }
      printf "%-34s %5d %9.2f  p50 of create less the waits (cluster %.2f, execd %.2f)\n", \
        "  sandboxd own, " how, n, p50(own, n), p50(cm, n), p50(em, n)
    }' "$1"
}
k8s_rows() {
  local runs=${K8S_RUNS:-100}
  if [ "${BENCH_K8S:-1}" = 0 ] || ! command -v node >/dev/null; then
    for l in "tusko-sandboxd k8s stand-in, warm" "tusko-sandboxd k8s stand-in, cold"; do
      printf '%-34s %s\n' "$l" "skipped (BENCH_K8S=0 or no node)"
    done
    return
  fi
  rm -f "$OUT/k8s.env"
  TUSKO_BUILD=$BUILD node bench/acquire/k8s-standin.mjs "$OUT/k8s.env" >"$OUT/k8s-standin.log" 2>&1 &
  local standin=$!
  pids+=($standin)
  for _ in $(seq 600); do [ -s "$OUT/k8s.env" ] && break; sleep 0.05; done
  local kenv=()
  mapfile -t kenv <"$OUT/k8s.env"
  # the bench asks for 512Mi: the default, so a warm pod fits the request
  start_sandboxd kwarm 0 "${kenv[@]}" K8S_SANDBOX_WARM_POOL_SIZE=2 SANDBOX_DEFAULT_MEMORY=512Mi K8S_SANDBOX_INSTANCE=bench-warm
  ACQUIRE_POOL_WAIT_MS=400 "$OUT/acquire" sandboxd "$URL" "$KEY" 3 "(warm-up)" warm >/dev/null
  ACQUIRE_POOL_WAIT_MS=400 "$OUT/acquire" sandboxd "$URL" "$KEY" "$runs" "tusko-sandboxd k8s stand-in, warm" warm
  kill "${pids[-1]}" && wait "${pids[-1]}" 2>/dev/null
  own_share "$OUT/sandboxd-kwarm.log" warm
  start_sandboxd kcold 0 "${kenv[@]}" K8S_SANDBOX_WARM_POOL_SIZE=0 SANDBOX_DEFAULT_MEMORY=512Mi K8S_SANDBOX_POOL=cold K8S_SANDBOX_INSTANCE=bench-cold
  "$OUT/acquire" sandboxd "$URL" "$KEY" 3 "(warm-up)" cold >/dev/null
  "$OUT/acquire" sandboxd "$URL" "$KEY" "$runs" "tusko-sandboxd k8s stand-in, cold" cold
  kill "${pids[-1]}" && wait "${pids[-1]}" 2>/dev/null
  own_share "$OUT/sandboxd-kcold.log" cold
  kill "$standin" && wait "$standin" 2>/dev/null
  echo "(k8s rows: the stand-in API server and process kubelet of the tests, not a cluster —"
  echo " sandboxd's side of an acquire; a real cluster adds its API latency, scheduling and pod start)"
}
k8s_rows
echo
echo "targets: warm p50 ≤ 5 ms, cold p50 ≤ 30 ms (measured, never asserted)"
