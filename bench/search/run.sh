#!/usr/bin/env bash
# bench/search — Utopia search:
#   recall    recall@1/@5 on a known-answer corpus (2,050 chunks through the
#             real extract/chunk/index pipeline: exact names, inflections, typos)
#   realtext  recall@1, recall@5 and MRR on real text (the manual pages of a
#             fixed list of Debian packages, realtext.py; queries are the pages'
#             one-line summaries, which the documents do not contain) for
#             utopia_search, a reference BM25 (reference.py) and ts_rank_cd
#   upload    the time to add and delete documents of about 1,000 chunks
#   latency   search latency p50/p99 at 10k, 100k and 1M chunks (a corpus made
#             in SQL by corpus.sql)
#
# The corpora live in a private Postgres cluster in var/bench/pg and are kept
# between runs (the 1M one takes about 10 minutes to make on 2 cores);
# realtext.py's corpus in var/bench/realtext (remade when realtext.py changes).
# A corpus made before migration 0024 is rewritten by it on the next run (slow
# at 1M chunks, and the table keeps the dead rows): drop its database to remake it.
# BENCH_SEARCH_PARTS="recall realtext upload latency" picks the parts;
# BENCH_SEARCH_SIZES="10000 100000" limits the sizes; BENCH_SEARCH_N the
# number of searches per size (default 400); BENCH_SEARCH_CANDIDATES overrides
# UTOPIA_SEARCH_CANDIDATES for the realtext and upload parts (an A/B).
set -euo pipefail
cd "$(dirname "$0")/../.."
bench/search/build.sh
B=build/bench/search
# the corpora can be remade: the fast settings, unsafe for data anyone needs (scripts/pg.sh)
url=$(scripts/pg.sh start --unsafe-fast var/bench/pg)
echo "Postgres: $(scripts/pg.sh mode var/bench/pg) settings (scripts/pg.sh)"
base=${url%/tusko}
psql=(psql -X -q -v ON_ERROR_STOP=1)
USER_ID=11111111-1111-4111-8111-111111111111
export PGOPTIONS='-c client_min_messages=warning'
parts=" ${BENCH_SEARCH_PARTS:-recall realtext upload latency} "
load() { cut -d' ' -f1-3 /proc/loadavg; }

if [[ $parts == *" recall "* ]]; then
  echo "--- recall (known answers) ---"
  "${psql[@]}" "$url" -c "DROP DATABASE IF EXISTS utopia_recall" -c "CREATE DATABASE utopia_recall"
  "$B" recall "$base/utopia_recall" 2>/dev/null
fi

rt=var/bench/realtext
if [[ $parts == *" realtext "* || $parts == *" upload "* ]]; then
  if [ ! -f $rt/manifest.txt ] || [ bench/search/realtext.py -nt $rt/manifest.txt ]; then
    echo "(making the real-text corpus from the installed manual pages)"
    python3 bench/search/realtext.py $rt
  fi
  "${psql[@]}" "$url" -c "DROP DATABASE IF EXISTS utopia_realtext" -c "CREATE DATABASE utopia_realtext"
fi
if [[ $parts == *" realtext "* ]]; then
  echo
  echo "--- real text (manual pages; machine load: $(load)) ---"
  tail -1 $rt/manifest.txt
  mkdir -p $rt/out
  "$B" realtext "$base/utopia_realtext" $rt $rt/out 2>/dev/null
  python3 bench/search/reference.py $rt $rt/out
fi
if [[ $parts == *" upload "* ]]; then
  echo
  echo "--- upload (documents of about 1,000 chunks into one scope; machine load: $(load)) ---"
  "$B" upload "$base/utopia_realtext" $rt 5 2>/dev/null
fi

if [[ $parts == *" latency "* ]]; then
  echo
  echo "--- latency (utopia_search, chunks, k=8; machine load: $(load)) ---"
  for n in ${BENCH_SEARCH_SIZES:-10000 100000 1000000}; do
    db=utopia_bench_$n
    if ! "${psql[@]}" "$base/$db" -tAc "SELECT 1 FROM utopia_chunks LIMIT 1" 2>/dev/null | grep -q 1; then
      echo "(making the $n-chunk corpus)"
      "${psql[@]}" "$url" -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db"
      "$B" migrate "$base/$db" 2>/dev/null
      "${psql[@]}" "$base/$db" -v n="$n" -v uid="$USER_ID" -f bench/search/corpus.sql
    else
      "$B" migrate "$base/$db" 2>/dev/null
    fi
    "$B" latency "$base/$db" "$USER_ID" "${BENCH_SEARCH_N:-400}"
  done
  echo "target: p50 <= 20 ms at 1M chunks"
fi
