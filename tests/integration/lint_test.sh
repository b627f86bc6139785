#!/usr/bin/env bash
# `make lint` stays clean: every C file is as .clang-format formats it, and
# cppcheck (warning and portability checks) finds nothing. Two checks, so the
# report says which one broke; run `make fmt` to fix the first.
cd "$(dirname "$0")/../.."
pass=0 fail=0
files=$(find src tests/unit tests/fuzz bench -name '*.[ch]')
[ -n "$files" ] || { echo "no C files found"; echo "0 passed, 1 failed"; exit 1; }
# shellcheck disable=SC2086
if out=$(clang-format --dry-run --Werror $files 2>&1); then
  pass=$((pass + 1))
else
  echo "not ok: clang-format would change these files (run make fmt):"
  echo "$out" | grep -oE '^[^:]+\.[ch]' | sort -u | sed 's/^/  /'
  fail=$((fail + 1))
fi
if out=$(make -s lint-cppcheck 2>&1); then
  pass=$((pass + 1))
else
  echo "not ok: cppcheck:"
  echo "$out" | head -40
  fail=$((fail + 1))
fi
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
