#!/usr/bin/env bash
# tests/integration/run_test.sh — `make run` (scripts/run.sh) as a user starts it.
#
# Starts the stack in a folder of its own (TUSKO_VAR) on free loopback ports, as
# its own process group the way a terminal runs it; checks that it says where to
# go, that the three services answer, that the first-run account signs in and
# execution is on, and that a sandbox can be started; then presses Ctrl-C (SIGINT
# to the whole process group, as a terminal does) and checks that the script
# says so and exits 0, that every process it started (services, sandboxes, the
# Postgres cluster) is gone, the ports are closed and no sandbox is left in the
# sandbox service's state. Needs root (the native sandbox runtime).
# Last line: "N passed, N failed".
set -uo pipefail
set -m # the stack gets its own process group, so SIGINT reaches it as from a terminal

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
cd "$repo" || exit 1
work=$(mktemp -d /tmp/tusko-run-test.XXXXXX)
out=$work/run.out
run_pid=

# shellcheck source=../lib/tap.sh
. "$repo/tests/lib/tap.sh"
cleanup() {
  if [[ -n $run_pid ]] && kill -0 "$run_pid" 2>/dev/null; then
    kill -INT -- "-$run_pid" 2>/dev/null
    for _ in $(seq 200); do kill -0 "$run_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$run_pid" 2>/dev/null
  fi
  scripts/pg.sh stop "$work/var/pg" >/dev/null 2>&1
  rm -rf --one-file-system "$work"
}
trap cleanup EXIT

if [[ $(id -u) != 0 ]]; then
  not_ok "the make run test needs root (the native sandbox runtime)"
  finish
fi
if [[ -z ${SANDBOX_IMAGE_DIR:-} || ! -d ${SANDBOX_IMAGE_DIR:-/nonexistent} ]]; then
  not_ok "SANDBOX_IMAGE_DIR names the sandbox image (tests/setup.d/10-sandbox-image.sh builds it)"
  finish
fi

free_port() {
  node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'
}
tusko_port=$(free_port) sandboxd_port=$(free_port) browserd_port=$(free_port)

# descendants PID: PID and every process below it
descendants() {
  local p=$1 c
  echo "$p"
  for c in $(cat /proc/"$p"/task/*/children 2>/dev/null); do descendants "$c"; done
}

# The settings a user's shell would not have; the image is the one the tests built.
env -u DATABASE_URL -u OPENSANDBOX_URL -u OPENSANDBOX_API_KEY -u SANDBOXD_API_KEY \
  -u BROWSERD_API_KEY -u TUSKO_MODELS -u SANDBOXD_STATE_DIR \
  TUSKO_VAR="$work/var" TUSKO_BUILD="${TUSKO_BUILD:-build/asan}" \
  TUSKO_LISTEN="127.0.0.1:$tusko_port" SANDBOXD_LISTEN="127.0.0.1:$sandboxd_port" \
  BROWSERD_LISTEN="127.0.0.1:$browserd_port" SANDBOX_WARM_POOL_SIZE=1 \
  SANDBOX_IMAGE_DIR="$SANDBOX_IMAGE_DIR" \
  scripts/run.sh >"$out" 2>&1 &
run_pid=$!

for _ in $(seq 1200); do
  grep -q 'Press Ctrl-C to stop everything' "$out" && break
  kill -0 "$run_pid" 2>/dev/null || break
  sleep 0.1
done
if grep -q "Tusko is running: open http://127.0.0.1:$tusko_port/" "$out" &&
  grep -q 'Press Ctrl-C to stop everything' "$out"; then
  ok "make run starts the stack and prints where to go"
else
  not_ok "make run starts the stack and prints where to go" "$(cat "$out" "$work"/var/log/*.log 2>/dev/null)"
  finish
fi
# the test's folder is 0700, as root's home is: Postgres (run as its own user) gets through
grep -q "letting the postgres user pass through $work " "$out" && getfacl -p "$work" 2>/dev/null | grep -q '^user:postgres:--x' &&
  ok "a private folder above var/ gets an ACL entry for the postgres user (x only)" ||
  not_ok "a private folder above var/ gets an ACL entry for the postgres user (x only)" "$(head -5 "$out"; getfacl -p "$work" 2>&1)"
grep -q 'created the account admin@localhost' "$out" &&
  ok "the first run creates admin@localhost" || not_ok "the first run creates admin@localhost" "$(cat "$out")"
grep -q 'No model is configured yet, so chat is off' "$out" &&
  ok "without TUSKO_MODELS it says chat is off and how to turn it on" ||
  not_ok "without TUSKO_MODELS it says chat is off and how to turn it on" "$(cat "$out")"

for p in "$tusko_port" "$sandboxd_port" "$browserd_port"; do
  if r=$(curl -fsS -m 5 "http://127.0.0.1:$p/healthz" 2>&1) && grep -q '"ok"' <<<"$r"; then
    ok "127.0.0.1:$p answers /healthz"
  else
    not_ok "127.0.0.1:$p answers /healthz" "$r"
  fi
done

jar=$work/cookies
pw=$(cat "$work/var/secrets/admin_password" 2>/dev/null)
body=$(node -e 'console.log(JSON.stringify({email: "admin@localhost", password: process.argv[1]}))' "$pw")
if r=$(curl -fsS -m 10 -c "$jar" -H 'Content-Type: application/json' -d "$body" \
  "http://127.0.0.1:$tusko_port/api/auth/login" 2>&1) && grep -q '"admin@localhost"' <<<"$r"; then
  ok "admin@localhost signs in with the password in var/secrets/admin_password"
else
  not_ok "admin@localhost signs in with the password in var/secrets/admin_password" "$r"
fi
if r=$(curl -fsS -m 5 -b "$jar" "http://127.0.0.1:$tusko_port/api/me" 2>&1) &&
  node -e 'process.exit(JSON.parse(process.argv[1]).execution.enabled === true ? 0 : 1)' "$r"; then
  ok "execution is on: tusko was given the local sandbox service"
else
  not_ok "execution is on: tusko was given the local sandbox service" "$r"
fi

key=$(cat "$work/var/secrets/sandboxd_api_key" 2>/dev/null)
sbx=http://127.0.0.1:$sandboxd_port/v1/sandboxes
r=$(curl -sS -m 30 -H "OPEN-SANDBOX-API-KEY: $key" -H 'Content-Type: application/json' \
  -d '{"image":{"uri":"tusko-sandbox"},"entrypoint":["tail","-f","/dev/null"],"timeout":600,"resourceLimits":{}}' \
  "$sbx" 2>&1)
sid=$(node -e 'try { console.log(JSON.parse(process.argv[1]).id || "") } catch { console.log("") }' "$r")
if [[ -n $sid ]]; then ok "a sandbox starts (the key in var/secrets/sandboxd_api_key)"; else not_ok "a sandbox starts" "$r"; fi

pg_pid=$(head -1 "$work/var/pg/postmaster.pid" 2>/dev/null)
before=$(
  descendants "$run_pid"
  [[ -n $pg_pid ]] && descendants "$pg_pid"
)
n_before=$(wc -w <<<"$before")
# the services, the pool's and the started sandbox's processes, Postgres
if ((n_before >= 8)); then ok "the stack's processes are found ($n_before)"; else not_ok "the stack's processes are found" "$before"; fi

kill -INT -- "-$run_pid" # Ctrl-C
rc=timeout
for _ in $(seq 600); do
  if ! kill -0 "$run_pid" 2>/dev/null; then
    wait "$run_pid"
    rc=$?
    break
  fi
  sleep 0.1
done
if [[ $rc == 0 ]] && grep -q 'stopped; nothing left running' "$out"; then
  ok "Ctrl-C stops it: it says so and exits 0"
else
  not_ok "Ctrl-C stops it: it says so and exits 0" "exit: $rc; $(tail -20 "$out")"
fi
grep -q 'ended [0-9]* sandbox' "$out" && ok "it ends the sandboxes it started" ||
  not_ok "it ends the sandboxes it started" "$(tail -20 "$out")"

left=
for p in $before; do
  [[ -d /proc/$p ]] && left+="$p $(tr '\0' ' ' </proc/"$p"/cmdline 2>/dev/null)"$'\n'
done
if [[ -z $left ]]; then ok "no process of the stack is left"; else not_ok "no process of the stack is left" "$left"; fi

open=
for p in "$tusko_port" "$sandboxd_port" "$browserd_port"; do
  ss -Hltn "sport = :$p" | grep -q . && open+=" $p"
done
if [[ -z $open ]]; then ok "its ports are closed"; else not_ok "its ports are closed" "still listening:$open"; fi

recs=$(find "$work/var/sandboxd/sandboxes" -name sandbox.json 2>/dev/null)
if [[ -z $recs ]]; then ok "no sandbox is left in the sandbox service's state"; else not_ok "no sandbox is left in the sandbox service's state" "$recs"; fi
finish
