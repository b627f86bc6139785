#!/usr/bin/env bash
# Every setting a program reads is documented in .env.example with the code's
# default, and the docs' settings tables state the same defaults.
#
# The settings come from the programs themselves, not from a regex over the
# sources: each program's --help prints its tk_setting tables row by row
# (tk_config_usage: flag, variable, help, "[default: X]"), however a row is
# spread over lines in the source (macros such as UTOPIA_SETTINGS and
# SUBAGENT_SETTINGS included). Besides the tables: the variables read with
# getenv() in src/ (minus the process environment's own: HOME, PATH, TMPDIR,
# Python's IPYTHONDIR and MPLCONFIGDIR, which execd only passes on to
# kernels, and KUBERNETES_SERVICE_HOST/PORT, which Kubernetes puts in every
# pod); those have no table default, so theirs is listed below.
#
# Checks, one line each on failure:
#   - every setting has a line NAME=VALUE (or "# NAME=VALUE") in .env.example;
#   - the values .env.example gives a name are exactly the defaults the
#     programs give it (a name two programs read, SANDBOX_IDLE_TTL, may appear
#     once per program); no default (unset, fail-closed or required) is an
#     empty value; exceptions are listed in EXCEPT with their reason;
#   - every NAME= line of .env.example is a setting some program reads;
#   - a row "| `NAME` | ... |" of a table in docs/ whose first cell after the
#     name (and its --flag, if any) is one `value` or one bare word states the
#     code's default ("empty" stands for none); prose cells are not checked;
#   - in the prose of docs/ and README.md, `NAME` (V), `NAME` (default V) and
#     `NAME` — default V state the code's default;
#   - the single-line table rows a regex finds in src/ are all among those
#     --help printed (so a table that --help does not show is noticed).
# Uses the programs in $TUSKO_BUILD (default build). Prints "N passed, N failed".
cd "$(dirname "$0")/../.."
B=${TUSKO_BUILD:-build}
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() {
  echo "not ok: $*"
  fail=$((fail + 1))
}

# Settings read outside the tables: name, default in the code, where.
declare -A GETENV_DEFAULT=(
  [LOG_LEVEL]=info    # src/lib/log.c: level_names[1] unless LOG_LEVEL names another
  [LOG_FORMAT]=text   # src/lib/log.c: text unless LOG_FORMAT=json
  [TZDIR]=/usr/share/zoneinfo # src/lib/tz.c: the compiled zoneinfo schedules read
)
# Documented exceptions: .env.example may give another value than the code's
# default (or a value where the code has none). Name → reason. None today; a
# secret with a default would need one (--help prints its default as
# "(secret)"), as would a default computed at start-up that the table gives
# as text.
declare -A EXCEPT=()

# program <TAB> name <TAB> default (empty: none) from each --help
tables=""
for p in tusko tusko-sandboxd tusko-execd tusko-browserd; do
  if [ ! -x "$B/$p" ]; then
    bad "$B/$p is not built (make, or set TUSKO_BUILD)"
    continue
  fi
  out=$(env -i "$B/$p" --help) || { bad "$p --help failed"; continue; }
  rows=$(printf '%s\n' "$out" | awk -v P="$p" '
    /^Settings/ { on = 1; next }
    on && /^  / {
      n = split($0, a, " "); i = (a[1] ~ /^--/) ? 2 : 1
      if (a[i] !~ /^[A-Z][A-Z0-9_]+$/) next
      d = ""
      if ($0 ~ /\[default: .*\]$/) { d = $0; sub(/.*\[default: /, "", d); sub(/\]$/, "", d) }
      print P "\t" a[i] "\t" d
    }')
  [ -n "$rows" ] || bad "$p --help lists no settings: the parse is broken"
  tables+="$rows"$'\n'
done
tables=$(printf '%s' "$tables" | sed '/^$/d')
for n in "${!GETENV_DEFAULT[@]}"; do tables+=$'\n'"getenv"$'\t'"$n"$'\t'"${GETENV_DEFAULT[$n]}"; done
getenv_names=$(grep -rhoE 'getenv\("[A-Z][A-Z0-9_]+"\)' src | sed -E 's/getenv\("([A-Z0-9_]+)"\)/\1/' |
  sort -u | grep -vxE 'HOME|PATH|TMPDIR|TZDIR|IPYTHONDIR|MPLCONFIGDIR|KUBERNETES_SERVICE_HOST|KUBERNETES_SERVICE_PORT')
table_names=$(printf '%s\n' "$tables" | cut -f2 | sort -u)
for n in $getenv_names; do
  if printf '%s\n' "$table_names" | grep -qxF "$n"; then ok; else
    bad "$n is read with getenv() but is in no table and has no entry in GETENV_DEFAULT (this test)"
  fi
done
# (the count says the parse found the tables: over 90 settings today)
[ "$(printf '%s\n' "$table_names" | wc -l)" -ge 90 ] && ok || bad "only $(printf '%s\n' "$table_names" | wc -l) settings found"
for n in $(grep -rhoE '\{"[A-Z][A-Z0-9_]+", *("[a-z0-9-]+"|NULL), *TK_SET_' src | sed -E 's/^\{"([A-Z0-9_]+)".*/\1/' | sort -u); do
  if printf '%s\n' "$table_names" | grep -qxF "$n"; then ok; else
    bad "$n is a tk_setting row in src/ but no program's --help lists it"
  fi
done

# .env.example: name → its values, one a line
envx() { grep -E "^#? ?$1=" .env.example | sed -E "s/^#? ?$1=//"; }
for n in $table_names; do
  if ! grep -qE "^#? ?$n=" .env.example; then
    bad "$n is read by the code but not documented in .env.example"
    continue
  fi
  want=$(printf '%s\n' "$tables" | awk -F'\t' -v N="$n" '$2 == N { print $3 }' | sort -u)
  have=$(envx "$n" | sort -u)
  if [ "$want" = "$have" ]; then
    ok
  elif [ -n "${EXCEPT[$n]:-}" ]; then
    ok
  else
    bad "$n: .env.example says \"$(printf '%s' "$have" | paste -sd '|')\", the code's default is \"$(printf '%s' "$want" | paste -sd '|')\""
  fi
done
for n in $(grep -oE '^#? ?[A-Z][A-Z0-9_]+=' .env.example | sed -E 's/^#? ?//; s/=$//' | sort -u); do
  if printf '%s\n' "$table_names" | grep -qxF "$n"; then ok; else
    bad "$n is in .env.example but no program reads it"
  fi
done

# docs/ tables: | `NAME` [(`--flag`)] | [`--flag` |] value | ...  and rows of
# several names: | `A`, `B` | 1, 2 |  or  | `X_MEMORY`, `_CPU` | `2Gi`, `1` |
while IFS=$'\t' read -r file n cell; do
  [ -n "$n" ] || continue
  v=$cell
  if [[ $v =~ ^\`([^\`]*)\`$ ]]; then
    v=${BASH_REMATCH[1]}
  elif [[ $v =~ ^[A-Za-z0-9._:/-]+$ ]]; then
    case $v in empty | unset | none) v="" ;; esac
  else
    continue # prose: not checked
  fi
  if ! printf '%s\n' "$table_names" | grep -qxF "$n"; then
    bad "$file: documents $n, which no program reads"
    continue
  fi
  want=$(printf '%s\n' "$tables" | awk -F'\t' -v N="$n" '$2 == N { print $3 }' | sort -u)
  if printf '%s\n' "$want" | grep -qxF -- "$v" || [ -n "${EXCEPT[$n]:-}" ]; then
    ok
  else
    bad "$file: $n is documented with default \"$v\", the code's default is \"$(printf '%s' "$want" | paste -sd '|')\""
  fi
done < <(find docs -name '*.md' -print0 | xargs -0 awk '
  function trim(x) { gsub(/^ +| +$/, "", x); return x }
  /^\| *`[A-Z][A-Z0-9_]+`/ {
    n = split($0, c, "|"); names = c[2]; gsub(/\([^)]*\)/, "", names); gsub(/`/, "", names)
    k = split(names, nm, ","); ok = 1
    for (j = 1; j <= k; j++) {
      nm[j] = trim(nm[j])
      if (j > 1 && nm[j] ~ /^_/) { pre = nm[1]; sub(/_[A-Z0-9]+$/, "", pre); nm[j] = pre nm[j] }
      if (nm[j] !~ /^[A-Z][A-Z0-9_]+$/) ok = 0
    }
    if (!ok) next
    for (i = 3; i < n; i++) {
      v = trim(c[i])
      if (v == "" || v ~ /^`?--[a-z0-9-]+`?$/) continue
      if (k == 1) { print FILENAME "\t" nm[1] "\t" v; break }
      m = split(v, vs, ",")
      for (j = 1; j <= k; j++) print FILENAME "\t" nm[j] "\t" trim(m == k ? vs[j] : v)
      break
    }
  }')

# docs/ prose: `NAME` (V), `NAME` (default V), `NAME` — default V, where V is
# one word (or one `word`; "empty" stands for none); a flag in parentheses,
# `NAME` (`--flag`), is not a default. Names that are not settings (error
# codes such as `NOT_FOUND` (404)) are skipped.
while IFS=$'\t' read -r file n v; do
  printf '%s\n' "$table_names" | grep -qxF "$n" || continue
  v=${v//\`/}
  case $v in --*) continue ;; empty) v="" ;; esac
  want=$(printf '%s\n' "$tables" | awk -F'\t' -v N="$n" '$2 == N { print $3 }' | sort -u)
  if printf '%s\n' "$want" | grep -qxF -- "$v" || [ -n "${EXCEPT[$n]:-}" ]; then
    ok
  else
    bad "$file: $n is documented with default \"$v\", the code's default is \"$(printf '%s' "$want" | paste -sd '|')\""
  fi
done < <(grep -rnoE '`[A-Z][A-Z0-9_]+` (\((default:? )?`?[^ ()`]+`?\)|— default `?[^ ,;()`]+`?)' docs README.md |
  sed -E 's/^([^:]+):[0-9]+:`([A-Z0-9_]+)` (\((default:? )?(.*)\)|— default (.*))$/\1\t\2\t\5\6/')

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
