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
# sandbox service's state. Its Postgres runs on the durable defaults.
# Then once more as `make run | tee run.log` (the same folder): Ctrl-C there
# ends tee as well, and the stop must still end the sandboxes and every
# process, saying so on stderr; that run takes a backup every 2 s
# (BACKUP_SCHEDULE=2s) and keeps the newest two (BACKUP_KEEP=2) in
# var/backups, and the first says it backs up at 03:00 by default. And once
# more as `make run | head -c 1`: the pipe closes at the first line, the script
# must not die of SIGPIPE (which would leave the services running) but start
# the stack, keep it running and stop it all on Ctrl-C. Needs root (the native
# sandbox runtime).
# Last line: "N passed, N failed".
set -uo pipefail
set -m # the stack gets its own process group, so SIGINT reaches it as from a terminal

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
cd "$repo" || exit 1
work=$(mktemp -d /tmp/tusko-run-test.XXXXXX)
out=$work/run.out
run_pid=
tee_pid=
before=

# shellcheck source=../lib/tap.sh
. "$repo/tests/lib/tap.sh"
cleanup() {
  if [[ -n $run_pid ]] && kill -0 "$run_pid" 2>/dev/null; then
    kill -INT -- "-$run_pid" 2>/dev/null
    for _ in $(seq 200); do kill -0 "$run_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$run_pid" 2>/dev/null
  fi
  [[ -n $tee_pid ]] && kill -KILL "$tee_pid" 2>/dev/null
  # a stop that failed leaves the stack running (its services are in sessions of
  # their own): end its sandboxes through the service, then its processes
  local key id p
  key=$(cat "$work/var/secrets/sandboxd_api_key" 2>/dev/null)
  for id in $(curl -fsS -m 5 -H "OPEN-SANDBOX-API-KEY: $key" "http://127.0.0.1:${sandboxd_port:-0}/v1/sandboxes" 2>/dev/null |
    grep -oE '"id" *: *"[^"]+"' | sed -E 's/.*"([^"]+)"$/\1/'); do
    curl -fsS -m 10 -X DELETE -H "OPEN-SANDBOX-API-KEY: $key" "http://127.0.0.1:$sandboxd_port/v1/sandboxes/$id" >/dev/null 2>&1
  done
  for p in $before; do [[ -d /proc/$p ]] && kill -TERM "$p" 2>/dev/null; done
  sleep 1
  for p in $before; do [[ -d /proc/$p ]] && kill -KILL "$p" 2>/dev/null; done
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
stack_env=(env -u DATABASE_URL -u OPENSANDBOX_URL -u OPENSANDBOX_API_KEY -u SANDBOXD_API_KEY
  -u BROWSERD_API_KEY -u TUSKO_MODELS -u SANDBOXD_STATE_DIR
  TUSKO_VAR="$work/var" TUSKO_BUILD="${TUSKO_BUILD:-build/asan}"
  TUSKO_LISTEN="127.0.0.1:$tusko_port" SANDBOXD_LISTEN="127.0.0.1:$sandboxd_port"
  BROWSERD_LISTEN="127.0.0.1:$browserd_port" SANDBOX_WARM_POOL_SIZE=1
  SANDBOX_IMAGE_DIR="$SANDBOX_IMAGE_DIR")

# wait_ready FILE: until the stack says how to stop it (or run.sh ends)
wait_ready() {
  for _ in $(seq 1200); do
    grep -q "Press Ctrl-C to stop everything" "$1" 2>/dev/null && return 0
    kill -0 "$run_pid" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

# start_sandbox: a sandbox through the service's API (the key in var/secrets); prints its id
start_sandbox() {
  local key r
  key=$(cat "$work/var/secrets/sandboxd_api_key" 2>/dev/null)
  r=$(curl -sS -m 30 -H "OPEN-SANDBOX-API-KEY: $key" -H 'Content-Type: application/json' \
    -d '{"image":{"uri":"tusko-sandbox"},"entrypoint":["tail","-f","/dev/null"],"timeout":600,"resourceLimits":{}}' \
    "http://127.0.0.1:$sandboxd_port/v1/sandboxes" 2>&1)
  node -e 'try { console.log(JSON.parse(process.argv[1]).id || "") } catch { console.log("") }' "$r"
}

# stack_processes: run.sh and everything below it, and the Postgres cluster
stack_processes() {
  local pg_pid
  pg_pid=$(head -1 "$work/var/pg/data/postmaster.pid" 2>/dev/null)
  descendants "$run_pid"
  [[ -n $pg_pid ]] && descendants "$pg_pid"
}

# durable WHAT: the stack's Postgres runs on the durable defaults
durable() {
  local url r
  url=$(scripts/pg.sh url "$work/var/pg")
  if [[ $(scripts/pg.sh mode "$work/var/pg" 2>&1) == durable ]] &&
    r=$(/usr/lib/postgresql/15/bin/psql -X -At "$url" -c 'SHOW fsync' -c 'SHOW synchronous_commit' -c 'SHOW full_page_writes' 2>&1) &&
    [[ $(tr '\n' ' ' <<<"$r") == "on on on " ]]; then
    ok "$1: its Postgres runs durable (fsync, synchronous_commit, full_page_writes on)"
  else
    not_ok "$1: its Postgres runs durable (fsync, synchronous_commit, full_page_writes on)" "$(scripts/pg.sh mode "$work/var/pg" 2>&1); $r"
  fi
}

# stopped WHAT BEFORE: nothing of BEFORE is left, the ports are closed, no sandbox record
stopped() {
  local what=$1 before=$2 left="" open="" p recs
  # (a process that has exited may take a moment to be reaped by pid 1)
  for _ in $(seq 50); do
    left=""
    for p in $before; do
      [[ -d /proc/$p ]] && left+="$p $(cut -d' ' -f3 /proc/"$p"/stat 2>/dev/null) $(tr '\0' ' ' 2>/dev/null </proc/"$p"/cmdline)"$'\n'
    done
    [[ -z $left ]] && break
    sleep 0.1
  done
  if [[ -z $left ]]; then ok "$what: no process of the stack is left"; else not_ok "$what: no process of the stack is left" "$left"; fi
  for p in "$tusko_port" "$sandboxd_port" "$browserd_port"; do
    ss -Hltn "sport = :$p" | grep -q . && open+=" $p"
  done
  if [[ -z $open ]]; then ok "$what: its ports are closed"; else not_ok "$what: its ports are closed" "still listening:$open"; fi
  recs=$(find "$work/var/sandboxd/sandboxes" -name sandbox.json 2>/dev/null)
  if [[ -z $recs ]]; then ok "$what: no sandbox is left in the sandbox service's state"; else not_ok "$what: no sandbox is left in the sandbox service's state" "$recs"; fi
}

# ctrl_c WHAT FILE: SIGINT to the stack's process group, as a terminal's Ctrl-C;
# run.sh (and tee) must end, run.sh with status 0 saying so in FILE, having
# ended its sandboxes and left nothing of $before
ctrl_c() {
  local what=$1 file=$2 rc=timeout
  kill -INT -- "-$run_pid"
  for _ in $(seq 600); do
    if ! kill -0 "$run_pid" 2>/dev/null && { [[ -z $tee_pid ]] || ! kill -0 "$tee_pid" 2>/dev/null; }; then
      rc=$(cat "$work/rc" 2>/dev/null)
      break
    fi
    sleep 0.1
  done
  if [[ $rc == 0 ]] && grep -q 'stopped; nothing left running' "$file"; then
    ok "$what: Ctrl-C stops it: it says so and exits 0"
  else
    not_ok "$what: Ctrl-C stops it: it says so and exits 0" "exit: $rc; $(tail -20 "$file")"
  fi
  grep -q 'ended [0-9]* sandbox' "$file" && ok "$what: it ends the sandboxes it started" ||
    not_ok "$what: it ends the sandboxes it started" "$(tail -20 "$file")"
  stopped "$what" "$before"
}

# (the group's leader is a subshell that writes run.sh's exit status to $work/rc)
{
  "${stack_env[@]}" scripts/run.sh >"$out" 2>&1
  echo $? >"$work/rc"
} &
run_pid=$!

wait_ready "$out"
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

sid=$(start_sandbox)
if [[ -n $sid ]]; then ok "a sandbox starts (the key in var/secrets/sandboxd_api_key)"; else not_ok "a sandbox starts"; fi
durable "make run"
grep -qE '^  backups +03:00 into .*var/backups, keeping 7' "$out" &&
  ok "make run takes a nightly backup by default and says where" || not_ok "make run takes a nightly backup by default and says where" "$(cat "$out")"

before=$(stack_processes)
n_before=$(wc -w <<<"$before")
# the services, the pool's and the started sandbox's processes, Postgres
if ((n_before >= 8)); then ok "the stack's processes are found ($n_before)"; else not_ok "the stack's processes are found" "$before"; fi

ctrl_c "make run" "$out"

# --- make run | tee run.log, then Ctrl-C: tee ends at once, the stop must not ---
tee_out=$work/tee.out tee_err=$work/tee.err
run_pid=
rm -f "$work/rc"
{
  "${stack_env[@]}" BACKUP_SCHEDULE=2s BACKUP_KEEP=2 scripts/run.sh 2>"$tee_err"
  echo $? >"$work/rc"
} | tee "$tee_out" >/dev/null &
tee_pid=$!
run_pid=$(jobs -p %+) # the pipeline's process group, led by the subshell around run.sh
if wait_ready "$tee_out"; then
  ok "make run | tee: it starts"
else
  not_ok "make run | tee: it starts" "$(cat "$tee_out" "$tee_err" "$work"/var/log/*.log 2>/dev/null)"
  finish
fi
sid=$(start_sandbox)
[[ -n $sid ]] && ok "make run | tee: a sandbox starts" || not_ok "make run | tee: a sandbox starts"
durable "make run | tee"
# scheduled backups: after a few rounds, only the newest two are kept, each a
# whole archive (the manifest first, then the dump)
for _ in $(seq 150); do
  grep -q 'old backup deleted' "$work/var/log/tusko-backup.log" 2>/dev/null && break
  sleep 0.1
done
sleep 0.5
backups=$(find "$work/var/backups" -maxdepth 1 -name 'tusko-*.tar' 2>/dev/null | sort)
first=$(head -1 <<<"$backups")
if [[ $(wc -l <<<"$backups") == 2 ]] && grep -q 'old backup deleted' "$work/var/log/tusko-backup.log" &&
  [[ $(tar -tf "$first" 2>&1 | head -2 | tr '\n' ' ') == "manifest.json database.dump " ]]; then
  ok "make run: scheduled backups into var/backups, the newest BACKUP_KEEP kept"
else
  not_ok "make run: scheduled backups into var/backups, the newest BACKUP_KEEP kept" "$backups; $(tail -5 "$work/var/log/tusko-backup.log" 2>&1)"
fi
before=$(stack_processes)
ctrl_c "make run | tee" "$tee_err" # SIGINT to run.sh and tee alike

# --- make run | head -c 1: the pipe closes at its first line; it must go on ---
head_err=$work/head.err
tee_pid=
rm -f "$work/rc"
{
  "${stack_env[@]}" BACKUP_SCHEDULE=off scripts/run.sh 2>"$head_err"
  echo $? >"$work/rc"
} | head -c 1 >/dev/null &
run_pid=$(jobs -p %+)
up=
for _ in $(seq 1200); do
  curl -fsS -m 2 "http://127.0.0.1:$tusko_port/healthz" >/dev/null 2>&1 && { up=1; break; }
  [[ -e $work/rc ]] && break
  sleep 0.1
done
sleep 1 # (anything it says after starting tusko meets the closed pipe)
if [[ -n $up && ! -e $work/rc ]]; then
  ok "make run | head -c 1: the closed pipe does not end it; the stack starts and keeps running"
else
  not_ok "make run | head -c 1: the closed pipe does not end it; the stack starts and keeps running" \
    "exit: $(cat "$work/rc" 2>/dev/null); $(cat "$head_err" "$work"/var/log/tusko.log 2>/dev/null | tail -20)"
fi
sid=$(start_sandbox)
[[ -n $sid ]] && ok "make run | head -c 1: a sandbox starts" || not_ok "make run | head -c 1: a sandbox starts"
before=$(stack_processes)
ctrl_c "make run | head -c 1" "$head_err"
finish
