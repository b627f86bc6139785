#!/usr/bin/env bash
# lib/ssrf is two layers: the policy check (ssrf.c) uses no libcurl, so an
# egress proxy can link it alone; only the checked fetch (ssrf_fetch.c) calls
# curl. Reads the objects of $TUSKO_BUILD (default build) with nm. Prints
# "N passed, N failed".
cd "$(dirname "$0")/../../.."
. tests/lib/tap.sh
B=${TUSKO_BUILD:-build}
check_o="$B/obj/src/lib/ssrf.o"
fetch_o="$B/obj/src/lib/ssrf_fetch.o"
check "the ssrf objects are built (make)" test -f "$check_o" -a -f "$fetch_o"
curl_in_check=$(nm -u "$check_o" 2>/dev/null | awk '{print $2}' | grep -E '^curl_' | tr '\n' ' ')
check "ssrf.c calls no curl function${curl_in_check:+ (calls: $curl_in_check)}" test -z "$curl_in_check"
check "ssrf_fetch.c is the one that calls curl" sh -c "nm -u '$fetch_o' | grep -q ' curl_easy_perform$'"
check "ssrf.c defines the check (tk_ssrf_check_host, tk_ssrf_target_admits)" \
  sh -c "nm --defined-only -g '$check_o' | grep -q ' tk_ssrf_check_host$' && nm --defined-only -g '$check_o' | grep -q ' tk_ssrf_target_admits$'"
finish
