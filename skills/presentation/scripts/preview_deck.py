#!/usr/bin/env python3
"""preview_deck.py DECK_JSON OUT_DIR: draws every slide of deck.json as a PNG
(OUT_DIR/slide-NN.png) and a contact sheet (OUT_DIR/contact.png), and prints a
warning for each rule of references/deck-schema.md a slide breaks. Exit status
0 even with warnings; 1 when the deck cannot be read."""
import io
import json
import os
import sys

from PIL import Image, ImageDraw, ImageFont

W, H = 1333, 750
FONT_DIRS = ["/usr/share/fonts/truetype/liberation", "/usr/share/fonts/truetype/dejavu"]


def font(size, bold=False):
    names = (["LiberationSans-Bold.ttf", "DejaVuSans-Bold.ttf"] if bold
             else ["LiberationSans-Regular.ttf", "DejaVuSans.ttf"])
    for d in FONT_DIRS:
        for n in names:
            p = os.path.join(d, n)
            if os.path.exists(p):
                return ImageFont.truetype(p, size)
    return ImageFont.load_default()


def wrap(draw, text, fnt, width):
    lines, line = [], ""
    for word in str(text).split():
        cand = (line + " " + word).strip()
        if draw.textlength(cand, font=fnt) <= width or not line:
            line = cand
        else:
            lines.append(line)
            line = word
    if line:
        lines.append(line)
    return lines


def chart_image(c, accent, w, h):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(w / 100, h / 100), dpi=100)
    cats = [str(x) for x in c.get("categories", [])]
    series = c.get("series", [])
    colours = ["#" + accent, "#8B949E", "#F0883E", "#3FB950", "#A371F7"]
    if c.get("type") == "pie" and series:
        ax.pie([float(v) for v in series[0].get("values", [])], labels=cats, colors=colours)
    elif c.get("type") == "line":
        for i, s in enumerate(series):
            ax.plot(cats, [float(v) for v in s.get("values", [])], marker="o",
                    color=colours[i % 5], label=s.get("name", ""))
    else:
        n = max(len(series), 1)
        for i, s in enumerate(series):
            xs = [k + i * 0.8 / n for k in range(len(cats))]
            ax.bar(xs, [float(v) for v in s.get("values", [])], width=0.8 / n,
                   color=colours[i % 5], label=s.get("name", ""))
        ax.set_xticks([k + 0.4 - 0.4 / n for k in range(len(cats))], cats)
    if c.get("unit"):
        ax.set_ylabel(c["unit"])
    if len(series) > 1:
        ax.legend()
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png")
    plt.close(fig)
    buf.seek(0)
    return Image.open(buf).convert("RGB")


def check(i, s, warn):
    lay = s.get("layout", "bullets")
    t = str(s.get("title", ""))
    if not t:
        warn(i, "no title")
    if len(t) > 70:
        warn(i, f"title is {len(t)} characters (at most 70)")
    bullets = s.get("bullets") or []
    if len(bullets) > 5:
        warn(i, f"{len(bullets)} bullets (at most 5)")
    for b in bullets + (s.get("right") or []):
        if len(str(b).split()) > 12:
            warn(i, f"bullet over 12 words: {str(b).strip()[:40]}...")
    if lay not in ("title", "section", "closing") and not str(s.get("notes", "")).strip():
        warn(i, "no speaker notes")
    tab = s.get("table") or {}
    if len(tab.get("rows", [])) > 8:
        warn(i, f"table has {len(tab['rows'])} rows (at most 8)")


def draw_slide(i, s, accent):
    img = Image.new("RGB", (W, H), "white")
    d = ImageDraw.Draw(img)
    lay = s.get("layout", "bullets")
    acc = "#" + accent
    overflow = False
    if lay in ("title", "section", "closing"):
        if lay == "section":
            d.rectangle([0, 0, W, H], fill=acc)
        colour = "white" if lay == "section" else "#1A1A1A"
        y = 240
        for line in wrap(d, s.get("title", ""), font(54, True), W - 160):
            d.text((80, y), line, font=font(54, True), fill=colour)
            y += 64
        if s.get("subtitle"):
            d.text((80, y + 20), str(s["subtitle"]), font=font(28), fill=colour)
    else:
        d.rectangle([0, 0, W, 12], fill=acc)
        y = 36
        for line in wrap(d, s.get("title", ""), font(38, True), W - 120):
            d.text((60, y), line, font=font(38, True), fill="#1A1A1A")
            y += 46
        top = max(y + 20, 160)
        if lay == "chart" and s.get("chart"):
            img.paste(chart_image(s["chart"], accent, W - 160, H - top - 40), (80, top))
        elif lay == "table" and s.get("table"):
            t = s["table"]
            rows = [t.get("header", [])] + t.get("rows", [])
            ncol = max(len(r) for r in rows) if rows else 1
            cw = (W - 160) // max(ncol, 1)
            for r, row in enumerate(rows):
                ry = top + r * 52
                if r == 0:
                    d.rectangle([80, ry, W - 80, ry + 52], fill=acc)
                for c, v in enumerate(row):
                    d.text((90 + c * cw, ry + 12), str(v)[:28], font=font(22, r == 0),
                           fill="white" if r == 0 else "#1A1A1A")
                d.line([80, ry + 52, W - 80, ry + 52], fill="#D0D7DE")
            overflow = top + len(rows) * 52 > H - 30
        else:
            cols = [(s.get("bullets") or [], 60, W - 120)]
            if lay == "two-column":
                cols = [(s.get("bullets") or [], 60, W // 2 - 90),
                        (s.get("right") or [], W // 2 + 30, W // 2 - 90)]
            for items, x0, width in cols:
                by = top
                for b in items:
                    sub = str(b).startswith("  ")
                    f = font(22 if sub else 28)
                    x = x0 + (40 if sub else 0)
                    for k, line in enumerate(wrap(d, str(b).strip(), f, width - 40 - (x - x0))):
                        if k == 0:
                            d.ellipse([x, by + 12, x + 9, by + 21], fill=acc)
                        d.text((x + 24, by), line, font=f, fill="#1A1A1A")
                        by += 38
                    by += 10
                overflow = overflow or by > H - 40
    d.text((W - 60, H - 34), str(i), font=font(18), fill="#8B949E")
    return img, overflow


def main():
    if len(sys.argv) != 3:
        print("usage: preview_deck.py deck.json OUT_DIR", file=sys.stderr)
        return 1
    try:
        with open(sys.argv[1], encoding="utf-8") as f:
            deck = json.load(f)
        slides = deck["slides"]
        assert isinstance(slides, list) and slides
    except Exception as e:  # noqa: BLE001 - any reason the deck is unusable
        print(f"preview_deck: cannot read {sys.argv[1]}: {e}", file=sys.stderr)
        return 1
    accent = str((deck.get("theme") or {}).get("accent", "1F6FEB"))
    out = sys.argv[2]
    os.makedirs(out, exist_ok=True)
    warnings = []

    def warn(i, msg):
        warnings.append(f"slide {i}: {msg}")

    thumbs = []
    for i, s in enumerate(slides, 1):
        check(i, s, warn)
        img, overflow = draw_slide(i, s, accent)
        if overflow:
            warn(i, "content runs past the bottom of the slide")
        img.save(os.path.join(out, f"slide-{i:02d}.png"))
        thumbs.append(img.resize((W // 3, H // 3)))
    cols = 3
    rows = (len(thumbs) + cols - 1) // cols
    sheet = Image.new("RGB", (cols * (W // 3 + 20) + 20, rows * (H // 3 + 20) + 20), "#E6E8EB")
    for k, t in enumerate(thumbs):
        sheet.paste(t, (20 + (k % cols) * (W // 3 + 20), 20 + (k // cols) * (H // 3 + 20)))
    sheet.save(os.path.join(out, "contact.png"))
    print(f"{len(slides)} slides drawn in {out}/ (contact.png is the overview)")
    for w in warnings:
        print("warning:", w)
    if not warnings:
        print("no warnings")
    return 0


if __name__ == "__main__":
    sys.exit(main())
