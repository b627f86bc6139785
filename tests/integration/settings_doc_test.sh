#!/usr/bin/env bash
# Every setting a program reads is documented, with its default, in .env.example:
# the names in every tk_setting table ({"NAME", "flag"|NULL, TK_SET_...}) and
# every variable read with getenv() in src/ (minus the process environment's
# own: HOME, PATH, TMPDIR, and Python's IPYTHONDIR and MPLCONFIGDIR, which execd
# only passes on to kernels). Also the SSRF lists, read by name in src/lib/ssrf.c.
# Prints one line per setting and "N passed, N failed".
cd "$(dirname "$0")/../.."
pass=0 fail=0
names=$( {
  grep -rhoE '\{"[A-Z][A-Z0-9_]+", *("[a-z0-9-]+"|NULL), *TK_SET_' src | sed -E 's/^\{"([A-Z0-9_]+)".*/\1/'
  grep -rhoE 'getenv\("[A-Z][A-Z0-9_]+"\)' src | sed -E 's/getenv\("([A-Z0-9_]+)"\)/\1/'
  grep -hoE '"SSRF_[A-Z_]+"' src/lib/ssrf.c | tr -d '"'
} | sort -u | grep -vxE 'HOME|PATH|TMPDIR|IPYTHONDIR|MPLCONFIGDIR')
[ -n "$names" ] || { echo "no settings found: the pattern is broken"; echo "0 passed, 1 failed"; exit 1; }
for n in $names; do
  if grep -qE "^#? ?$n=" .env.example; then
    pass=$((pass + 1))
  else
    echo "not ok: $n is read by the code but not documented in .env.example"
    fail=$((fail + 1))
  fi
done
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
