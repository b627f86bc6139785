#!/usr/bin/env bash
# The names of tusko-sandboxd say their file: every symbol an object file of
# src/sandboxd exports (functions and data, as nm lists them) begins with
# sbx_<file stem> ("sbx_cgroup_freeze" is in cgroup.c, "sbx_docker_spec_limits"
# in docker_spec.c); a runtime file runtime_<x>.c exports its kind sbx_runtime_<x>
# alone; main.c exports only main. docs/ARCHITECTURE.md states the rule.
# Uses the objects of $TUSKO_BUILD (default build). Prints "N passed, N failed".
cd "$(dirname "$0")/../../.."
. tests/lib/tap.sh
B=${TUSKO_BUILD:-build}
n=0
for c in src/sandboxd/*.c; do
  stem=$(basename "$c" .c)
  o="$B/obj/src/sandboxd/$stem.o"
  if [ ! -f "$o" ]; then
    not_ok "$o is not built (make)"
    continue
  fi
  n=$((n + 1))
  bad=""
  for sym in $(nm --defined-only -g "$o" | awk '$2 ~ /^[TDBRVW]$/ { print $3 }'); do
    case "$stem" in
      main) [ "$sym" = main ] && continue ;;
      runtime_*) [ "$sym" = "sbx_${stem}" ] && continue ;;
      *) case "$sym" in "sbx_${stem}"*) continue ;; esac ;;
    esac
    bad="$bad $sym"
  done
  check "src/sandboxd/$stem.c exports only names of its own${bad:+ (not:$bad)}" test -z "$bad"
done
check "the sandboxd objects were found ($n)" test "$n" -gt 10
finish
