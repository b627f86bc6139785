#!/usr/bin/env python3
"""build_model.py MODEL_JSON OUT_XLSX: a financial model workbook from
model.json (references/model-schema.md). Every cell of the Model sheet is a
formula referring to the Inputs sheet's selected scenario."""
import json
import re
import sys

from openpyxl import Workbook
from openpyxl.chart import LineChart, Reference
from openpyxl.styles import Font, PatternFill
from openpyxl.utils import get_column_letter
from openpyxl.worksheet.datavalidation import DataValidation

NAME = re.compile(r"^[a-z][a-z0-9_]*$")
TOKEN = re.compile(r"\s*(?:(\d+(?:\.\d+)?)|([A-Za-z_][A-Za-z0-9_]*)|(.))")
FUNCS = {"min": "MIN", "max": "MAX", "abs": "ABS", "round": "ROUND"}
FORMATS = {"number": "#,##0.00", "money": "#,##0", "percent": "0.0%", "integer": "0"}
INPUT_FILL = PatternFill("solid", fgColor="FFF2CC")
BOLD = Font(bold=True)


class SpecError(Exception):
    pass


def translate(expr, where, resolve):
    """The Excel text of a formula of the spec; resolve(name) gives a cell."""
    out, pos = [], 0
    expr = str(expr)
    while pos < len(expr):
        m = TOKEN.match(expr, pos)
        if not m or m.end() == pos:
            break
        pos = m.end()
        num, name, op = m.groups()
        if num:
            out.append(num)
        elif name:
            rest = expr[pos:].lstrip()
            if rest.startswith("("):
                if name not in FUNCS:
                    raise SpecError(f"{where}: unknown function {name}()")
                out.append(FUNCS[name])
            else:
                out.append(resolve(name))
        elif op in "+-*/(),":
            out.append(op)
        elif op.strip():
            raise SpecError(f"{where}: character {op!r} not allowed")
    return "".join(out)


def scenario_values(inp):
    vals = []
    for k in ("base", "upside", "downside"):
        v = inp.get(k, inp.get("base", inp.get("value")))
        if not isinstance(v, (int, float)):
            raise SpecError(f"input {inp.get('name')}: {k} must be a number")
        vals.append(v)
    return vals


def build(spec):
    periods = spec.get("periods") or []
    if not (1 <= len(periods) <= 120):
        raise SpecError("periods: 1 to 120 labels")
    inputs, lines = spec.get("inputs") or [], spec.get("lines") or []
    if not lines:
        raise SpecError("lines: at least one")
    wb = Workbook()
    ws_in = wb.active
    ws_in.title = "Inputs"
    title = str(spec.get("title", "Model"))
    ws_in["A1"] = title
    ws_in["A1"].font = Font(bold=True, size=14)
    ws_in["A2"] = "Scenario (1 base, 2 upside, 3 downside)"
    ws_in["B2"] = 1
    ws_in["B2"].fill = INPUT_FILL
    dv = DataValidation(type="whole", operator="between", formula1="1", formula2="3")
    ws_in.add_data_validation(dv)
    dv.add("B2")
    ws_in["C2"] = '=CHOOSE($B$2,"Base","Upside","Downside")'
    for c, h in enumerate(["Input", "Unit", "Base", "Upside", "Downside", "Selected"], 1):
        ws_in.cell(row=4, column=c, value=h).font = BOLD
    cell_of = {}
    for r, inp in enumerate(inputs, 5):
        n = inp.get("name", "")
        if not NAME.match(n) or n in cell_of or n == "prev" or n.startswith("prev_"):
            raise SpecError(f"input name {n!r}: [a-z][a-z0-9_]*, unique, not prev")
        vals = scenario_values(inp)
        ws_in.cell(row=r, column=1, value=inp.get("label", n))
        ws_in.cell(row=r, column=2, value=inp.get("unit", ""))
        for k, v in enumerate(vals):
            c = ws_in.cell(row=r, column=3 + k, value=v)
            c.fill = INPUT_FILL
            if inp.get("unit") == "%":
                c.number_format = "0.0%"
        ws_in.cell(row=r, column=6, value=f"=CHOOSE($B$2,C{r},D{r},E{r})")
        cell_of[n] = f"Inputs!$F${r}"
    ws_in.column_dimensions["A"].width = 40

    ws = wb.create_sheet("Model")
    ws["A1"] = title
    ws["A1"].font = Font(bold=True, size=14)
    ws["A2"] = "=\"Scenario: \"&Inputs!C2"
    ws.cell(row=3, column=1, value="Line").font = BOLD
    for k, p in enumerate(periods):
        ws.cell(row=3, column=2 + k, value=str(p)).font = BOLD
    line_row = {}
    for r, ln in enumerate(lines, 4):
        n = ln.get("name", "")
        if not NAME.match(n) or n in line_row or n in cell_of or n == "prev" or n.startswith("prev_"):
            raise SpecError(f"line name {n!r}: [a-z][a-z0-9_]*, unique, not an input's")
        line_row[n] = r
    for r, ln in enumerate(lines, 4):
        n = ln["name"]
        ws.cell(row=r, column=1, value=ln.get("label", n))
        fmt = FORMATS.get(ln.get("format", "number"))
        if fmt is None:
            raise SpecError(f"line {n}: format {ln.get('format')!r} unknown")
        for k in range(len(periods)):
            col = get_column_letter(2 + k)
            prevcol = get_column_letter(1 + k)

            def resolve(name, k=k, col=col, prevcol=prevcol, n=n):
                if name in cell_of:
                    return cell_of[name]
                if name == "prev" or name.startswith("prev_"):
                    target = n if name == "prev" else name[5:]
                    if target not in line_row:
                        raise SpecError(f"line {n}: {name} names no line")
                    if k == 0:
                        raise SpecError(f"line {n}: {name} used in the first period (use first/next)")
                    return f"{prevcol}{line_row[target]}"
                if name in line_row:
                    if line_row[name] >= line_row[n]:
                        raise SpecError(f"line {n}: {name} is defined later (order the lines)")
                    return f"{col}{line_row[name]}"
                raise SpecError(f"line {n}: unknown name {name!r}")

            if "formula" in ln:
                expr = ln["formula"]
            elif "first" in ln and "next" in ln:
                expr = ln["first"] if k == 0 else ln["next"]
            else:
                raise SpecError(f"line {n}: needs formula, or first and next")
            c = ws.cell(row=r, column=2 + k, value="=" + translate(expr, f"line {n}", resolve))
            c.number_format = fmt
        total = ln.get("total")
        if total in ("sum", "last"):
            tc = get_column_letter(2 + len(periods))
            ws.cell(row=3, column=2 + len(periods), value="Total").font = BOLD
            first, last = get_column_letter(2), get_column_letter(1 + len(periods))
            v = f"=SUM({first}{r}:{last}{r})" if total == "sum" else f"={last}{r}"
            ws[f"{tc}{r}"] = v
            ws[f"{tc}{r}"].number_format = fmt
    ws.column_dimensions["A"].width = 34

    # scenarios side by side: the last period of every line under each
    # scenario cannot be a formula of the Model sheet (one scenario at a time),
    # so the sheet says how to read it and links the selected case.
    sc = wb.create_sheet("Scenarios")
    sc["A1"] = "Selected scenario"
    sc["B1"] = "=Inputs!C2"
    sc["A3"] = "Line"
    sc["B3"] = f"Last period ({periods[-1]})"
    sc["A3"].font = sc["B3"].font = BOLD
    last = get_column_letter(1 + len(periods))
    for i, ln in enumerate(lines, 4):
        sc.cell(row=i, column=1, value=ln.get("label", ln["name"]))
        sc.cell(row=i, column=2, value=f"=Model!{last}{line_row[ln['name']]}")
    sc.cell(row=len(lines) + 5, column=1,
            value="Change Inputs!B2 to 1, 2 or 3 to see each scenario; check_model.py prints all three.")

    ch = spec.get("chart")
    if ch:
        chart = LineChart()
        chart.title = str(ch.get("title", ""))
        chart.height, chart.width = 9, 18
        for name in ch.get("lines", []):
            if name not in line_row:
                raise SpecError(f"chart: {name!r} is not a line")
            r = line_row[name]
            data = Reference(ws, min_col=1, max_col=1 + len(periods), min_row=r, max_row=r)
            chart.add_data(data, titles_from_data=True, from_rows=True)
        chart.set_categories(Reference(ws, min_col=2, max_col=1 + len(periods), min_row=3, max_row=3))
        ws.add_chart(chart, f"A{len(lines) + 6}")
    return wb


def main():
    if len(sys.argv) != 3:
        print("usage: build_model.py model.json model.xlsx", file=sys.stderr)
        return 1
    try:
        with open(sys.argv[1], encoding="utf-8") as f:
            spec = json.load(f)
        wb = build(spec)
    except (OSError, ValueError, SpecError) as e:
        print(f"build_model: {e}", file=sys.stderr)
        return 1
    wb.save(sys.argv[2])
    print(f"wrote {sys.argv[2]}: {len(spec['inputs'])} inputs, {len(spec['lines'])} lines, "
          f"{len(spec['periods'])} periods")
    return 0


if __name__ == "__main__":
    sys.exit(main())
