#!/usr/bin/env python3
"""review_prep.py PATCH | DIR | BEFORE_DIR AFTER_DIR: an overview for a code
review. For a unified diff (a file, or made here from two folders with
difflib): files, lines added/removed, hunks with the new line numbers,
functions touched, whether tests changed, and markers worth a look in the
added lines. For one folder: the same markers over every file."""
import difflib
import os
import re
import sys

SKIP = {".git", "node_modules", "__pycache__", "dist", "build", ".venv", ".skills"}
FUNC = re.compile(r"^(?:\s*(?:async\s+)?(?:def|class|func|fn|function)\s+\w+|[A-Za-z_][\w\s*]*[\s*]\w+\s*\([^;]*$)")
MARKERS = [
    ("todo", re.compile(r"\b(?:TODO|FIXME|XXX|HACK)\b")),
    ("debug-output", re.compile(r"\b(?:console\.log|print\(|printf\(\"DEBUG|pdb\.set_trace|debugger;)")),
    ("commented-code", re.compile(r"^\s*(?:#|//)\s*(?:if|for|while|return|def|function|var|let|const)\b.*[;:{)]\s*$")),
    ("broad-except", re.compile(r"except\s*:|except Exception\s*:|catch\s*\(\s*\w*\s*\)\s*\{\s*\}")),
    ("new-dependency", re.compile(r"^\s*(?:import |from \S+ import |#include <|require\(|\"[\w@/-]+\":\s*\"[\^~]?\d)")),
    ("secret-like", re.compile(r"(?i)(?:password|secret|token|api_key)\s*[:=]\s*['\"][^'\"]{6,}")),
]
TEST_PATH = re.compile(r"(?:^|/)(?:tests?|spec|__tests__)/|(?:_test|\.test|\.spec|_spec)\.\w+$|(?:^|/)test_\w+\.\w+$")


def files_under(root):
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x not in SKIP)
        for f in sorted(files):
            p = os.path.join(d, f)
            if os.path.isfile(p) and not os.path.islink(p):
                yield os.path.relpath(p, root)


def read_text(p):
    try:
        with open(p, "rb") as f:
            data = f.read(4 * 1024 * 1024)
    except OSError:
        return None
    if b"\0" in data[:8192]:
        return None
    return data.decode("utf-8", "replace").splitlines(keepends=True)


def diff_dirs(a, b):
    out = []
    names = sorted(set(files_under(a)) | set(files_under(b)))
    for n in names:
        la = read_text(os.path.join(a, n)) if os.path.exists(os.path.join(a, n)) else []
        lb = read_text(os.path.join(b, n)) if os.path.exists(os.path.join(b, n)) else []
        if la is None or lb is None:
            out.append(f"Binary files a/{n} and b/{n} differ\n")
            continue
        out.extend(difflib.unified_diff(la, lb, f"a/{n}", f"b/{n}", n=3))
    return "".join(out)


def parse_diff(text):
    files, cur, new_no = [], None, 0
    for line in text.splitlines():
        if line.startswith("+++ "):
            path = line[4:].split("\t")[0]
            path = path[2:] if path.startswith("b/") else path
            cur = {"path": path, "added": 0, "removed": 0, "hunks": [], "funcs": set(), "marks": []}
            files.append(cur)
        elif line.startswith("--- ") or cur is None:
            continue
        elif line.startswith("@@"):
            m = re.match(r"@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@(.*)", line)
            if m:
                new_no = int(m.group(1))
                cur["hunks"].append((new_no, int(m.group(2) or 1)))
                ctx = m.group(3).strip()
                if ctx:
                    cur["funcs"].add(ctx[:80])
        elif line.startswith("+"):
            cur["added"] += 1
            body = line[1:]
            fm = FUNC.match(body)
            if fm and body.rstrip().endswith((":", "{", ")")):
                cur["funcs"].add(body.strip()[:80])
            for name, rx in MARKERS:
                if rx.search(body):
                    cur["marks"].append((new_no, name, body.strip()[:120]))
            new_no += 1
        elif line.startswith("-"):
            cur["removed"] += 1
        else:
            new_no += 1
    if not files and text.strip():
        # a diff without +++ headers is not one we can read
        raise ValueError("no '+++' file headers: not a unified diff")
    return files


def report_diff(files):
    tot_a = sum(f["added"] for f in files)
    tot_r = sum(f["removed"] for f in files)
    tests = [f for f in files if TEST_PATH.search(f["path"])]
    print(f"{len(files)} files changed, +{tot_a} -{tot_r}; tests changed: {len(tests)}")
    for f in files:
        print(f"\n{f['path']}  +{f['added']} -{f['removed']}" + ("  (test)" if f in tests else ""))
        for start, n in f["hunks"]:
            print(f"  hunk: new lines {start}-{start + max(n, 1) - 1}")
        for fn in sorted(f["funcs"]):
            print(f"  touches: {fn}")
        for no, name, text in f["marks"]:
            print(f"  look at {f['path']}:{no} [{name}] {text}")
    if files and not tests:
        print("\nnote: no test file changed; check whether the change is tested")


def report_dir(root):
    n, long_funcs = 0, []
    for rel in files_under(root):
        lines = read_text(os.path.join(root, rel))
        if lines is None:
            continue
        n += 1
        start = None
        for no, line in enumerate(lines, 1):
            for name, rx in MARKERS:
                if name != "new-dependency" and rx.search(line):
                    print(f"look at {rel}:{no} [{name}] {line.strip()[:120]}")
            if re.match(r"^(?:def |function |\w[\w\s*]*\(.*\)\s*\{?\s*$)", line):
                if start and no - start[0] > 80:
                    long_funcs.append((rel, start[0], no - start[0], start[1]))
                start = (no, line.strip()[:60])
    print(f"\n{n} text files")
    for rel, no, length, head in long_funcs:
        print(f"long function ({length} lines): {rel}:{no} {head}")


def main():
    a = sys.argv[1:]
    if len(a) not in (1, 2):
        print("usage: review_prep.py PATCH | DIR | BEFORE_DIR AFTER_DIR", file=sys.stderr)
        return 1
    try:
        if len(a) == 2:
            report_diff(parse_diff(diff_dirs(a[0], a[1])))
        elif os.path.isdir(a[0]):
            report_dir(a[0])
        else:
            with open(a[0], encoding="utf-8", errors="replace") as f:
                report_diff(parse_diff(f.read()))
    except (OSError, ValueError) as e:
        print(f"review_prep: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
