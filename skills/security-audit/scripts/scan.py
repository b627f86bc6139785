#!/usr/bin/env python3
"""scan.py ROOT [--out FILE.json] [--max-files N]: a fast pattern pass over
the text files under ROOT for security leads. Each hit has a rule, a
severity guess, the path, the line number and the line. Leads, not
findings: a human or the agent confirms each one."""
import json
import os
import re
import sys

SKIP_DIRS = {".git", "node_modules", "vendor", "dist", "build", "__pycache__", ".venv", "venv", ".skills"}
MAX_BYTES = 2 * 1024 * 1024

RULES = [
    ("secret-private-key", "high", r"-----BEGIN (?:RSA |EC |OPENSSH |DSA )?PRIVATE KEY-----"),
    ("secret-aws-key", "high", r"\bAKIA[0-9A-Z]{16}\b"),
    ("secret-token", "high", r"\b(?:ghp_[A-Za-z0-9]{36}|xox[baprs]-[A-Za-z0-9-]{10,}|sk-[A-Za-z0-9]{20,})\b"),
    ("secret-assignment", "medium",
     r"(?i)\b(?:password|passwd|secret|api[_-]?key|token|auth[_-]?key)\b\s*[:=]\s*['\"][^'\"\s]{6,}['\"]"),
    ("shell-injection", "high",
     r"(?:\bos\.system\s*\(|\bsubprocess\.\w+\([^)]*shell\s*=\s*True|\bpopen\s*\(|\bsystem\s*\(|child_process\.exec\s*\(|\bexecSync\s*\()"),
    ("sql-string-building", "high",
     r"(?i)(?:execute|query|exec)\s*\(\s*(?:f['\"]|['\"][^'\"]*['\"]\s*(?:\+|%)|[^,)]*\.format\()[^)]*\b(?:select|insert|update|delete)\b"),
    ("sql-string-building", "high", r"(?i)['\"]\s*(?:select|insert into|update|delete from)\b[^'\"]*['\"]\s*\+\s*\w"),
    ("code-eval", "high", r"(?:\beval\s*\(|\bexec\s*\(|new Function\s*\()"),
    ("unsafe-deserialisation", "high", r"(?:\bpickle\.loads?\s*\(|\byaml\.load\s*\((?![^)]*SafeLoader)|\bmarshal\.loads\s*\()"),
    ("tls-verification-off", "high",
     r"(?:verify\s*=\s*False|InsecureSkipVerify\s*:\s*true|rejectUnauthorized\s*:\s*false|CURLOPT_SSL_VERIFY(?:PEER|HOST)\s*,\s*0|NODE_TLS_REJECT_UNAUTHORIZED\s*=\s*['\"]?0)"),
    ("weak-hash", "medium", r"(?i)\b(?:md5|sha1)\s*\(|hashlib\.(?:md5|sha1)\b|createHash\(['\"](?:md5|sha1)['\"]"),
    ("weak-cipher", "medium", r"(?i)\b(?:DES|RC4|Blowfish)\b|MODE_ECB|\bECB\b"),
    ("insecure-random", "low", r"(?:\bMath\.random\s*\(|\brandom\.(?:random|randint|choice)\s*\()(?=.*(?i:token|secret|password|key|nonce))"),
    ("debug-enabled", "medium", r"(?i)^\s*(?:DEBUG\s*=\s*True|debug\s*:\s*true|app\.run\([^)]*debug\s*=\s*True)"),
    ("cors-wildcard", "medium", r"(?i)Access-Control-Allow-Origin['\"]?\s*[:,=]\s*['\"]\*|cors\(\s*\)|origins?\s*[:=]\s*['\"]\*['\"]"),
    ("world-writable", "medium", r"\bchmod\s+(?:-R\s+)?(?:0?777|a\+w|o\+w)\b|os\.chmod\([^)]*0o?777"),
    ("container-root", "low", r"(?i)^\s*USER\s+root\b|privileged\s*:\s*true|runAsUser\s*:\s*0\b"),
    ("image-latest-tag", "low", r"(?i)^\s*(?:FROM|image:)\s+[\w./-]+:latest\b"),
    ("bind-all-interfaces", "low", r"['\"]0\.0\.0\.0['\"]"),
    ("path-traversal-risk", "medium", r"(?:open|readFile|sendFile|send_file)\s*\([^)]*(?:request\.|req\.(?:query|params|body)|params\[)"),
    ("xss-sink", "medium", r"\.innerHTML\s*=|dangerouslySetInnerHTML|\|\s*safe\b|mark_safe\("),
]
COMPILED = [(r, s, re.compile(p)) for r, s, p in RULES]


def text_files(root, limit):
    n = 0
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x not in SKIP_DIRS)
        for f in sorted(files):
            p = os.path.join(d, f)
            if os.path.islink(p) or not os.path.isfile(p):
                continue
            try:
                if os.path.getsize(p) > MAX_BYTES:
                    continue
                with open(p, "rb") as fh:
                    data = fh.read()
            except OSError:
                continue
            if b"\0" in data[:8192]:
                continue
            n += 1
            if n > limit:
                return
            yield p, data.decode("utf-8", "replace")


def main():
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        print("usage: scan.py ROOT [--out FILE.json] [--max-files N]", file=sys.stderr)
        return 1
    root, out, limit = args[0], None, 20000
    if "--out" in args:
        out = args[args.index("--out") + 1]
    if "--max-files" in args:
        limit = int(args[args.index("--max-files") + 1])
    hits, files = [], 0
    for path, text in text_files(root, limit):
        files += 1
        rel = os.path.relpath(path, root)
        for no, line in enumerate(text.splitlines(), 1):
            if len(line) > 2000:
                line = line[:2000]
            for rule, sev, rx in COMPILED:
                if rx.search(line):
                    hits.append({"rule": rule, "severity": sev, "path": rel, "line": no,
                                 "text": line.strip()[:300]})
    order = {"critical": 0, "high": 1, "medium": 2, "low": 3, "info": 4}
    hits.sort(key=lambda h: (order[h["severity"]], h["path"], h["line"]))
    report = {"root": root, "files_scanned": files, "leads": hits}
    if out:
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        with open(out, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=1)
    print(f"scanned {files} files under {root}: {len(hits)} leads")
    by = {}
    for h in hits:
        by.setdefault((h["severity"], h["rule"]), []).append(h)
    for (sev, rule), hs in sorted(by.items(), key=lambda kv: (order[kv[0][0]], kv[0][1])):
        print(f"  {sev:<7} {rule:<24} {len(hs)}")
    for h in hits[:60]:
        print(f"{h['severity']:<7} {h['path']}:{h['line']}  [{h['rule']}]  {h['text'][:160]}")
    if len(hits) > 60:
        print(f"... {len(hits) - 60} more in {out or 'the --out file'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
