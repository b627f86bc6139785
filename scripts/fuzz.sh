#!/usr/bin/env bash
# fuzz.sh SECONDS TARGET... — runs each libFuzzer target for SECONDS, keeping its
# corpus in build/fuzz/corpus/<name> (seeded from tests/fuzz/corpus/<name>).
# Prints "ok <name>" or "FAIL <name>" per target and "N passed, N failed" last.
set -u
secs=$1
shift
pass=0 fail=0
for bin in "$@"; do
  name=$(basename "$bin")
  corpus=build/fuzz/corpus/$name
  mkdir -p "$corpus" build/fuzz/artifacts
  seeds=()
  [ -d "tests/fuzz/corpus/$name" ] && seeds=("tests/fuzz/corpus/$name")
  log=build/fuzz/$name.log
  if "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=0 \
      -artifact_prefix=build/fuzz/artifacts/"$name"- "$corpus" "${seeds[@]}" >"$log" 2>&1; then
    echo "ok   $name ($(grep -c '' "$log") log lines, corpus $(ls "$corpus" | wc -l))"
    pass=$((pass + 1))
  else
    echo "FAIL $name (see $log)"
    tail -30 "$log"
    fail=$((fail + 1))
  fi
done
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
