#!/usr/bin/env python3
"""build_report.py REPORT_MD OUT_DOCX: a Word report from a Markdown subset
(references/markdown.md): title page, table of contents, numbered headings,
tables, figures with captions. Prints the outline and warnings."""
import os
import re
import sys

from docx import Document
from docx.enum.section import WD_SECTION
from docx.enum.table import WD_TABLE_ALIGNMENT
from docx.enum.text import WD_ALIGN_PARAGRAPH, WD_BREAK
from docx.oxml import OxmlElement
from docx.oxml.ns import qn
from docx.shared import Cm, Pt

INLINE = re.compile(r"(\*\*[^*]+\*\*|\*[^*]+\*|`[^`]+`|\[[^\]]+\]\([^)]+\))")


def add_inline(par, text):
    for part in INLINE.split(text):
        if not part:
            continue
        if part.startswith("**") and part.endswith("**"):
            par.add_run(part[2:-2]).bold = True
        elif part.startswith("`") and part.endswith("`"):
            r = par.add_run(part[1:-1])
            r.font.name = "Liberation Mono"
        elif part.startswith("[") and "](" in part:
            label, url = part[1:-1].split("](", 1)
            par.add_run(f"{label} ({url})")
        elif part.startswith("*") and part.endswith("*") and len(part) > 2:
            par.add_run(part[1:-1]).italic = True
        else:
            par.add_run(part)


def field(par, instr, placeholder):
    """A Word field (TOC, SEQ) with a placeholder result."""
    r = par.add_run()
    b = OxmlElement("w:fldChar")
    b.set(qn("w:fldCharType"), "begin")
    r._r.append(b)
    r2 = par.add_run()
    t = OxmlElement("w:instrText")
    t.set(qn("xml:space"), "preserve")
    t.text = instr
    r2._r.append(t)
    r3 = par.add_run()
    s = OxmlElement("w:fldChar")
    s.set(qn("w:fldCharType"), "separate")
    r3._r.append(s)
    par.add_run(placeholder)
    r4 = par.add_run()
    e = OxmlElement("w:fldChar")
    e.set(qn("w:fldCharType"), "end")
    r4._r.append(e)


def parse(md):
    meta, lines = {}, md.splitlines()
    if lines and lines[0].strip() == "---":
        for k in range(1, len(lines)):
            if lines[k].strip() == "---":
                for ln in lines[1:k]:
                    if ":" in ln:
                        key, v = ln.split(":", 1)
                        meta[key.strip()] = v.strip().strip('"')
                lines = lines[k + 1:]
                break
    blocks, i = [], 0
    while i < len(lines):
        ln = lines[i]
        s = ln.strip()
        if not s:
            i += 1
            continue
        m = re.match(r"^(#{1,3})\s+(.*)$", s)
        if m:
            blocks.append(("h", len(m.group(1)), m.group(2).strip()))
            i += 1
            continue
        if s == "\\pagebreak":
            blocks.append(("break",))
            i += 1
            continue
        m = re.match(r"^!\[([^\]]*)\]\(([^)]+)\)$", s)
        if m:
            blocks.append(("fig", m.group(1), m.group(2)))
            i += 1
            continue
        caption = None
        if s.startswith("Table:") and i + 1 < len(lines) and lines[i + 1].strip().startswith("|"):
            caption = s[6:].strip()
            i += 1
            s = lines[i].strip()
        if s.startswith("|"):
            rows = []
            while i < len(lines) and lines[i].strip().startswith("|"):
                rows.append([c.strip() for c in lines[i].strip().strip("|").split("|")])
                i += 1
            align, header = [], True
            if len(rows) > 1 and all(re.match(r"^:?-{3,}:?$", c) for c in rows[1]):
                align = ["right" if c.endswith(":") else "left" for c in rows[1]]
                rows = [rows[0]] + rows[2:]
            else:
                header = False
            blocks.append(("table", rows, align, header, caption))
            continue
        m = re.match(r"^([-*]|\d+\.)\s+(.*)$", s)
        if m:
            items, numbered = [], m.group(1)[0].isdigit()
            while i < len(lines):
                mm = re.match(r"^([-*]|\d+\.)\s+(.*)$", lines[i].strip())
                if not mm:
                    break
                items.append(mm.group(2))
                i += 1
            blocks.append(("list", numbered, items))
            continue
        para = []
        while i < len(lines) and lines[i].strip() and not re.match(r"^(#{1,3}\s|\||!\[|[-*]\s|\d+\.\s)", lines[i].strip()):
            para.append(lines[i].strip())
            i += 1
        blocks.append(("p", " ".join(para)))
    if "title" not in meta:
        for b in blocks:
            if b[0] == "h":
                meta["title"] = b[2]
                blocks.remove(b)
                break
    return meta, blocks


def build(md_path, out):
    with open(md_path, encoding="utf-8") as f:
        meta, blocks = parse(f.read())
    base = os.path.dirname(os.path.abspath(md_path))
    doc = Document()
    st = doc.styles["Normal"]
    st.font.name = "Liberation Sans"
    st.font.size = Pt(11)
    warnings, outline = [], []
    # title page
    for _ in range(6):
        doc.add_paragraph()
    t = doc.add_paragraph(style="Title")
    t.add_run(meta.get("title", "Report"))
    if meta.get("subtitle"):
        doc.add_paragraph(meta["subtitle"], style="Subtitle")
    info = " · ".join(v for v in (meta.get("author"), meta.get("date")) if v)
    if info:
        doc.add_paragraph(info)
    doc.add_paragraph().add_run().add_break(WD_BREAK.PAGE)
    # contents: a TOC field Word updates, with the entries written already
    doc.add_paragraph("Contents", style="Heading 1")
    toc = doc.add_paragraph()
    nums = [0, 0, 0]
    entries = []
    for b in blocks:
        if b[0] == "h":
            lvl = b[1] - 1
            nums[lvl] += 1
            for k in range(lvl + 1, 3):
                nums[k] = 0
            entries.append((lvl, ".".join(str(n) for n in nums[:lvl + 1]), b[2]))
    field(toc, 'TOC \\o "1-3" \\h \\z \\u', "")
    for lvl, num, text in entries:
        p = doc.add_paragraph(f"{num}  {text}")
        p.paragraph_format.left_indent = Cm(0.8 * lvl)
    doc.add_section(WD_SECTION.NEW_PAGE)
    # body
    nums, fig_n, tab_n, since_heading, cur = [0, 0, 0], 0, 0, 1, None
    for b in blocks:
        kind = b[0]
        if kind == "h":
            if cur is not None and since_heading == 0:
                warnings.append(f"section \"{cur}\" is empty")
            lvl = b[1] - 1
            nums[lvl] += 1
            for k in range(lvl + 1, 3):
                nums[k] = 0
            num = ".".join(str(n) for n in nums[:lvl + 1])
            doc.add_heading(f"{num}  {b[2]}", level=lvl + 1)
            outline.append("  " * lvl + f"{num} {b[2]}")
            cur, since_heading = b[2], 0
            continue
        since_heading += 1
        if kind == "p":
            add_inline(doc.add_paragraph(), b[1])
        elif kind == "break":
            doc.add_paragraph().add_run().add_break(WD_BREAK.PAGE)
        elif kind == "list":
            style = "List Number" if b[1] else "List Bullet"
            for it in b[2]:
                add_inline(doc.add_paragraph(style=style), it)
        elif kind == "fig":
            path = b[2] if os.path.isabs(b[2]) else os.path.join(base, b[2])
            if not os.path.exists(path):
                warnings.append(f"figure not found: {b[2]}")
                continue
            doc.add_picture(path, width=Cm(15))
            doc.paragraphs[-1].alignment = WD_ALIGN_PARAGRAPH.CENTER
            fig_n += 1
            cap = doc.add_paragraph(style="Caption")
            cap.add_run("Figure ")
            field(cap, "SEQ Figure \\* ARABIC", str(fig_n))
            cap.add_run(f": {b[1]}")
            outline.append(f"    [figure {fig_n}] {b[1]}")
        elif kind == "table":
            rows, align, header, caption = b[1], b[2], b[3], b[4]
            if not header:
                warnings.append(f"a table in \"{cur}\" has no header row (add |---| under the first row)")
            ncol = max(len(r) for r in rows)
            tab_n += 1
            if caption:
                cp = doc.add_paragraph(style="Caption")
                cp.add_run("Table ")
                field(cp, "SEQ Table \\* ARABIC", str(tab_n))
                cp.add_run(f": {caption}")
            tbl = doc.add_table(rows=len(rows), cols=ncol)
            tbl.style = "Light Grid Accent 1"
            tbl.alignment = WD_TABLE_ALIGNMENT.CENTER
            for r, row in enumerate(rows):
                for c in range(ncol):
                    cell = tbl.cell(r, c)
                    cell.text = ""
                    add_inline(cell.paragraphs[0], row[c] if c < len(row) else "")
                    if r == 0 and header:
                        for run in cell.paragraphs[0].runs:
                            run.bold = True
                    if c < len(align) and align[c] == "right":
                        cell.paragraphs[0].alignment = WD_ALIGN_PARAGRAPH.RIGHT
            doc.add_paragraph()
            outline.append(f"    [table {tab_n}] {caption or f'{len(rows)} rows x {ncol} columns'}")
    if cur is not None and since_heading == 0:
        warnings.append(f"section \"{cur}\" is empty")
    if not entries:
        warnings.append("no headings: the table of contents is empty")
    doc.core_properties.title = meta.get("title", "")
    doc.core_properties.author = meta.get("author", "")
    doc.save(out)
    print(f"wrote {out}: {len(entries)} headings, {fig_n} figures, {tab_n} tables")
    print("outline:")
    for o in outline:
        print("  " + o)
    for w in warnings:
        print("warning:", w)
    return 0


def main():
    if len(sys.argv) != 3:
        print("usage: build_report.py report.md report.docx", file=sys.stderr)
        return 1
    try:
        return build(sys.argv[1], sys.argv[2])
    except OSError as e:
        print(f"build_report: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
