#!/usr/bin/env bash
# bench/office/bench.sh — office previews, compare_files and parse_pdf on this
# machine, beside the bare commands they wrap. Runs the office helper
# (src/app/tools/office/tusko_office.py) the way execd does (its source and the
# request in the environment), as uid 1000 in the sandbox image's tree mounted
# over a private /workspace and /tmp (chroot in a private mount namespace; no
# cgroup or seccomp: the numbers are the work itself). Needs root.
#
#   bench/office/bench.sh [ROOTFS]   (default: images/sandbox/build.sh --check)
#
# Prints a Markdown table: median of RUNS runs (default 5) in seconds.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
root=${1:-$("$repo/images/sandbox/build.sh" --check)}
runs=${RUNS:-5}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/ws" "$work/tmp"
chmod 777 "$work/ws" "$work/tmp"
export TUSKO_OFFICE_PY
TUSKO_OFFICE_PY=$(cat "$repo/src/app/tools/office/tusko_office.py")

# in_box CMD...: CMD in the image as uid 1000 with $work/ws as /workspace
in_box() {
  unshare --mount --propagation private -- /bin/sh -c '
    r=$1 w=$2; shift 2
    mount --bind "$w/ws" "$r/workspace"; mount --bind "$w/tmp" "$r/tmp"; mount -t proc proc "$r/proc"
    exec chroot --userspec=1000:1000 "$r" /usr/bin/env -i PATH=/usr/bin:/bin HOME=/workspace \
      LANG=C.UTF-8 TUSKO_OFFICE_PY="$TUSKO_OFFICE_PY" TUSKO_OFFICE_REQ="$TUSKO_OFFICE_REQ" "$@"' \
    x "$root" "$work" "$@"
}
helper() { TUSKO_OFFICE_REQ=$1 in_box python3 -I -c 'import os;exec(os.environ["TUSKO_OFFICE_PY"])' >"$work/out"; grep -q '"error"' "$work/out" && { echo "helper failed: $(cat "$work/out")" >&2; exit 1; } || true; }
export -f in_box helper
export root work

# median SECONDS of running "$@" runs times (clear: a command run before each)
median() {
  local clear=$1
  shift
  local ts=()
  for _ in $(seq "$runs"); do
    eval "$clear"
    local t0 t1
    t0=$(date +%s.%N)
    "$@" >/dev/null
    t1=$(date +%s.%N)
    ts+=("$(echo "$t1 - $t0" | bc)")
  done
  printf '%s\n' "${ts[@]}" | sort -n | sed -n "$(((runs + 1) / 2))p"
}
cold='rm -rf "$work/tmp"/* "$work/tmp"/.[!.]* 2>/dev/null || true'
none=':'

# the inputs, made in the image
cp "$repo/tests/fixtures/office/make.js" "$repo/tests/fixtures/office/make.py" "$work/ws/"
in_box sh -c 'cd /workspace && node make.js >/dev/null && python3 make.py >/dev/null && python3 -c "
import docx, openpyxl
d = docx.Document()
for p in range(20):
    d.add_heading(\"Section %d\" % (p + 1), 1)
    for _ in range(6): d.add_paragraph(\"Lorem ipsum dolor sit amet, consectetur adipiscing elit. \" * 4)
    if p < 19: d.add_page_break()
d.save(\"doc20.docx\")
d2 = docx.Document()
for p in range(100):
    d2.add_heading(\"Page %d\" % (p + 1), 1)
    d2.add_paragraph(\"Quarterly figures follow. \" * 10)
    t = d2.add_table(rows=6, cols=5)
    for r in range(6):
        for c in range(5): t.cell(r, c).text = \"Region %d\" % r if c == 0 else str((r + 1) * (c + 7) * 13)
    if p < 99: d2.add_page_break()
d2.save(\"doc100.docx\")
wb = openpyxl.Workbook()
for s in range(5):
    ws = wb.active if s == 0 else wb.create_sheet()
    ws.title = \"Sheet%d\" % (s + 1)
    for r in range(1, 301): ws.append([r, r * 2, r * 3, \"=A%d+B%d+C%d\" % (r, r, r)])
wb.save(\"book5.xlsx\")
" && cp q3.pptx q3b.pptx && soffice -env:UserInstallation=file:///tmp/lo-prep --headless --convert-to pdf --outdir /workspace doc100.docx >/dev/null 2>&1 && cp doc100.pdf doc100b.pdf && rm -rf /tmp/lo-prep'
python3 - "$work/ws/q3b.pptx" <<'P'
import sys, zipfile, shutil
p = sys.argv[1]; src = zipfile.ZipFile(p); out = zipfile.ZipFile(p + ".new", "w", zipfile.ZIP_DEFLATED)
for i in src.infolist():
    d = src.read(i.filename)
    if i.filename == "ppt/slides/slide3.xml": d = d.replace(b"Revenue grew", b"Income grew")
    out.writestr(i, d)
out.close(); shutil.move(p + ".new", p)
P
chmod -R a+rwX "$work/ws"

bare_deck() { in_box sh -c 'cd /tmp && soffice -env:UserInstallation=file:///tmp/lo-b --headless --convert-to pdf --outdir /tmp /workspace/q3.pptx >/dev/null 2>&1 && pdftoppm -png -scale-to 1280 /tmp/q3.pdf /tmp/s && rm -rf /tmp/lo-b'; }
bare_doc() { in_box sh -c 'cd /tmp && soffice -env:UserInstallation=file:///tmp/lo-b --headless --convert-to pdf --outdir /tmp /workspace/doc20.docx >/dev/null 2>&1 && pdftoppm -jpeg -jpegopt quality=80 -scale-to 1024 /tmp/doc20.pdf /tmp/p && rm -rf /tmp/lo-b'; }
bare_book() { in_box sh -c 'cd /tmp && mkdir -p o && soffice -env:UserInstallation=file:///tmp/lo-b --headless --convert-to xlsx --outdir /tmp/o /workspace/book5.xlsx >/dev/null 2>&1 && rm -rf /tmp/lo-b'; }
bare_pdf() { in_box pdftotext -layout /workspace/doc100.pdf /tmp/t.txt; }
p() { helper "{\"op\":\"preview\",\"path\":\"$1\"}"; }
c() { helper "{\"op\":\"compare\",\"a\":\"$1\",\"b\":\"$2\"}"; }

echo "| what | helper (s) | bare commands (s) |"
echo "|---|---|---|"
echo "| 6-slide deck preview, cold | $(median "$cold" p q3.pptx) | $(median "$cold" bare_deck) |"
echo "| 6-slide deck preview, cached | $(median "$none" p q3.pptx) | – |"
echo "| 20-page .docx preview, cold | $(median "$cold" p doc20.docx) | $(median "$cold" bare_doc) |"
echo "| 20-page .docx preview, cached | $(median "$none" p doc20.docx) | – |"
echo "| 5-sheet workbook (formulas) preview, cold | $(median "$cold" p book5.xlsx) | $(median "$cold" bare_book) (recalculation) |"
echo "| 5-sheet workbook preview, cached | $(median "$none" p book5.xlsx) | – |"
echo "| compare_files .pptx (1 slide edited) | $(median "$none" c q3.pptx q3b.pptx) | – |"
echo "| compare_files .docx | $(median "$none" c report.docx report2.docx) | – |"
echo "| compare_files .xlsx (row inserted; recalculates both) | $(median "$cold" c sales.xlsx sales2.xlsx) | – |"
echo "| compare_files .csv | $(median "$none" c a.csv b.csv) | – |"
echo "| compare_files .pdf (100 pages) | $(median "$none" c doc100.pdf doc100b.pdf) | – |"
echo "| parse_pdf, 100 pages (tables) | $(median "$none" helper '{"op":"parse_pdf","path":"doc100.pdf"}') | $(median "$none" bare_pdf) (pdftotext -layout) |"
echo "| python3 start in the image (what every call pays) | $(median "$none" in_box python3 -I -c pass) | – |"
