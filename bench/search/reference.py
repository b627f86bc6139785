#!/usr/bin/env python3
"""bench/search/reference.py — a textbook BM25 over the chunks `bench realtext`
exported, and the table that compares it with Utopia and ts_rank_cd.

    reference.py DIR OUT

DIR is realtext.py's folder (queries.tsv), OUT the folder `bench realtext`
wrote (chunks.jsonl, utopia.tsv, ts_rank_cd.tsv). The reference: words are
lower-cased runs of letters and digits, English stop words dropped, a crude
suffix stemmer, BM25 with k1 = 1.2 and b = 0.75 over each chunk's title,
heading and body as one text, a document ranked by its best chunk. Every
system is judged on the same cut: the documents of its first 50 chunks.
"""
import json
import math
import re
import sys
from collections import Counter, defaultdict

STOP = set("""a about above after again against all am an and any are as at be because
been before being below between both but by can did do does doing down during each few
for from further had has have having he her here hers herself him himself his how i if
in into is it its itself just me more most my myself no nor not now of off on once only
or other our ours ourselves out over own same she should so some such than that the
their theirs them themselves then there these they this those through to too under until
up very was we were what when where which while who whom why will with you your yours
yourself yourselves""".split())
SUFFIXES = ("ations", "ation", "ings", "ing", "ies", "ied", "ers", "er", "edly", "ed",
            "es", "ly", "s")


def stem(w):
    for s in SUFFIXES:
        if len(w) > len(s) + 2 and w.endswith(s):
            w = w[:-len(s)]
            if s in ("ies", "ied"):
                w += "y"
            break
    return w


def words(text):
    return [stem(w) for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in STOP]


def bm25_rankings(chunks, queries, k1=1.2, b=0.75):
    docs, postings, lengths = [], defaultdict(list), []
    for i, c in enumerate(chunks):
        tf = Counter(words(" ".join((c["title"], c["heading"], c["body"]))))
        docs.append(c["doc"])
        lengths.append(sum(tf.values()))
        for t, n in tf.items():
            postings[t].append((i, n))
    n, avg = len(chunks), sum(lengths) / len(chunks)
    out = {}
    for doc, q in queries:
        score = defaultdict(float)
        for t in set(words(q)):
            p = postings.get(t)
            if not p:
                continue
            idf = math.log(1 + (n - len(p) + 0.5) / (len(p) + 0.5))
            for i, f in p:
                score[i] += idf * f * (k1 + 1) / (f + k1 * (1 - b + b * lengths[i] / avg))
        top = sorted(score.items(), key=lambda x: (-x[1], x[0]))[:50]
        out[doc, q] = dedupe(docs[i] for i, _ in top)
    return out


def dedupe(seq):
    seen, v = set(), []
    for d in seq:
        if d not in seen:
            seen.add(d)
            v.append(d)
    return v


def read_rankings(path):
    out = []
    with open(path) as f:
        for line in f:
            want, _, docs = line.rstrip("\n").partition("\t")
            out.append((want, docs.split()))
    return out


def metrics(pairs):
    r1 = r5 = mrr = 0.0
    for want, ranked in pairs:
        if want in ranked:
            k = ranked.index(want) + 1
            r1 += k == 1
            r5 += k <= 5
            mrr += 1.0 / k
    n = len(pairs)
    return r1 / n, r5 / n, mrr / n


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: reference.py DIR OUT")
    d, out = sys.argv[1:]
    queries = []
    with open(d + "/queries.tsv") as f:
        for line in f:
            doc, _, q = line.rstrip("\n").partition("\t")
            queries.append((doc, q))
    with open(out + "/chunks.jsonl") as f:
        chunks = [json.loads(line) for line in f]
    ref = bm25_rankings(chunks, queries)
    rows = [("Utopia (utopia_search)", read_rankings(out + "/utopia.tsv")),
            ("reference BM25 (k1 1.2, b 0.75)", [(doc, ref[doc, q]) for doc, q in queries]),
            ("ts_rank_cd, words OR-ed", read_rankings(out + "/ts_rank_cd.tsv"))]
    print("%d queries over %d chunks of %d documents" %
          (len(queries), len(chunks), len({c["doc"] for c in chunks})))
    print("%-34s %9s %9s %7s" % ("ranking", "recall@1", "recall@5", "MRR"))
    for name, pairs in rows:
        if len(pairs) != len(queries):
            sys.exit("reference.py: %s has %d rankings for %d queries" %
                     (name, len(pairs), len(queries)))
        print("%-34s %9.3f %9.3f %7.3f" % ((name,) + metrics(pairs)))


if __name__ == "__main__":
    main()
