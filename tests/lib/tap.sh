# tests/lib/tap.sh — sourced by the shell tests in tests/integration/*_test.sh:
# one "ok - NAME" or "not ok - NAME" line a check (with up to 20 lines of detail,
# indented as comments), then "N passed, N failed" from finish, which exits 1
# when anything failed.
pass=0 fail=0
ok() {
  pass=$((pass + 1))
  echo "ok - $1"
}
# not_ok NAME [DETAIL]
not_ok() {
  fail=$((fail + 1))
  echo "not ok - $1"
  [[ -n ${2:-} ]] && printf '%s\n' "$2" | tail -n 20 | sed 's/^/    # /'
  return 0
}
# check NAME CMD...: passes when CMD exits 0; shows its output otherwise.
check() {
  local name=$1 out
  shift
  if out=$("$@" 2>&1); then ok "$name"; else not_ok "$name" "$out"; fi
}
finish() {
  echo "$pass passed, $fail failed"
  [[ $fail == 0 ]]
  exit
}
