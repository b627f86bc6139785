#!/usr/bin/env python3
"""bench/search/realtext.py — a search corpus of real text nobody here wrote:
the manual pages of a fixed list of Debian packages (each installed by
scripts/deps.sh, directly or as a dependency of what it names, or Essential),
rendered with groff.

    realtext.py OUTDIR

writes OUTDIR/docs/NNNN.md (one Markdown document a page: "# name(section)",
then one "## SECTION" a section of the page, its paragraphs as paragraphs),
OUTDIR/queries.tsv (document file, query) and OUTDIR/manifest.txt (the pages
used and a SHA-256 of everything written). Each query is the one-line summary
of the NAME section ("ls - list directory contents" asks "list directory
contents"); the NAME section is left out of the document, and a summary that
the rest of its page still contains word for word is not used as a query (the
page stays, as a document other queries must not be misled by). Summaries that
two pages share are not used either (a query must have one right answer).

The same package versions give the same corpus on every machine: pages are
taken in sorted order, rendered at a fixed line length, and the digest printed
at the end says whether two runs saw the same text.
"""
import gzip
import hashlib
import os
import re
import subprocess
import sys

# Named in scripts/deps.sh, pulled in by what it names (postgresql-client-15
# by postgresql-15, openssl by ca-certificates, containerd and runc by
# docker.io, gcc-12 by gcc, apt is what it installs with), or Essential.
PACKAGES = [
    "acl", "apt", "bash", "bubblewrap", "containerd", "coreutils", "cppcheck", "curl",
    "debootstrap", "diffutils", "docker.io", "dpkg", "e2fsprogs", "findutils", "gcc-12",
    "grep", "groff-base", "gzip", "hostname", "iproute2", "login", "make", "mount",
    "openssl", "passwd", "poppler-utils", "postgresql-15", "postgresql-client-15",
    "runc", "sed", "tar", "util-linux",
]
SECTIONS = re.compile(r"/man/man[1578]/[^/]+\.[1578][a-z]*(\.gz)?$")
LINE = 3000  # groff line length: one paragraph a line, no hyphenation


def installed_pages():
    missing, pages = [], []
    for pkg in PACKAGES:
        r = subprocess.run(["dpkg-query", "-W", "-f=${Status}", pkg], capture_output=True,
                           text=True)
        if "install ok installed" not in r.stdout:
            missing.append(pkg)
            continue
        files = subprocess.run(["dpkg", "-L", pkg], capture_output=True, text=True).stdout
        for path in files.splitlines():
            if SECTIONS.search(path):
                # English pages only: /usr/share/man/manN, not /usr/share/man/de/manN
                if re.search(r"/share/man/[a-z]{2}(_[A-Z]{2})?(\.[^/]+)?/man", path):
                    continue
                pages.append((pkg, path))
    if missing:
        sys.exit("realtext.py: these packages are not installed: %s (run scripts/deps.sh)"
                 % " ".join(missing))
    return sorted(pages, key=lambda p: (p[1], p[0]))


def read_page(path):
    if os.path.islink(path) or not os.path.isfile(path):
        return None
    with open(path, "rb") as f:
        raw = f.read()
    if path.endswith(".gz"):
        raw = gzip.decompress(raw)
    src = raw.decode("utf-8", "replace")
    if re.match(r"\s*\.so\s", src):  # an alias of another page
        return None
    return src


def render(src):
    r = subprocess.run(["groff", "-t", "-mandoc", "-Tutf8", "-P-cbou", "-rLL=%dn" % LINE,
                        "-rLT=%dn" % LINE], input=src.encode(), capture_output=True)
    return r.stdout.decode("utf-8", "replace")


MD_SPECIAL = re.compile(r"([\\`*_{}\[\]<>()#+\-.!|~])")


def md_escape(s):
    return MD_SPECIAL.sub(r"\\\1", s)


def norm(s):
    return " ".join(re.findall(r"[a-z0-9]+", s.lower()))


def parse(text):
    """(name, summary, sections) of a rendered page; sections: [(heading, [paragraphs])]"""
    lines = text.split("\n")
    # the header is the first non-blank line, the footer the last
    nb = [i for i, l in enumerate(lines) if l.strip()]
    if len(nb) < 3:
        return None
    lines = lines[nb[0] + 1:nb[-1]]
    sections, cur, para = [], None, []

    def flush():
        if para and cur is not None:
            cur[1].append(" ".join(para))
        para.clear()

    for l in lines:
        if not l.strip():
            flush()
            continue
        if not l[0].isspace():  # a section heading
            flush()
            cur = (l.strip(), [])
            sections.append(cur)
            continue
        if re.match(r"^ {3}\S", l) and cur is not None:  # a subsection heading (.SS)
            flush()
            cur[1].append("### " + l.strip())
            continue
        para.append(" ".join(l.split()))
    flush()
    if not sections or sections[0][0] != "NAME" or not sections[0][1]:
        return None
    name_line = " ".join(sections[0][1])
    m = re.match(r"^(.+?)\s+[-\u2010\u2212\u2014]+\s+(.+)$", name_line)
    if not m:
        return None
    return m.group(1).strip(), m.group(2).strip(), sections[1:]


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: realtext.py OUTDIR")
    out = sys.argv[1]
    os.makedirs(os.path.join(out, "docs"), exist_ok=True)
    for f in os.listdir(os.path.join(out, "docs")):
        os.unlink(os.path.join(out, "docs", f))
    seen, docs = set(), []
    for pkg, path in installed_pages():
        src = read_page(path)
        if src is None:
            continue
        h = hashlib.sha256(src.encode()).hexdigest()
        if h in seen:
            continue
        seen.add(h)
        p = parse(render(src))
        if not p:
            continue
        name, summary, sections = p
        base = os.path.basename(path)
        base = base[:-3] if base.endswith(".gz") else base
        page, _, sect = base.rpartition(".")
        md = ["# %s(%s)\n" % (md_escape(page), sect)]
        body = []
        for head, paras in sections:
            md.append("## %s\n" % md_escape(head))
            for para in paras:
                if para.startswith("### "):
                    md.append("### %s\n" % md_escape(para[4:]))
                else:
                    md.append(md_escape(para) + "\n")
                    body.append(para)
        if not body:
            continue
        docs.append({"pkg": pkg, "path": path, "md": "\n".join(md), "summary": summary,
                     "text": norm(" ".join([page] + [s[0] for s in sections] + body))})
    if not docs:
        sys.exit("realtext.py: no manual pages found (are they excluded by dpkg's path-exclude?)")
    counts = {}
    for d in docs:
        counts[norm(d["summary"])] = counts.get(norm(d["summary"]), 0) + 1
    digest = hashlib.sha256()
    nq = 0
    with open(os.path.join(out, "queries.tsv"), "w") as q, \
            open(os.path.join(out, "manifest.txt"), "w") as man:
        for i, d in enumerate(docs):
            fn = "%04d.md" % i
            with open(os.path.join(out, "docs", fn), "w") as f:
                f.write(d["md"])
            digest.update(fn.encode() + b"\0" + d["md"].encode() + b"\0")
            s = norm(d["summary"])
            use = len(s.split()) >= 2 and counts[s] == 1 and (" " + s + " ") not in (
                " " + d["text"] + " ")
            man.write("%s\t%s\t%s\t%s\n" % (fn, d["pkg"], d["path"], "query" if use else "-"))
            if use:
                summary = " ".join(d["summary"].split())
                q.write("%s\t%s\n" % (fn, summary))
                digest.update(fn.encode() + b"\t" + summary.encode() + b"\n")
                nq += 1
        man.write("# sha256 %s\n" % digest.hexdigest())
    print("corpus: %d manual pages of %d packages, %d queries, sha256 %s" %
          (len(docs), len(PACKAGES), nq, digest.hexdigest()[:16]))


if __name__ == "__main__":
    main()
