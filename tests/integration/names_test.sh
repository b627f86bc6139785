#!/usr/bin/env bash
# Names say where they live: every exported (non-static) function and global
# of a file in src/ carries the prefix of its file.
#
#   src/lib/<stem>.c            tk_<stem>_
#   src/execd/<stem>.c          execd_<stem>_
#   src/sandboxd/<stem>.c       sbx_<stem>_
#   src/browserd/<stem>.c       brd_<stem>_
#   src/app/<stem>.c            app_<stem>_ or <stem>_
#   src/app/<dir>/<stem>.c      <dir>_<stem>_ (agent_run_ for agent/run.c),
#                               or <stem>_ when the stem already starts with
#                               the folder's name (llm/llm_parser.c: llm_parser_)
#   A name that is the prefix itself (sbx_runtime_docker) is fine, and so is
#   main in a main.c.
#
# The symbols are read from the objects (nm -g --defined-only), not guessed
# from the sources, so macros and generated tables count as what they are.
#
# Exceptions, one "file symbol" a line, are in names_allow.txt. Its first part
# lists deliberate ones, each under a comment with its reason; its second part
# lists names that break the rule today and are waiting for their rename:
# that part may only shrink. A new exported name with the wrong prefix fails
# here, and so does an allow-list line that no longer matches anything (so the
# list cannot go stale).
#
# SELFTEST=1 first checks the checker: a scratch object exporting one name
# with its file's prefix and one without must give exactly one finding.
#
# Uses the objects in $TUSKO_BUILD/obj (default build/obj). Prints
# "N passed, N failed".
cd "$(dirname "$0")/../.."
B=${TUSKO_BUILD:-build}
ALLOW=tests/integration/names_allow.txt

# prefixes <path of .c relative to the tree>
prefixes() {
    local src=$1 stem dir sub
    stem=$(basename "${src%.c}")
    dir=$(dirname "$src")
    case $dir in
    src/lib) echo "tk_${stem}_" ;;
    src/execd) echo "execd_${stem}_" ;;
    src/sandboxd) echo "sbx_${stem}_" ;;
    src/browserd) echo "brd_${stem}_" ;;
    src/app) echo "app_${stem}_ ${stem}_" ;;
    src/app/*)
        sub=${dir#src/app/}
        sub=${sub%%/*}
        if [[ $stem == "${sub}"* ]]; then echo "${stem}_"; else echo "${sub}_${stem}_"; fi
        ;;
    *) echo "" ;;
    esac
}

# findings <objdir> <prefix of paths to strip>: prints "file symbol" for each
# exported name without its file's prefix
findings() {
    local objdir=$1 o src s p ok
    (cd "$objdir" && find src -name '*.o' | sort) | while read -r o; do
        src=${o%.o}.c
        read -r -a pre <<<"$(prefixes "$src")"
        nm -g --defined-only "$objdir/$o" | awk 'NF == 3 && $2 ~ /^[TDBRCGSV]$/ {print $3}' |
            while read -r s; do
                ok=0
                [[ $s == main && $(basename "$src") == main.c ]] && ok=1
                for p in "${pre[@]}"; do [[ $s == "$p"* || $s == "${p%_}" ]] && ok=1; done
                [ $ok = 0 ] && echo "$src $s"
            done
    done
}

pass=0
fail=0

if [ "${SELFTEST:-1}" = 1 ]; then
    t=$(mktemp -d)
    trap 'rm -rf "$t"' EXIT
    mkdir -p "$t/src/lib" "$t/src/app/agent"
    printf 'int tk_widget_count;\nint tk_widget_size(void) { return 1; }\nint widget_other(void) { return 2; }\nstatic int helper(void) { return 3; }\nint tk_widget_use(void) { return helper(); }\n' >"$t/src/lib/widget.c"
    printf 'int agent_run_start(void) { return 1; }\nint agent_call_done(void) { return 2; }\n' >"$t/src/app/agent/run.c"
    cc -c -o "$t/src/lib/widget.o" "$t/src/lib/widget.c" &&
        cc -c -o "$t/src/app/agent/run.o" "$t/src/app/agent/run.c"
    got=$(findings "$t" | tr '\n' ';')
    want='src/app/agent/run.c agent_call_done;src/lib/widget.c widget_other;'
    if [ "$got" = "$want" ]; then
        pass=$((pass + 1))
    else
        echo "FAIL selftest: found '$got', expected '$want'"
        fail=$((fail + 1))
    fi
fi

if [ ! -d "$B/obj/src" ]; then
    echo "FAIL no objects in $B/obj (build first)"
    echo "$pass passed, 1 failed"
    exit 1
fi

found=$(findings "$B/obj" | sort -u)
allowed=$(grep -v '^\s*#' "$ALLOW" | grep -v '^\s*$' | awk '{print $1, $2}' | sort -u)

new=$(comm -23 <(echo "$found") <(echo "$allowed"))
stale=$(comm -13 <(echo "$found") <(echo "$allowed"))
if [ -n "$new" ]; then
    while read -r f s; do
        echo "FAIL $f exports $s: not its file's prefix ($(prefixes "$f" | sed 's/ / or /g')); rename it, or list it in $ALLOW with its reason"
    done <<<"$new"
    fail=$((fail + 1))
else
    pass=$((pass + 1))
fi
if [ -n "$stale" ]; then
    while read -r f s; do
        echo "FAIL $ALLOW lists $f $s, which is no longer exported there: remove the line"
    done <<<"$stale"
    fail=$((fail + 1))
else
    pass=$((pass + 1))
fi
echo "$pass passed, $fail failed"
[ $fail = 0 ]
