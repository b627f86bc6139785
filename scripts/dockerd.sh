#!/usr/bin/env bash
# scripts/dockerd.sh — a Docker engine for the tests and benchmarks of the docker
# runtime, started here when none runs (CI has none). Installs nothing
# (scripts/deps.sh installs docker.io).
#
#   scripts/dockerd.sh start   prints "<DOCKER_HOST> <0|1>": the engine at
#                              DOCKER_HOST when it is set (it must answer), else
#                              ours — running already (0) or started now (1).
#                              Exit 1 with the reason on stderr if none can be.
#
# Without DOCKER_HOST the machine's default engine (/var/run/docker.sock) is not
# used: on a shared machine it may be someone else's, stopped in the middle of a
# run (seen here: a benchmark starting and stopping dockerd there).
#   scripts/dockerd.sh stop    removes the containers and volumes labelled
#                              io.tusko.sandboxd from ours, then stops it.
#
# Ours: data under $TUSKO_VAR/docker (default <repo>/var/docker; images are kept
# between runs), socket, pid file and run state under /run/tusko-docker-<hash of
# the checkout's path> (short: containerd's sockets live there), and
# --iptables=false --ip6tables=false --bridge=none: sandboxes run with network
# "none", so neither a bridge nor NAT nor iptables is needed (iptables may be
# missing or fail in a container or VM).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd -P)
run=/run/tusko-docker-$(printf %s "$root" | sha256sum | cut -c1-8)
data=${TUSKO_VAR:-$root/var}/docker
ours=unix://$run/docker.sock
log=${TUSKO_TEST_OUT:-$root/var/log}/dockerd.log

answers() { docker -H "$1" version --format '{{.Server.Version}}' >/dev/null 2>&1; }

case "${1:-}" in
start)
  if ! command -v dockerd >/dev/null || ! command -v docker >/dev/null; then
    echo "dockerd.sh: docker.io is not installed (scripts/deps.sh installs it)" >&2
    exit 1
  fi
  if [ -n "${DOCKER_HOST:-}" ]; then
    if answers "$DOCKER_HOST"; then echo "$DOCKER_HOST 0"; exit 0; fi
    echo "dockerd.sh: no Docker engine answers at DOCKER_HOST=$DOCKER_HOST (unset it to use one started here)" >&2
    exit 1
  fi
  if answers "$ours"; then echo "$ours 0"; exit 0; fi
  mkdir -p "$run" "$data" "$(dirname "$log")"
  if [ -s "$run/docker.pid" ] && kill -0 "$(cat "$run/docker.pid")" 2>/dev/null; then
    # ours, left by an interrupted run and not answering: stop it first
    kill "$(cat "$run/docker.pid")"
    for _ in $(seq 100); do kill -0 "$(cat "$run/docker.pid")" 2>/dev/null || break; sleep 0.1; done
  fi
  (dockerd --data-root "$data" --exec-root "$run/exec" --pidfile "$run/docker.pid" -H "$ours" \
    --iptables=false --ip6tables=false --bridge=none --log-level=warn >"$log" 2>&1 &)
  for _ in $(seq 300); do
    if answers "$ours"; then echo "$ours 1"; exit 0; fi
    sleep 0.1
  done
  echo "dockerd.sh: dockerd did not answer within 30 s (see $log): $(grep -iE 'level=(fatal|error)' "$log" | tail -1 | cut -c1-200)" >&2
  exit 1
  ;;
stop)
  [ -s "$run/docker.pid" ] || exit 0
  if answers "$ours"; then
    docker -H "$ours" ps -aq --filter label=io.tusko.sandboxd | xargs -r docker -H "$ours" rm -f >/dev/null
    docker -H "$ours" volume ls -q --filter label=io.tusko.sandboxd | xargs -r docker -H "$ours" volume rm -f >/dev/null
  fi
  pid=$(cat "$run/docker.pid")
  kill "$pid" 2>/dev/null
  for _ in $(seq 200); do kill -0 "$pid" 2>/dev/null || exit 0; sleep 0.1; done
  echo "dockerd.sh: dockerd ($pid) did not stop within 20 s" >&2
  exit 1
  ;;
*)
  echo "usage: scripts/dockerd.sh start|stop" >&2
  exit 2
  ;;
esac
