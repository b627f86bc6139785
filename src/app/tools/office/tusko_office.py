# tusko_office.py — office documents inside the chat's sandbox: previews
# (page pictures and text, sheets as tables), parse_pdf and compare_files.
#
# Tusko embeds this file in its binary and runs it in the sandbox with
#   python3 -c 'import os;exec(os.environ["TUSKO_OFFICE_PY"])'
# and the request, a JSON object, in TUSKO_OFFICE_REQ (no user data is ever
# part of a shell line). The answer is one JSON object printed between the
# lines TUSKO-OFFICE-BEGIN and TUSKO-OFFICE-END, cut into lines of at most
# 4000 characters (json.dumps with ensure_ascii has no newline of its own, so
# the reader drops every newline between the markers). {"error": "..."} on a
# problem the user should read.
#
# Nothing is written into /workspace: LibreOffice gets a profile of its own
# under the temporary folder and converts a copy of the file; pictures are
# cached in /tmp/tusko-office/<sha256 of the file>/.
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
import xml.etree.ElementTree as ET

WS = "/workspace"
CACHE = os.path.join(tempfile.gettempdir(), "tusko-office")
MAX_FILE = 200 << 20          # bytes of a file we open at all
ZIP_MAX_TOTAL = 1 << 30       # uncompressed bytes of all members of a zip
ZIP_MAX_MEMBERS = 20000
ZIP_MAX_RATIO = 200           # uncompressed / compressed, over the whole zip
SLIDE_CAP = 30
PAGE_CAP = 20
SHEET_ROWS = 200
SHEET_COLS = 50
PDF_TEXT_CAP = 100            # pages parse_pdf reads per call
DEADLINE = time.monotonic() + float(os.environ.get("TUSKO_OFFICE_TIMEOUT", "60"))

SLIDE_EXT = {".pptx", ".ppt", ".odp"}
DOC_EXT = {".docx", ".doc", ".odt", ".rtf"}
SHEET_EXT = {".xlsx", ".xls", ".ods", ".csv", ".tsv"}
IMAGE_EXT = {".png", ".jpg", ".jpeg", ".gif", ".webp", ".bmp"}
TEXT_EXT = {".txt", ".md", ".py", ".js", ".ts", ".c", ".h", ".json", ".yaml", ".yml", ".html",
            ".css", ".xml", ".sh", ".log", ".sql", ".go", ".rs", ".java", ".toml", ".ini"}


class Fail(Exception):
    pass


def left():
    return DEADLINE - time.monotonic()


# ------------------------------------------------------------------ files

def confine(p):
    if not isinstance(p, str) or not p:
        raise Fail("a path is required")
    full = os.path.normpath(p if p.startswith("/") else os.path.join(WS, p))
    if full != WS and not full.startswith(WS + "/"):
        raise Fail("%s is outside /workspace" % p)
    real = os.path.realpath(full)
    if real != WS and not real.startswith(WS + "/"):
        raise Fail("%s leads outside /workspace (a link)" % p)
    if not os.path.exists(real):
        raise Fail("%s: no such file" % full)
    if os.path.isdir(real):
        raise Fail("%s is a folder, not a file" % full)
    size = os.path.getsize(real)
    if size > MAX_FILE:
        raise Fail("%s is %d MB; at most %d MB are opened" % (full, size >> 20, MAX_FILE >> 20))
    return full, real, size


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def magic(path):
    with open(path, "rb") as f:
        head = f.read(8)
    if head.startswith(b"PK\x03\x04") or head.startswith(b"PK\x05\x06"):
        return "zip"
    if head.startswith(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"):
        return "ole"
    if head.startswith(b"%PDF-"):
        return "pdf"
    if head.startswith(b"\x89PNG") or head.startswith(b"\xff\xd8\xff") or head.startswith(b"GIF8"):
        return "image"
    if head.startswith(b"{\\rtf"):
        return "rtf"
    return "other"


def family_of(path, real):
    """(family, ext): family is slides, document, sheet, pdf, image or text."""
    ext = os.path.splitext(path)[1].lower()
    m = magic(real)
    name = os.path.basename(path)
    if ext in SLIDE_EXT | DOC_EXT | {".xlsx", ".xls", ".ods"}:
        want = "ole" if ext in (".ppt", ".doc", ".xls") else ("rtf" if ext == ".rtf" else "zip")
        if m == "ole" and want == "zip":
            raise Fail("%s is password-protected or encrypted (an OLE container, not the zip a "
                       "%s is): it cannot be opened without its password" % (name, ext))
        if m != want:
            raise Fail("%s is not a %s file: its content looks like %s" % (name, ext, describe(m)))
        if m == "zip":
            check_zip(real, name, ext)
        fam = "slides" if ext in SLIDE_EXT else "document" if ext in DOC_EXT else "sheet"
        return fam, ext
    if ext == ".pdf":
        if m != "pdf":
            raise Fail("%s is not a PDF: its content looks like %s" % (name, describe(m)))
        return "pdf", ext
    if ext in (".csv", ".tsv"):
        return "sheet", ext
    if ext in IMAGE_EXT:
        return "image", ext
    if m in ("zip", "ole", "pdf", "image"):
        raise Fail("%s: the extension %s does not say what it is (its content looks like %s)"
                   % (name, ext or "(none)", describe(m)))
    return "text", ext


def describe(m):
    return {"zip": "a zip archive", "ole": "an old Office (OLE) file", "pdf": "a PDF",
            "image": "an image", "rtf": "RTF text", "other": "neither an office file nor a PDF"}[m]


def check_zip(real, name, ext):
    try:
        z = zipfile.ZipFile(real)
    except zipfile.BadZipFile as e:
        raise Fail("%s is corrupt: not a readable zip (%s)" % (name, e))
    with z:
        infos = z.infolist()
        if len(infos) > ZIP_MAX_MEMBERS:
            raise Fail("%s has %d zip members; refusing it (at most %d)" %
                       (name, len(infos), ZIP_MAX_MEMBERS))
        total = sum(i.file_size for i in infos)
        packed = sum(i.compress_size for i in infos) or 1
        if total > ZIP_MAX_TOTAL or (total > (50 << 20) and total / packed > ZIP_MAX_RATIO):
            raise Fail("%s looks like a zip bomb: %d MB uncompressed from %d KB; refusing it" %
                       (name, total >> 20, packed >> 10))
        names = [i.filename for i in infos]
        if len(set(names)) != len(names):
            dup = sorted({n for n in names if names.count(n) > 1})[:3]
            raise Fail("%s is corrupt: duplicate zip entries (%s); Office refuses such files" %
                       (name, ", ".join(dup)))
        if ext in (".docx", ".xlsx", ".pptx") and "[Content_Types].xml" not in names:
            raise Fail("%s is corrupt: a zip without [Content_Types].xml is no %s" % (name, ext))


# ------------------------------------------------------------------ processes

def run(argv, timeout=None, env=None, cwd=None):
    """Runs argv in its own process group; kills the group at the timeout."""
    t = left() if timeout is None else min(timeout, left())
    if t <= 0.5:
        raise Fail("out of time (the 60 s bound)")
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=cwd,
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=t)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        raise Fail("%s did not finish within %d s and was stopped" % (os.path.basename(argv[0]), t))
    return p.returncode, out, err


def soffice():
    return shutil.which("soffice") or shutil.which("libreoffice")


def convert(src, outdir, fmt):
    """soffice --convert-to fmt with a profile of its own under the temporary folder."""
    exe = soffice()
    if not exe:
        raise Fail("LibreOffice is not in this sandbox image")
    prof = tempfile.mkdtemp(prefix="lo-", dir=tempfile.gettempdir())
    env = dict(os.environ)
    env.update({"HOME": prof, "XDG_CACHE_HOME": prof + "/cache", "XDG_CONFIG_HOME": prof + "/config",
                "SAL_USE_VCLPLUGIN": "svp"})
    env.pop("TUSKO_OFFICE_PY", None)
    env.pop("TUSKO_OFFICE_REQ", None)
    try:
        rc, out, err = run([exe, "-env:UserInstallation=file://" + prof, "--headless", "--norestore",
                            "--nolockcheck", "--convert-to", fmt, "--outdir", outdir, src],
                           env=env, cwd=prof)
    finally:
        shutil.rmtree(prof, ignore_errors=True)
    base = os.path.splitext(os.path.basename(src))[0]
    ext = fmt.split(":")[0]
    dst = os.path.join(outdir, base + "." + ext)
    if rc != 0 or not os.path.exists(dst):
        msg = (err or out or b"").decode("utf-8", "replace").strip().splitlines()
        raise Fail("LibreOffice could not open the file (it may be corrupt or password-protected)%s"
                   % ((": " + msg[-1][:200]) if msg else ""))
    return dst


def pdf_info(pdf):
    rc, out, err = run(["pdfinfo", pdf], timeout=20)
    if rc != 0:
        raise Fail("the PDF is corrupt or encrypted: %s" %
                   err.decode("utf-8", "replace").strip()[:200])
    info = {}
    for line in out.decode("utf-8", "replace").splitlines():
        k, _, v = line.partition(":")
        if v:
            info[k.strip()] = v.strip()
    try:
        pages = int(info.get("Pages", "0"))
    except ValueError:
        pages = 0
    if pages <= 0:
        raise Fail("the PDF has no pages")
    return pages, info


def page_range(spec, n, cap):
    if spec in (None, ""):
        return 1, min(n, cap)
    s = str(spec).strip()
    m = re.fullmatch(r"(\d+)(?:\s*-\s*(\d*))?", s)
    if not m:
        raise Fail('pages must look like "3" or "21-40" (got "%s")' % s[:40])
    a = int(m.group(1))
    b = int(m.group(2)) if m.group(2) else (a if m.group(2) is None else n)
    if a < 1 or b < a:
        raise Fail('pages "%s": the first page is 1 and the range goes upwards' % s)
    if a > n:
        raise Fail("pages %s: the file has %d page%s" % (s, n, "" if n == 1 else "s"))
    b = min(b, n, a + cap - 1)
    return a, b


def pdf_text_pages(pdf, a, b, layout=False):
    argv = ["pdftotext", "-q", "-enc", "UTF-8", "-f", str(a), "-l", str(b)]
    if layout:
        argv.append("-layout")
    rc, out, err = run(argv + [pdf, "-"], timeout=30)
    if rc != 0:
        raise Fail("pdftotext failed: %s" % err.decode("utf-8", "replace").strip()[:200])
    parts = out.decode("utf-8", "replace").split("\f")
    want = b - a + 1
    parts = (parts + [""] * want)[:want]
    return parts


def image_pages(pdf):
    """Pages that carry an image (pdfimages -list), to tell scans from empty pages."""
    try:
        rc, out, _ = run(["pdfimages", "-list", pdf], timeout=20)
    except Fail:
        return set()
    pages = set()
    for line in out.decode("utf-8", "replace").splitlines()[2:]:
        f = line.split()
        if f and f[0].isdigit():
            pages.add(int(f[0]))
    return pages


# ------------------------------------------------------------------ OOXML text

NS = {
    "a": "http://schemas.openxmlformats.org/drawingml/2006/main",
    "p": "http://schemas.openxmlformats.org/presentationml/2006/main",
    "r": "http://schemas.openxmlformats.org/officeDocument/2006/relationships",
    "w": "http://schemas.openxmlformats.org/wordprocessingml/2006/main",
    "rel": "http://schemas.openxmlformats.org/package/2006/relationships",
}


def xml_of(z, name, cap=20 << 20):
    info = z.getinfo(name)
    if info.file_size > cap:
        raise Fail("%s inside the file is %d MB; refusing it" % (name, info.file_size >> 20))
    try:
        return ET.fromstring(z.read(name))
    except ET.ParseError as e:
        raise Fail("the file is corrupt: %s is not XML (%s)" % (name, e))


def rels_of(z, part):
    d, b = os.path.split(part)
    rp = d + "/_rels/" + b + ".rels"
    out = {}
    if rp in z.namelist():
        for r in xml_of(z, rp).findall("rel:Relationship", NS):
            tgt = r.get("Target", "")
            if r.get("TargetMode") == "External":
                continue
            full = os.path.normpath(os.path.join(d, tgt)) if not tgt.startswith("/") else tgt[1:]
            out[r.get("Id")] = (r.get("Type", ""), full)
    return out


def shape_texts(root):
    """(title, [other text blocks]) of a slide or notes tree."""
    title, body = "", []
    for sp in root.iter("{%s}sp" % NS["p"]):
        ph = sp.find(".//p:nvPr/p:ph", NS)
        kind = ph.get("type", "") if ph is not None else ""
        paras = []
        for para in sp.iter("{%s}p" % NS["a"]):
            t = "".join(x.text or "" for x in para.iter("{%s}t" % NS["a"]))
            if t.strip():
                paras.append(t)
        text = "\n".join(paras)
        if not text:
            continue
        if kind in ("title", "ctrTitle") and not title:
            title = text
        elif kind in ("sldNum", "dt", "ftr", "hdr", "sldImg"):
            continue
        else:
            body.append(text)
    for gf in root.iter("{%s}graphicFrame" % NS["p"]):
        for tr in gf.iter("{%s}tr" % NS["a"]):
            cells = ["".join(x.text or "" for x in tc.iter("{%s}t" % NS["a"]))
                     for tc in tr.findall("a:tc", NS)]
            if any(c.strip() for c in cells):
                body.append(" | ".join(cells))
    return title, body


def pptx_slides(real):
    """[{title, body, notes}] in presentation order (p:sldIdLst, not part names)."""
    with zipfile.ZipFile(real) as z:
        pres = xml_of(z, "ppt/presentation.xml")
        rels = rels_of(z, "ppt/presentation.xml")
        out = []
        lst = pres.find("p:sldIdLst", NS)
        for sid in (lst if lst is not None else []):
            rid = sid.get("{%s}id" % NS["r"])
            if rid not in rels:
                continue
            part = rels[rid][1]
            if part not in z.namelist():
                continue
            title, body = shape_texts(xml_of(z, part))
            notes = ""
            for typ, tgt in rels_of(z, part).values():
                if typ.endswith("/notesSlide") and tgt in z.namelist():
                    _, nb = shape_texts(xml_of(z, tgt))
                    notes = "\n".join(nb)
            out.append({"title": title, "body": "\n".join(body), "notes": notes})
        return out


def docx_blocks(real):
    """Body blocks in order: {"kind": "paragraph"|"row", "style", "text"}."""
    with zipfile.ZipFile(real) as z:
        doc = xml_of(z, "word/document.xml", cap=100 << 20)
    body = doc.find("w:body", NS)
    out = []
    W = "{%s}" % NS["w"]

    def ptext(p):
        return "".join(t.text or "" for t in p.iter(W + "t"))

    def style(p):
        s = p.find("w:pPr/w:pStyle", NS)
        return s.get(W + "val", "") if s is not None else ""

    tables = 0
    for el in (body if body is not None else []):
        if el.tag == W + "p":
            out.append({"kind": "paragraph", "style": style(el), "text": ptext(el)})
        elif el.tag == W + "tbl":
            tables += 1
            for r, tr in enumerate(el.findall("w:tr", NS), 1):
                cells = [" ".join(ptext(p) for p in tc.iter(W + "p")) for tc in tr.findall("w:tc", NS)]
                out.append({"kind": "row", "table": tables, "row": r, "cells": cells,
                            "text": " | ".join(cells)})
    return out


# ------------------------------------------------------------------ sheets

def cell_str(v):
    if v is None:
        return ""
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e15:
        return str(int(v))
    return str(v)


def read_csv(real, ext):
    import csv
    with open(real, newline="", encoding="utf-8", errors="replace") as f:
        sample = f.read(65536)
        f.seek(0)
        delim = "\t" if ext == ".tsv" else ","
        if ext != ".tsv":
            try:
                delim = csv.Sniffer().sniff(sample, delimiters=",;\t|").delimiter
            except csv.Error:
                pass
        rows = list(csv.reader(f, delimiter=delim))
    return [{"name": os.path.basename(real), "rows": rows, "formulas": {}}]


def needs_recalc(real):
    import openpyxl
    wf = openpyxl.load_workbook(real, read_only=True, data_only=False)
    wv = openpyxl.load_workbook(real, read_only=True, data_only=True)
    try:
        for name in wf.sheetnames:
            a, b = wf[name], wv[name]
            for ra, rb in zip(a.iter_rows(max_row=2000, values_only=True),
                              b.iter_rows(max_row=2000, values_only=True)):
                for x, y in zip(ra, rb):
                    if isinstance(x, str) and x.startswith("=") and y is None:
                        return True
    finally:
        wf.close()
        wv.close()
    return False


def read_workbook(real, ext, cachedir, rows_cap=None, cols_cap=None):
    """[{name, rows, formulas, dims}]: values (recalculated once when formulas carry no
    cached value) and the formula text of each formula cell."""
    notes = []
    src = real
    if ext in (".xls", ".ods"):
        if not soffice():
            raise Fail("reading %s needs LibreOffice, which this sandbox image lacks" % ext)
        src = convert(copy_in(real, cachedir, ext), cachedir, "xlsx")
    import openpyxl
    values_src = src
    try:
        if needs_recalc(src):
            if soffice():
                rc_dir = os.path.join(cachedir, "recalc")
                done = os.path.join(rc_dir, "out", "src.xlsx")
                if not os.path.exists(done):
                    os.makedirs(os.path.join(rc_dir, "out"), exist_ok=True)
                    convert(copy_in(src, rc_dir, ".xlsx"), os.path.join(rc_dir, "out"), "xlsx")
                values_src = done
                notes.append("formula values were recalculated (the workbook had none cached)")
            else:
                notes.append("formulas have no cached values and LibreOffice is not in the image "
                             "to recalculate them: their text is shown")
        wf = openpyxl.load_workbook(src, read_only=True, data_only=False)
        wv = openpyxl.load_workbook(values_src, read_only=True, data_only=True)
    except Fail:
        raise
    except Exception as e:
        raise Fail("the workbook is corrupt: %s" % str(e)[:200])
    out = []
    try:
        for name in wf.sheetnames:
            f, v = wf[name], wv[name] if name in wv.sheetnames else None
            rows, formulas = [], {}
            nrows = ncols = 0
            vit = v.iter_rows(values_only=True) if v is not None else None
            for r, frow in enumerate(f.iter_rows(values_only=True), 1):
                vrow = next(vit, None) if vit is not None else None
                nrows = r
                ncols = max(ncols, len(frow))
                if rows_cap is not None and r > rows_cap:
                    continue
                line = []
                for c, x in enumerate(frow[:cols_cap] if cols_cap else frow):
                    val = vrow[c] if vrow is not None and c < len(vrow) else None
                    if isinstance(x, str) and x.startswith("="):
                        formulas["%s%d" % (col_name(c), r)] = x
                        line.append(cell_str(val) if val is not None else x)
                    else:
                        line.append(cell_str(x))
                rows.append(line)
            while rows and not any(rows[-1]):
                rows.pop()
            out.append({"name": name, "rows": rows, "formulas": formulas,
                        "dims": [nrows, ncols]})
    finally:
        wf.close()
        wv.close()
    return out, notes


def col_name(c):
    s = ""
    c += 1
    while c:
        c, r = divmod(c - 1, 26)
        s = chr(65 + r) + s
    return s


def copy_in(real, d, ext):
    os.makedirs(d, exist_ok=True)
    dst = os.path.join(d, "src" + ext)
    shutil.copyfile(real, dst)
    return dst


# ------------------------------------------------------------------ preview

def b64file(p):
    import base64
    with open(p, "rb") as f:
        return base64.b64encode(f.read()).decode("ascii")


def cache_dir(sha):
    d = os.path.join(CACHE, sha)
    os.makedirs(d, mode=0o700, exist_ok=True)
    return d


def op_preview(req):
    full, real, size = confine(req.get("path"))
    fam, ext = family_of(full, real)
    res = {"path": full, "size": size}
    if fam in ("text", "image"):
        raise Fail("%s is not an office file or a PDF" % full)
    sha = sha256(real)
    d = cache_dir(sha)
    res["sha256"] = sha
    if fam == "sheet":
        if ext in (".csv", ".tsv"):
            sheets = read_csv(real, ext)
            notes = []
            for s in sheets:
                s["dims"] = [len(s["rows"]), max((len(r) for r in s["rows"]), default=0)]
        else:
            sheets, notes = read_workbook(real, ext, d, SHEET_ROWS, SHEET_COLS)
        tables = []
        for s in sheets:
            rows = [r[:SHEET_COLS] for r in s["rows"][:SHEET_ROWS]]
            tables.append({"name": s["name"], "rows": rows, "total_rows": s["dims"][0],
                           "total_cols": s["dims"][1],
                           "truncated": s["dims"][0] > SHEET_ROWS or s["dims"][1] > SHEET_COLS,
                           "formulas": dict(list(s["formulas"].items())[:200])})
        res.update({"kind": "sheets", "family": "sheet", "sheets": tables, "notes": notes})
        return res
    slides = fam == "slides"
    cap = SLIDE_CAP if slides else PAGE_CAP
    texts = None
    if ext == ".pptx":
        try:
            texts = pptx_slides(real)
        except Fail:
            raise
        except Exception as e:
            raise Fail("%s is corrupt: %s" % (os.path.basename(full), str(e)[:200]))
    if fam == "pdf":
        pdf = real
    else:
        pdf = os.path.join(d, "src.pdf")
        if not os.path.exists(pdf):
            if not soffice():
                return structured(res, full, real, ext, fam, texts)
            tmp = os.path.join(d, "conv")
            os.makedirs(tmp, exist_ok=True)
            out = convert(copy_in(real, tmp, ext), tmp, "pdf")
            os.replace(out, pdf)
            shutil.rmtree(tmp, ignore_errors=True)
    n, info = pdf_info(pdf)
    a, b = page_range(req.get("pages"), n, cap)
    fmt = "png" if slides else "jpg"
    imgs = os.path.join(d, fmt)
    os.makedirs(imgs, exist_ok=True)
    missing = [i for i in range(a, b + 1) if not os.path.exists(os.path.join(imgs, "%d.%s" % (i, fmt)))]
    if missing:
        lo, hi = missing[0], missing[-1]
        tmp = tempfile.mkdtemp(prefix="r-", dir=d)
        argv = ["pdftoppm", "-f", str(lo), "-l", str(hi)]
        argv += ["-png", "-scale-to", "1280"] if slides else ["-jpeg", "-jpegopt", "quality=80",
                                                              "-scale-to", "1024"]
        rc, _, err = run(argv + [pdf, os.path.join(tmp, "p")])
        if rc != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            raise Fail("pdftoppm could not render the pages: %s" %
                       err.decode("utf-8", "replace").strip()[:200])
        for f in os.listdir(tmp):
            m = re.fullmatch(r"p-0*(\d+)\.(png|jpg)", f)
            if m:
                os.replace(os.path.join(tmp, f), os.path.join(imgs, "%d.%s" % (int(m.group(1)), fmt)))
        shutil.rmtree(tmp, ignore_errors=True)
    ptext = pdf_text_pages(pdf, a, b)
    pages = []
    for i in range(a, b + 1):
        p = {"page": i, "mime": "image/png" if slides else "image/jpeg"}
        img = os.path.join(imgs, "%d.%s" % (i, fmt))
        if os.path.exists(img):
            p["base64"] = b64file(img)
        if texts is not None and i - 1 < len(texts):
            p.update(texts[i - 1])
        else:
            p["text"] = ptext[i - a].strip()[:4000]
        pages.append(p)
    res.update({"kind": "pages", "family": fam, "page_count": n, "first": a, "last": b,
                "pages": pages, "rendered": True})
    if info.get("Title"):
        res["title"] = info["Title"]
    return res


def structured(res, full, real, ext, fam, texts):
    why = "no pictures: LibreOffice is not in this sandbox image, so this is the text only"
    pages = []
    if texts is not None:
        pages = [dict(t, page=i) for i, t in enumerate(texts, 1)]
    elif ext == ".docx":
        blocks = docx_blocks(real)
        pages = [{"page": 1, "text": "\n".join(b["text"] for b in blocks)[:20000]}]
    else:
        raise Fail("%s: %s files need LibreOffice, which this sandbox image lacks" % (full, ext))
    res.update({"kind": "pages", "family": fam, "page_count": len(pages), "first": 1,
                "last": len(pages), "pages": pages[:SLIDE_CAP], "rendered": False, "notes": [why]})
    return res


# ------------------------------------------------------------------ parse_pdf

SPLIT = re.compile(r"\S+(?: \S+)*")


def tables_of(text):
    """Runs of 2+ lines whose cells (split on 2+ spaces) line up in 2+ columns."""
    lines = text.split("\n")
    tables, cur = [], []

    def cells(line):
        return [(m.start(), m.group()) for m in SPLIT.finditer(line)]

    def flush():
        if len(cur) >= 2:
            tables.append([[c for _, c in r] for r in cur])
        cur.clear()

    prev = None
    blank = 0
    for line in lines:
        cs = cells(line)
        if len(cs) >= 2 and re.search(r"\S {2,}\S", line):
            starts = {s for s, _ in cs}
            if cur and prev is not None and not (len(starts & prev) >= 1 or
                                                 abs(len(cs) - len(cur[-1])) <= 1):
                flush()
            cur.append(cs)
            prev = starts
            blank = 0
        elif not line.strip() and cur and blank == 0:
            blank = 1  # one blank line between rows keeps the table
        else:
            flush()
            prev = None
            blank = 0
    flush()
    return tables


def op_parse_pdf(req):
    full, real, size = confine(req.get("path"))
    fam, _ = family_of(full, real)
    if fam != "pdf":
        raise Fail("%s is not a PDF" % full)
    n, info = pdf_info(real)
    a, b = page_range(req.get("pages"), n, PDF_TEXT_CAP)
    want_tables = req.get("tables", True) is not False
    texts = pdf_text_pages(real, a, b, layout=True)
    scans = image_pages(real)
    pages = []
    for i, t in enumerate(texts, a):
        p = {"page": i, "text": t.rstrip()[:20000]}
        if not t.strip():
            p["scanned"] = i in scans
            p["note"] = ("a scanned page: an image without a text layer (no OCR here)" if i in scans
                         else "an empty page")
        elif want_tables:
            tb = tables_of(t)
            if tb:
                p["tables"] = tb[:20]
        pages.append(p)
    meta = {k: info[k] for k in ("Title", "Author", "Subject", "Creator", "Producer",
                                 "CreationDate", "ModDate", "Page size", "Encrypted",
                                 "PDF version") if k in info}
    return {"path": full, "size": size, "page_count": n, "first": a, "last": b,
            "metadata": meta, "pages": pages}


# ------------------------------------------------------------------ compare

def dmp_hunks(a, b):
    try:
        import diff_match_patch as dm
        d = dm.diff_match_patch()
        d.Diff_Timeout = 1.0
        diffs = d.diff_main(a, b)
        d.diff_cleanupSemantic(diffs)
        return [[{-1: "del", 0: "eq", 1: "ins"}[op], t] for op, t in diffs]
    except ImportError:
        import difflib
        aw, bw = re.split(r"(\s+)", a), re.split(r"(\s+)", b)
        out = []
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, aw, bw, autojunk=False).get_opcodes():
            if tag == "equal":
                out.append(["eq", "".join(aw[i1:i2])])
            else:
                if i2 > i1:
                    out.append(["del", "".join(aw[i1:i2])])
                if j2 > j1:
                    out.append(["ins", "".join(bw[j1:j2])])
        return out


class Changes:
    def __init__(self, cap):
        self.cap = cap
        self.items = []
        self.more = 0
        self.counts = {"added": 0, "removed": 0, "changed": 0}

    def add(self, kind, where, old=None, new=None, **kw):
        self.counts[kind] += 1
        if len(self.items) >= self.cap:
            self.more += 1
            return
        c = {"kind": kind, "where": where}
        if old is not None:
            c["old"] = old[:4000]
        if new is not None:
            c["new"] = new[:4000]
        if kind == "changed" and old is not None and new is not None and len(old) + len(new) < 20000:
            c["hunks"] = dmp_hunks(old, new)
        c.update(kw)
        self.items.append(c)


def align(a, b, key=lambda x: x):
    import difflib
    return difflib.SequenceMatcher(None, [key(x) for x in a], [key(x) for x in b],
                                   autojunk=False).get_opcodes()


def pair_blocks(ch, a, b, ops, where_a, where_b, text=lambda x: x, similar=0.0):
    import difflib
    for tag, i1, i2, j1, j2 in ops:
        if tag == "equal":
            continue
        k = 0
        if tag == "replace":
            while i1 + k < i2 and j1 + k < j2:
                ta, tb = text(a[i1 + k]), text(b[j1 + k])
                if similar and difflib.SequenceMatcher(None, ta, tb).quick_ratio() < similar:
                    break
                ch.add("changed", where_b(j1 + k, b[j1 + k]), ta, tb,
                       old_where=where_a(i1 + k, a[i1 + k]))
                k += 1
        for i in range(i1 + k, i2):
            ch.add("removed", where_a(i, a[i]), text(a[i]), None)
        for j in range(j1 + k, j2):
            ch.add("added", where_b(j, b[j]), None, text(b[j]))


def cmp_text(ch, ra, rb, ctx):
    def lines(p):
        with open(p, "rb") as f:
            data = f.read()
        return data.decode("utf-8", "replace").splitlines()

    a, b = lines(ra), lines(rb)
    pair_blocks(ch, a, b, align(a, b), lambda i, _: "line %d" % (i + 1),
                lambda j, _: "line %d" % (j + 1))
    return "lines", len(a), len(b)


def cmp_sheets(ch, ra, rb, ext_a, ext_b, tmp):
    def load(real, ext, sub):
        if ext in (".csv", ".tsv"):
            return read_csv(real, ext), []
        return read_workbook(real, ext, os.path.join(tmp, sub))

    (sa, na), (sb, nb) = load(ra, ext_a, "a"), load(rb, ext_b, "b")
    notes = sorted(set(na + nb))
    if ext_a in (".csv", ".tsv") and ext_b in (".csv", ".tsv"):
        sa[0]["name"] = sb[0]["name"] = "sheet"
    byname_b = {s["name"]: s for s in sb}
    names_a = [s["name"] for s in sa]
    for s in sa:
        if s["name"] not in byname_b:
            ch.add("removed", "sheet %s" % s["name"], "%d rows" % len(s["rows"]), None)
    for s in sb:
        if s["name"] not in names_a:
            ch.add("added", "sheet %s" % s["name"], None, "%d rows" % len(s["rows"]))
    for s in sa:
        t = byname_b.get(s["name"])
        if t is None:
            continue
        cmp_grid(ch, s, t)
    return "cells", sum(len(s["rows"]) for s in sa), sum(len(s["rows"]) for s in sb), notes


def cmp_grid(ch, s, t):
    name = s["name"]
    A, B = s["rows"], t["rows"]
    # columns aligned by header (the first row) when both have one
    cols_a = A[0] if A else []
    cols_b = B[0] if B else []
    colmap = {}
    if cols_a and cols_b and len(set(cols_a)) == len(cols_a) and len(set(cols_b)) == len(cols_b) \
            and cols_a != cols_b and len(set(cols_a) & set(cols_b)) >= max(1, len(cols_a) // 2):
        for tag, i1, i2, j1, j2 in align(cols_a, cols_b):
            if tag == "equal":
                for k in range(i2 - i1):
                    colmap[i1 + k] = j1 + k
            else:
                for i in range(i1, i2):
                    if cols_a[i] in cols_b:
                        colmap[i] = cols_b.index(cols_a[i])
                    else:
                        ch.add("removed", "%s!%s (column %s)" % (name, col_name(i), cols_a[i]),
                               cols_a[i], None)
                for j in range(j1, j2):
                    if cols_b[j] not in cols_a:
                        ch.add("added", "%s!%s (column %s)" % (name, col_name(j), cols_b[j]), None,
                               cols_b[j])
    else:
        for i in range(max(len(cols_a), len(cols_b), max((len(r) for r in A + B), default=0))):
            colmap[i] = i

    def proj(row):
        out = []
        for i in sorted(colmap):
            out.append(row[i] if i < len(row) else "")
        return tuple(out)

    def projb(row):
        out = []
        for i in sorted(colmap):
            j = colmap[i]
            out.append(row[j] if j < len(row) else "")
        return tuple(out)

    pa, pb = [proj(r) for r in A], [projb(r) for r in B]
    order = sorted(colmap)
    fa, fb = s.get("formulas", {}), t.get("formulas", {})
    import difflib
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, pa, pb, autojunk=False).get_opcodes():
        if tag == "equal":
            for k in range(i2 - i1):
                cmp_formulas(ch, name, i1 + k, j1 + k, order, colmap, fa, fb)
            continue
        k = 0
        if tag == "replace":
            while i1 + k < i2 and j1 + k < j2:
                ra_, rb_ = pa[i1 + k], pb[j1 + k]
                same = sum(1 for x, y in zip(ra_, rb_) if x == y)
                if len(ra_) > 1 and same * 2 < len(ra_):
                    break
                for n, (x, y) in enumerate(zip(ra_, rb_)):
                    if x != y:
                        cb = "%s%d" % (col_name(colmap[order[n]]), j1 + k + 1)
                        ca = "%s%d" % (col_name(order[n]), i1 + k + 1)
                        extra = {}
                        if relative(fa.get(ca), i1 + k, order[n]) != \
                                relative(fb.get(cb), j1 + k, colmap[order[n]]):
                            extra = {"old_formula": fa.get(ca), "new_formula": fb.get(cb)}
                        ch.add("changed", "%s!%s" % (name, cb), x, y, **extra)
                cmp_formulas(ch, name, i1 + k, j1 + k, order, colmap, fa, fb, values_differ=True)
                k += 1
        for i in range(i1 + k, i2):
            ch.add("removed", "%s row %d" % (name, i + 1), " | ".join(pa[i]), None)
        for j in range(j1 + k, j2):
            ch.add("added", "%s row %d" % (name, j + 1), None, " | ".join(pb[j]))


REF = re.compile(r"(\$?)([A-Z]{1,3})(\$?)(\d+)(?![\d(])")


def col_num(s):
    n = 0
    for ch in s:
        n = n * 26 + ord(ch) - 64
    return n - 1


def relative(f, row, col):
    """A formula with its relative references as offsets from its cell, so a
    formula moved down with its row (=B2+C2 in D2 -> =B3+C3 in D3) is the same."""
    if not f:
        return f

    def sub(m):
        c = m.group(2) if m.group(1) else "C[%d]" % (col_num(m.group(2)) - col)
        r = m.group(4) if m.group(3) else "R[%d]" % (int(m.group(4)) - 1 - row)
        return c + r

    return REF.sub(sub, f)


def cmp_formulas(ch, name, i, j, order, colmap, fa, fb, values_differ=False):
    for c in order:
        ca = "%s%d" % (col_name(c), i + 1)
        cb = "%s%d" % (col_name(colmap[c]), j + 1)
        x, y = fa.get(ca), fb.get(cb)
        if relative(x, i, c) != relative(y, j, colmap[c]) and (x or y):
            if values_differ:
                continue  # reported with the value change
            ch.add("changed", "%s!%s formula" % (name, cb), x or "(a value)", y or "(a value)")


def cmp_docx(ch, ra, rb):
    a, b = docx_blocks(ra), docx_blocks(rb)

    def where(i, x):
        if x["kind"] == "row":
            return "table %d row %d" % (x["table"], x["row"])
        return "paragraph %d%s" % (i + 1, " (%s)" % x["style"] if x["style"] else "")

    pair_blocks(ch, a, b, align(a, b, key=lambda x: (x["kind"], x["text"])), where, where,
                text=lambda x: x["text"])
    return "paragraphs", len(a), len(b)


def cmp_pptx(ch, ra, rb):
    a, b = pptx_slides(ra), pptx_slides(rb)
    import difflib
    ops = align(a, b, key=lambda s: (s["title"], s["body"], s["notes"]))
    for tag, i1, i2, j1, j2 in ops:
        if tag == "equal":
            continue
        # inside a changed run, pair slides by title first, then by position
        used = set()
        pairs = []
        for i in range(i1, i2):
            best, score = None, 0.0
            for j in range(j1, j2):
                if j in used:
                    continue
                r = difflib.SequenceMatcher(None, a[i]["title"] + "\n" + a[i]["body"],
                                            b[j]["title"] + "\n" + b[j]["body"]).ratio()
                if a[i]["title"] and a[i]["title"] == b[j]["title"]:
                    r += 1
                if r > score:
                    best, score = j, r
            if best is not None and score >= 0.4:
                used.add(best)
                pairs.append((i, best))
            else:
                ch.add("removed", "slide %d" % (i + 1), a[i]["title"] or a[i]["body"][:80], None)
        for i, j in pairs:
            for field in ("title", "body", "notes"):
                if a[i][field] != b[j][field]:
                    ch.add("changed", "slide %d%s" % (j + 1, "" if field == "body" else " " + field),
                           a[i][field], b[j][field], old_where="slide %d" % (i + 1))
        for j in range(j1, j2):
            if j not in used:
                ch.add("added", "slide %d" % (j + 1), None, b[j]["title"] or b[j]["body"][:80])
    return "slides", len(a), len(b)


def cmp_pdf(ch, ra, rb):
    def words(p):
        n, _ = pdf_info(p)
        out = []
        for i, t in enumerate(pdf_text_pages(p, 1, min(n, 500)), 1):
            out.extend((w, i) for w in t.split())
        return out, n

    (a, na), (b, nb) = words(ra), words(rb)
    for tag, i1, i2, j1, j2 in align(a, b, key=lambda x: x[0]):
        if tag == "equal":
            continue
        old = " ".join(w for w, _ in a[i1:i2])
        new = " ".join(w for w, _ in b[j1:j2])
        page = b[j1][1] if j1 < len(b) else (b[-1][1] if b else 1)
        opage = a[i1][1] if i1 < len(a) else (a[-1][1] if a else 1)
        kind = "changed" if old and new else "removed" if old else "added"
        ch.add(kind, "page %d" % page, old or None, new or None, old_where="page %d" % opage)
    return "words", na, nb


def cmp_image(ch, ra, rb):
    from PIL import Image, ImageChops
    a, b = Image.open(ra), Image.open(rb)
    Image.MAX_IMAGE_PIXELS = 50_000_000
    info = {"old_size": list(a.size), "new_size": list(b.size)}
    if a.size != b.size:
        ch.add("changed", "size", "%dx%d" % a.size, "%dx%d" % b.size)
        b = b.resize(a.size)
    d = ImageChops.difference(a.convert("RGB"), b.convert("RGB")).convert("L")
    box = d.point(lambda v: 255 if v > 16 else 0).getbbox()
    hist = d.point(lambda v: 255 if v > 16 else 0).histogram()
    changed = hist[255]
    pct = 100.0 * changed / (a.size[0] * a.size[1] or 1)
    if box:
        ch.add("changed", "box (%d,%d)-(%d,%d)" % box, None, None, percent=round(pct, 3),
               box=list(box))
    info["percent_changed"] = round(pct, 3)
    return "pixels", info, None


def op_compare(req):
    fa, ra, sa = confine(req.get("a"))
    fb, rb, sb = confine(req.get("b"))
    cap = max(1, min(int(req.get("max_changes") or 200), 1000))
    mode = req.get("mode") or "auto"
    fam_a, ext_a = family_of(fa, ra)
    fam_b, ext_b = family_of(fb, rb)
    res = {"a": fa, "b": fb, "family": fam_a}
    same = sa == sb and sha256(ra) == sha256(rb)
    if fam_a != fam_b and mode != "text":
        raise Fail("%s is %s and %s is %s: compare two files of one family (or mode \"text\" "
                   "to compare their text)" % (fa, article(fam_a), fb, article(fam_b)))
    if same:
        res.update({"identical": True, "summary": "identical: the two files are byte for byte "
                    "the same", "changes": [], "counts": {"added": 0, "removed": 0, "changed": 0}})
        return res
    ch = Changes(cap)
    notes = []
    tmp = tempfile.mkdtemp(prefix="cmp-", dir=tempfile.gettempdir())
    try:
        if mode == "text" or fam_a == "text":
            unit, n1, n2 = cmp_text(ch, ra, rb, req.get("context", 3))
        elif fam_a == "sheet":
            unit, n1, n2, notes = cmp_sheets(ch, ra, rb, ext_a, ext_b, tmp)
        elif fam_a == "document":
            if ext_a != ".docx" or ext_b != ".docx":
                raise Fail("documents are compared as .docx (convert %s first)" %
                           (fa if ext_a != ".docx" else fb))
            unit, n1, n2 = cmp_docx(ch, ra, rb)
        elif fam_a == "slides":
            if ext_a != ".pptx" or ext_b != ".pptx":
                raise Fail("decks are compared as .pptx")
            unit, n1, n2 = cmp_pptx(ch, ra, rb)
        elif fam_a == "pdf":
            unit, n1, n2 = cmp_pdf(ch, ra, rb)
        elif fam_a == "image":
            unit, n1, n2 = cmp_image(ch, ra, rb)
            res["image"] = n1
            n1 = n2 = None
        else:
            raise Fail("cannot compare %s files" % fam_a)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    c = ch.counts
    total = c["added"] + c["removed"] + c["changed"]
    if total == 0:
        summary = "no differences in content (the files differ only in their bytes: metadata, " \
                  "formatting or packaging)"
    else:
        summary = "%d change%s: %d added, %d removed, %d changed (%s)" % (
            total, "" if total == 1 else "s", c["added"], c["removed"], c["changed"], unit)
    res.update({"identical": False, "summary": summary, "counts": c, "unit": unit,
                "changes": ch.items, "more": ch.more, "notes": notes})
    if n1 is not None:
        res["sizes"] = [n1, n2]
    if req.get("output"):
        res["notes"] = notes + ["output is not written: tracked-change documents are not "
                                "supported in this version"]
    return res


def article(f):
    return {"slides": "a deck", "document": "a document", "sheet": "a spreadsheet",
            "pdf": "a PDF", "image": "an image", "text": "a text file"}[f]


# ------------------------------------------------------------------ main

OPS = {"preview": op_preview, "parse_pdf": op_parse_pdf, "compare": op_compare}


def emit(obj):
    s = json.dumps(obj, ensure_ascii=True, separators=(",", ":"))
    w = sys.stdout.write
    w("\nTUSKO-OFFICE-BEGIN\n")
    for i in range(0, len(s), 4000):
        w(s[i:i + 4000])
        w("\n")
    w("TUSKO-OFFICE-END\n")
    sys.stdout.flush()


def main():
    t0 = time.monotonic()
    try:
        req = json.loads(os.environ.get("TUSKO_OFFICE_REQ", "{}"))
        op = OPS.get(req.get("op"))
        if not op:
            raise Fail("unknown operation")
        res = op(req)
        res["seconds"] = round(time.monotonic() - t0, 3)
        res["libreoffice"] = bool(soffice())
        emit(res)
    except Fail as e:
        emit({"error": str(e)})
    except MemoryError:
        emit({"error": "the file needs more memory than the sandbox has"})
    except Exception as e:  # a bug or a file that broke a library: say which
        emit({"error": "could not read the file: %s: %s" % (type(e).__name__, str(e)[:300])})


main()
