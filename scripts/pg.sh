#!/usr/bin/env bash
# pg.sh — a private Postgres cluster in a folder, touching no system service.
#
#   scripts/pg.sh start [--unsafe-fast] DIR [PORT]
#                                    initdb on first use, start, create role and
#                                    database "tusko"; PORT 0 (default) means
#                                    unix socket only. Prints the DATABASE_URL.
#   scripts/pg.sh stop DIR           fast shutdown
#   scripts/pg.sh url DIR            print the DATABASE_URL of a running cluster
#   scripts/pg.sh status DIR         exit 0 when running
#   scripts/pg.sh mode DIR           print how the running cluster was started:
#                                    "durable" or "unsafe-fast"
#
# Durability: by default the cluster runs on Postgres's own durable settings
# (fsync, synchronous_commit and full_page_writes on): a commit Postgres
# acknowledged survives a crash of Postgres, of the machine or a power cut (as
# far as the disk keeps its promises). `make run` uses this.
#
# --unsafe-fast turns all three off. UNSAFE: a crash of the machine or a power
# cut can then lose acknowledged commits or corrupt the whole cluster (a crash
# of Postgres alone loses nothing, the OS still has the pages). Only for
# throwaway clusters whose data nobody needs: the test harness (tests/run.sh,
# tests/lib/harness.mjs) and benchmarks that ask for it choose it explicitly.
#
# Postgres refuses to run as root; as root the cluster belongs to the "postgres"
# system user (created by Debian's postgresql package). The socket lives in
# DIR/run. Local socket connections are trusted (the folder is private to the
# cluster's owner and root); TCP on 127.0.0.1 needs the generated password in
# DIR/password.
set -euo pipefail

PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
cmd=${1:-}
shift || true
mode=durable
if [ "$cmd" = start ] && [ "${1:-}" = --unsafe-fast ]; then
  mode=unsafe-fast
  shift
fi
dir=${1:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { sed -n '2,34p' "$0"; exit 2; }
[ -x "$PGBIN/initdb" ] || { echo "pg.sh: Postgres 15 is not installed ($PGBIN/initdb missing); run scripts/deps.sh" >&2; exit 1; }
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
data=$dir/data
run=$dir/run

as_owner() {
  if [ "$(id -u)" = 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

url() {
  local port
  port=$(cat "$dir/port" 2>/dev/null || echo 0)
  # libpq URL with the socket folder as host (percent-encoded path)
  local enc
  enc=$(printf '%s' "$run" | sed 's|/|%2F|g')
  echo "postgresql://tusko@$enc:${port/#0/5432}/tusko"
}

# the settings of each mode (a durable cluster is given none: Postgres's defaults)
mode_opts() {
  case "$1" in
  durable) echo "" ;;
  unsafe-fast) echo "-c fsync=off -c synchronous_commit=off -c full_page_writes=off" ;;
  esac
}

case "$cmd" in
start)
  port=${2:-0}
  if [ "$(id -u)" = 0 ]; then
    id postgres >/dev/null 2>&1 || { echo "pg.sh: no 'postgres' user; install postgresql-15 (scripts/deps.sh)" >&2; exit 1; }
    chown postgres: "$dir"
    # The postgres user must reach DIR: a checkout under a private folder (root's
    # home is 0700) gets an ACL entry letting that user pass through each such
    # folder (x only: it still cannot list or read them).
    if ! runuser -u postgres -- test -x "$dir"; then
      command -v setfacl >/dev/null || { echo "pg.sh: the postgres user cannot reach $dir and setfacl is missing (install acl: scripts/deps.sh)" >&2; exit 1; }
      a=""
      IFS=/ read -ra parts <<<"${dir#/}"
      for p in "${parts[@]}"; do
        a=$a/$p
        if ! runuser -u postgres -- test -x "$a"; then
          echo "pg.sh: letting the postgres user pass through $a (setfacl -m u:postgres:x; it cannot list it)" >&2
          setfacl -m u:postgres:x "$a"
        fi
      done
    fi
  fi
  chmod 700 "$dir"
  if [ ! -f "$data/PG_VERSION" ]; then
    echo "pg.sh: creating a new cluster in $data" >&2
    head -c 18 /dev/urandom | base64 | tr -d '/+=' >"$dir/password"
    [ "$(id -u)" = 0 ] && chown postgres: "$dir/password"
    chmod 600 "$dir/password"
    as_owner "$PGBIN/initdb" -D "$data" -U postgres --auth-local=trust --auth-host=scram-sha-256 \
      -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; exit 1; }
  fi
  if as_owner "$PGBIN/pg_ctl" -D "$data" status >/dev/null 2>&1; then
    if [ "$(cat "$dir/mode" 2>/dev/null || echo unsafe-fast)" = "$mode" ]; then
      url
      exit 0
    fi
    # running in the other mode: restart it the way it was asked for
    echo "pg.sh: the cluster in $data runs $(cat "$dir/mode" 2>/dev/null || echo unsafe-fast); restarting it $mode" >&2
    as_owner "$PGBIN/pg_ctl" -D "$data" -m fast -w stop >/dev/null
  fi
  if [ "$mode" = unsafe-fast ]; then
    echo "pg.sh: UNSAFE fast settings (fsync, synchronous_commit, full_page_writes off) for $data: a machine crash can corrupt it; for tests and benchmarks only" >&2
  fi
  mkdir -p "$run"
  [ "$(id -u)" = 0 ] && chown postgres: "$run"
  chmod 700 "$run"
  echo "$port" >"$dir/port"
  listen=""
  [ "$port" != 0 ] && listen="127.0.0.1"
  as_owner "$PGBIN/pg_ctl" -D "$data" -l "$dir/postgres.log" -w -t 60 \
    -o "-c listen_addresses='$listen' -p ${port/#0/5432} -c unix_socket_directories='$run' -c max_connections=300 $(mode_opts "$mode")" \
    start >/dev/null || { tail -20 "$dir/postgres.log" >&2; exit 1; }
  echo "$mode" >"$dir/mode"
  sock_port=${port/#0/5432}
  export PGOPTIONS='-c client_min_messages=warning'
  psql=("$PGBIN/psql" -X -q -h "$run" -p "$sock_port" -U postgres -d postgres -v ON_ERROR_STOP=1)
  pw=$(cat "$dir/password")
  as_owner "${psql[@]}" >/dev/null <<SQL
SELECT 'CREATE ROLE tusko LOGIN' WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'tusko') \gexec
ALTER ROLE tusko PASSWORD '$pw' CREATEDB;
SELECT 'CREATE DATABASE tusko OWNER tusko' WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = 'tusko') \gexec
SQL
  as_owner "${psql[@]}" -d tusko -c "CREATE EXTENSION IF NOT EXISTS pg_trgm" >/dev/null
  url
  ;;
stop)
  if [ -f "$data/PG_VERSION" ]; then
    as_owner "$PGBIN/pg_ctl" -D "$data" -m fast -w stop >/dev/null 2>&1 || true
  fi
  ;;
url)
  url
  ;;
status)
  as_owner "$PGBIN/pg_ctl" -D "$data" status >/dev/null 2>&1
  ;;
mode)
  as_owner "$PGBIN/pg_ctl" -D "$data" status >/dev/null 2>&1 || { echo "pg.sh: no cluster runs in $data" >&2; exit 1; }
  cat "$dir/mode" 2>/dev/null || echo unsafe-fast
  ;;
*)
  echo "pg.sh: unknown command $cmd" >&2
  exit 2
  ;;
esac
