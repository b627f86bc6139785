#!/usr/bin/env bash
# run.sh — `make run`: starts the whole stack on this machine and stops it all on
# Ctrl-C. Everything lives under var/ (or $TUSKO_VAR): the Postgres cluster,
# generated secrets, logs and the sandbox image.
#
# Settings come from the environment and from a .env file at the root (see
# .env.example). What run.sh provides when unset:
#   DATABASE_URL          the private cluster in var/pg
#   SANDBOXD_API_KEY      generated once into var/secrets/, shared with tusko as
#                         OPENSANDBOX_API_KEY (with OPENSANDBOX_URL pointing at
#                         the local tusko-sandboxd)
#   BROWSERD_API_KEY      likewise, as STEEL_API_KEY with STEEL_URL
#   TUSKO_DATA_DIR        var/data (files tusko keeps outside Postgres)
#   BROWSERD_STATE_DIR    var/browserd (tusko-browserd's sessions and profiles)
#   BACKUP_DIR            var/backups: `tusko backup --schedule` runs beside the
#                         services and writes a backup there at BACKUP_SCHEDULE
#                         (03:00 every day; off: none), keeping BACKUP_KEEP (7)
#
# On the first run it creates a local account (admin@localhost, the password in
# var/secrets/admin_password) so there is someone to sign in as. On Ctrl-C it ends
# the sandboxes this stack started (their workspaces are scratch space; files the
# user downloaded are kept by tusko in Postgres), then every service.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
VAR=${TUSKO_VAR:-$ROOT/var}
BUILD=${TUSKO_BUILD:-$ROOT/build}
mkdir -p "$VAR/log" "$VAR/secrets"
chmod 700 "$VAR/secrets"

if [ -f .env ]; then
  set -a
  # shellcheck disable=SC1091
  . ./.env
  set +a
fi

# The output may be a pipe that closes while the stack runs (`make run | head`,
# a `tee` that was ended): a write must not kill this script by SIGPIPE — no
# trap runs then, and the services, each in a session of its own, would be
# left running — nor end it through set -e. SIGPIPE is ignored, and what the
# script says is said when it can be (a failed write is dropped); Ctrl-C stops
# everything as always.
trap '' PIPE
echo() { builtin echo "$@" 2>/dev/null || true; }
printf() { builtin printf "$@" 2>/dev/null || true; }
say() { printf '\033[1m%s\033[0m\n' "$*"; }
secret() { # name → a random secret kept in var/secrets/name
  local f=$VAR/secrets/$1
  [ -s "$f" ] || (umask 077 && head -c 24 /dev/urandom | base64 | tr -d '/+=' >"$f")
  cat "$f"
}

pids=()
stopping=0
stop_all() {
  [ "$stopping" = 1 ] && return
  stopping=1
  # Nothing may end the stop half-way. Under `make run | tee run.log` Ctrl-C
  # ends tee too, and the next write to stdout would kill this script by
  # SIGPIPE (or end it through set -e) before the services and sandboxes are
  # stopped: SIGPIPE is ignored, a failed write is only a failed write, and
  # what the stop says goes to stderr (the terminal, when stdout is a pipe).
  trap '' PIPE
  trap - INT TERM EXIT
  set +e
  exec 1>&2
  echo
  say "stopping…"
  end_sandboxes
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill -TERM "${pids[$i]}" 2>/dev/null || true; done
  for p in "${pids[@]}"; do
    for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  scripts/pg.sh stop "$VAR/pg" || true
  say "stopped; nothing left running"
  exit 0
}
trap stop_all INT TERM EXIT

# Deletes every sandbox the local tusko-sandboxd holds, through its API.
end_sandboxes() {
  [ -n "${SANDBOXD_LISTEN:-}" ] && [ -n "${SANDBOXD_API_KEY:-}" ] || return 0
  local base=http://$SANDBOXD_LISTEN/v1 ids
  ids=$(curl -fsS -m 5 -H "OPEN-SANDBOX-API-KEY: $SANDBOXD_API_KEY" \
    "$base/sandboxes?state=Running&state=Paused&state=Pending&pageSize=200" 2>/dev/null |
    grep -oE '"id" *: *"[^"]+"' | sed -E 's/.*"([^"]+)"$/\1/') || return 0
  for id in $ids; do
    curl -fsS -m 10 -X DELETE -H "OPEN-SANDBOX-API-KEY: $SANDBOXD_API_KEY" "$base/sandboxes/$id" >/dev/null 2>&1 || true
  done
  [ -n "$ids" ] && echo "  ended $(echo "$ids" | wc -w) sandbox(es)"
  return 0
}

# start NAME ENV... — starts build/NAME with extra environment, waits for its
# "listening" line, prints where it is.
start() {
  local name=$1
  shift
  local log=$VAR/log/$name.log
  : >"$log"
  # a session of its own: Ctrl-C reaches only this script, which ends the
  # sandboxes through the sandbox service before it stops the services
  # (with SIGPIPE as it was: only this script ignores it)
  (trap - PIPE && exec setsid env "$@" "$BUILD/$name") >>"$log" 2>&1 &
  local pid=$!
  pids+=("$pid")
  for _ in $(seq 300); do
    if grep -q 'msg="listening"' "$log"; then
      local url
      url=$(grep -o 'msg="listening" url=[^ ]*' "$log" | head -1 | sed 's/.*url=//')
      printf '  %-16s %s  (log: %s)\n' "$name" "$url" "${log#"$ROOT"/}"
      return 0
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "$name failed to start:" >&2
      tail -20 "$log" >&2
      return 1
    fi
    sleep 0.1
  done
  echo "$name did not start within 30 s; see $log" >&2
  return 1
}

say "Postgres (${VAR#"$ROOT"/}/pg)"
pg_url=$(scripts/pg.sh start "$VAR/pg")
export DATABASE_URL=${DATABASE_URL:-$pg_url}

if [ -x images/sandbox/build.sh ]; then
  say "sandbox image"
  SANDBOX_IMAGE_DIR=${SANDBOX_IMAGE_DIR:-$(TUSKO_VAR=$VAR images/sandbox/build.sh --print-path)}
  export SANDBOX_IMAGE_DIR
fi

export SANDBOXD_API_KEY=${SANDBOXD_API_KEY:-$(secret sandboxd_api_key)}
export BROWSERD_API_KEY=${BROWSERD_API_KEY:-$(secret browserd_api_key)}
SANDBOXD_LISTEN=${SANDBOXD_LISTEN:-127.0.0.1:8081}
BROWSERD_LISTEN=${BROWSERD_LISTEN:-127.0.0.1:8082}
TUSKO_LISTEN=${TUSKO_LISTEN:-127.0.0.1:8080}

say "services"
start tusko-sandboxd SANDBOXD_LISTEN="$SANDBOXD_LISTEN" SANDBOXD_STATE_DIR="${SANDBOXD_STATE_DIR:-$VAR/sandboxd}" \
  SANDBOX_EXECD_PATH="${SANDBOX_EXECD_PATH:-$BUILD/tusko-execd}"
BROWSERD_STATE_DIR=${BROWSERD_STATE_DIR:-$VAR/browserd}
start tusko-browserd BROWSERD_LISTEN="$BROWSERD_LISTEN" BROWSERD_STATE_DIR="$BROWSERD_STATE_DIR"
export OPENSANDBOX_URL=${OPENSANDBOX_URL:-http://$SANDBOXD_LISTEN}
export OPENSANDBOX_API_KEY=${OPENSANDBOX_API_KEY:-$SANDBOXD_API_KEY}
export STEEL_URL=${STEEL_URL:-http://$BROWSERD_LISTEN}
export STEEL_API_KEY=${STEEL_API_KEY:-$BROWSERD_API_KEY}
export TUSKO_DATA_DIR=${TUSKO_DATA_DIR:-$VAR/data}
export BACKUP_DIR=${BACKUP_DIR:-$VAR/backups}
BACKUP_SCHEDULE=${BACKUP_SCHEDULE:-03:00}
export BACKUP_SCHEDULE
build_tusko() { env TUSKO_LISTEN="$TUSKO_LISTEN" "$BUILD/tusko" "$@"; }
build_tusko migrate >>"$VAR/log/tusko.log" 2>&1 || { echo "tusko migrate failed; see var/log/tusko.log" >&2; exit 1; }
if [ ! -s "$VAR/secrets/admin_password" ]; then
  pw=$(secret admin_password)
  if printf '%s\n' "$pw" | build_tusko user add --email admin@localhost --password-stdin --admin >>"$VAR/log/tusko.log" 2>&1; then
    say "created the account admin@localhost, an admin (password in ${VAR#"$ROOT"/}/secrets/admin_password)"
  else
    echo "note: could not create admin@localhost (it may exist already); see var/log/tusko.log"
  fi
fi
start tusko TUSKO_LISTEN="$TUSKO_LISTEN"
if [ "$BACKUP_SCHEDULE" != off ]; then
  # scheduled backups: a process of its own, stopped with the services
  log=$VAR/log/tusko-backup.log
  : >"$log"
  (trap - PIPE && exec setsid "$BUILD/tusko" backup --schedule) >>"$log" 2>&1 &
  pids+=("$!")
  printf '  %-16s %s  (log: %s)\n' backups "$BACKUP_SCHEDULE into ${BACKUP_DIR#"$ROOT"/}, keeping ${BACKUP_KEEP:-7}" "${log#"$ROOT"/}"
fi

echo
say "Tusko is running: open http://$TUSKO_LISTEN/"
echo "  sign in as admin@localhost with the password in ${VAR#"$ROOT"/}/secrets/admin_password"
echo "  (more accounts: build/tusko user add --email you@example.com --password-stdin)"
if [ -z "${TUSKO_MODELS:-}" ]; then
  echo
  say "No model is configured yet, so chat is off."
  echo "  Set TUSKO_MODELS and a provider in .env (see .env.example), e.g. any OpenAI-compatible"
  echo "  endpoint: OPENAI_BASE_URL=http://127.0.0.1:11434/v1 (Ollama), OPENAI_API_KEY=..., "
  echo "  TUSKO_MODELS=openai:llama3.1 — or ANTHROPIC_API_KEY=... with TUSKO_MODELS=anthropic:<model>."
fi
echo
echo "Press Ctrl-C to stop everything."
wait -n "${pids[@]}" || true
echo "a service exited unexpectedly; see var/log/" >&2
exit 1
