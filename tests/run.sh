#!/usr/bin/env bash
# tests/run.sh — runs every test and ends with one line "N passed, N failed".
#
# Called by `make test` after the plain, sanitizer and fuzz builds. Sections:
#   unit         tests/unit/*/test_*.c, in build/ and in build/asan/ (ASan+UBSan);
#                tests/unit/web/*.test.mjs (node:test: the web UI's modules, no DOM)
#   integration  tests/integration/**/*.test.mjs (node:test) and *_test.sh, against
#                the sanitizer build of the programs; a sanitizer report in a
#                program's log fails the test that started it
#   e2e          tests/e2e/**/*.test.mjs (Playwright in Chromium), when present
#   fuzz         every libFuzzer target for FUZZ_SECONDS (default 10) each
#
# Services the tests need are started here and stopped at exit: a throwaway
# Postgres cluster (tests/out/pg) and whatever tests/setup.d/*.sh start (each is
# sourced in order and may call `at_exit "command"`).
# Environment: ONLY=unit|integration|e2e|fuzz runs one section; TEST_FILTER=regex
# limits integration/e2e files; FUZZ_SECONDS; TUSKO_BUILD (default build/asan).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
OUT=$ROOT/tests/out
mkdir -p "$OUT"
export TUSKO_TEST_OUT=$OUT
export TUSKO_BUILD=${TUSKO_BUILD:-build/asan}
export FUZZ_SECONDS=${FUZZ_SECONDS:-10}
ONLY=${ONLY:-}

total_pass=0
total_fail=0
summary=()
cleanups=()
at_exit() { cleanups+=("$1"); }
finish() {
  for ((i = ${#cleanups[@]} - 1; i >= 0; i--)); do eval "${cleanups[$i]}" >/dev/null 2>&1 || true; done
}
trap finish EXIT
trap 'exit 130' INT TERM

record() { # section pass fail
  total_pass=$((total_pass + $2))
  total_fail=$((total_fail + $3))
  summary+=("$(printf '%-12s %5d passed, %d failed' "$1" "$2" "$3")")
}

# "N passed, M failed" from the last such line of a file
counts() {
  local line
  line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$1" | tail -1)
  if [ -z "$line" ]; then echo "0 1"; return; fi
  echo "$line" | sed -E 's/^([0-9]+) passed, ([0-9]+) failed.*/\1 \2/'
}

section() { printf '\n=== %s ===\n' "$1"; }
want() { [ -z "$ONLY" ] || [ "$ONLY" = "$1" ]; }

# --- test dependencies (npm, pinned by tests/package-lock.json) ---
if [ ! -d tests/node_modules ] || [ tests/package-lock.json -nt tests/node_modules/.package-lock.json ]; then
  echo "installing test dependencies (npm ci in tests/)"
  (cd tests && npm ci --no-audit --no-fund --loglevel=error) || { echo "npm ci failed"; echo "0 passed, 1 failed"; exit 1; }
fi

# --- services ---
export TUSKO_TEST_PG_DIR=$OUT/pg
scripts/pg.sh stop "$TUSKO_TEST_PG_DIR" >/dev/null 2>&1
rm -rf "$TUSKO_TEST_PG_DIR"
# a throwaway cluster: the fast settings, unsafe for data anyone needs (scripts/pg.sh)
if ! TK_TEST_DATABASE_URL=$(scripts/pg.sh start --unsafe-fast "$TUSKO_TEST_PG_DIR"); then
  echo "tests/run.sh: could not start Postgres"
  echo "0 passed, 1 failed"
  exit 1
fi
export TK_TEST_DATABASE_URL
at_exit "scripts/pg.sh stop '$TUSKO_TEST_PG_DIR'"
for s in tests/setup.d/*.sh; do
  [ -f "$s" ] || continue
  echo "setup: $s"
  # shellcheck disable=SC1090
  if ! source "$s"; then
    echo "setup $s failed"
    record "setup" 0 1
  fi
done

# --- unit ---
if want unit; then
  for b in build build/asan; do
    section "unit ($b)"
    p=0 f=0
    for t in $(find "$b/tests" -type f -perm -u+x -name 'test_*' 2>/dev/null | sort); do
      log=$OUT/unit-$(echo "$t" | tr / _).log
      timeout 600 "$t" >"$log" 2>&1
      rc=$?
      read -r tp tf < <(counts "$log")
      if [ "$rc" != 0 ] && [ "$tf" = 0 ]; then tf=1; fi
      if grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$log"; then tf=$((tf > 0 ? tf : 1)); fi
      printf '%-50s %s passed, %s failed\n' "$t" "$tp" "$tf"
      [ "$tf" != 0 ] && grep -E '^FAIL|^    ' "$log" | head -40
      p=$((p + tp)) f=$((f + tf))
    done
    record "unit${b#build}" "$p" "$f"
  done
fi

# --- integration / e2e (node:test) ---
node_section() { # name dir
  local name=$1 dir=$2
  [ -d "$dir" ] || return 0
  mapfile -t files < <(find "$dir" -name '*.test.mjs' | sort | grep -E "${TEST_FILTER:-.}")
  mapfile -t shells < <(find "$dir" -name '*_test.sh' | sort | grep -E "${TEST_FILTER:-.}")
  [ ${#files[@]} -gt 0 ] || [ ${#shells[@]} -gt 0 ] || return 0
  section "$name"
  local p=0 f=0
  if [ ${#files[@]} -gt 0 ]; then
    local tap=$OUT/$name.tap spec=$OUT/$name.spec
    # --test-force-exit: a file whose tests have all ended exits even when it
    # left a socket or timer behind (such a file otherwise hangs the run), and
    # --test-timeout fails a test still running after 10 minutes. The
    # runner then exits before its file reporters flush, so the counts come
    # from the spec reporter's last lines on stdout (a pipe: written at once);
    # the TAP file is kept for the details it has.
    node --test --test-concurrency=1 --test-force-exit --test-timeout=600000 --test-reporter=spec --test-reporter-destination=stdout \
      --test-reporter=tap --test-reporter-destination="$tap" "${files[@]}" | tee "$spec"
    local rc=${PIPESTATUS[0]}
    p=$(grep -E '^ℹ pass [0-9]+$' "$spec" | tail -1 | awk '{print $3}')
    f=$(grep -E '^ℹ fail [0-9]+$' "$spec" | tail -1 | awk '{print $3}')
    c=$(grep -E '^ℹ cancelled [0-9]+$' "$spec" | tail -1 | awk '{print $3}')
    if [ -z "$p" ]; then echo "$name: the test runner printed no counts"; f=${f:-1}; fi
    p=${p:-0} f=$(( ${f:-0} + ${c:-0} ))
    if [ "$rc" != 0 ] && [ "$f" = 0 ]; then f=1; fi
  fi
  for s in "${shells[@]}"; do
    local log=$OUT/$(basename "$s").log
    bash "$s" 2>&1 | tee "$log"
    read -r tp tf < <(counts "$log")
    p=$((p + tp)) f=$((f + tf))
  done
  record "$name" "$p" "$f"
}
# the web UI's modules that need no browser (node:test), with the unit tests
want unit && node_section unit-web tests/unit/web
want integration && node_section integration tests/integration
want e2e && node_section e2e tests/e2e

# --- fuzz ---
if want fuzz; then
  section "fuzz (${FUZZ_SECONDS}s each)"
  mapfile -t fz < <(find build/fuzz/bin -type f -perm -u+x -name 'fuzz_*' ! -name '*.d' 2>/dev/null | sort)
  if [ ${#fz[@]} -gt 0 ]; then
    log=$OUT/fuzz.log
    scripts/fuzz.sh "$FUZZ_SECONDS" "${fz[@]}" | tee "$log"
    read -r tp tf < <(counts "$log")
    record fuzz "$tp" "$tf"
  fi
fi

section summary
for l in "${summary[@]}"; do echo "$l"; done
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" = 0 ]
