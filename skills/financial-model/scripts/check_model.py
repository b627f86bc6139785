#!/usr/bin/env python3
"""check_model.py MODEL_XLSX: checks a workbook made by build_model.py (or by
hand, with the same sheets): every data cell of the Model sheet must be a
formula; formulas must not refer to empty cells; then it computes every line
for the three scenarios (a small evaluator for + - * / and MIN MAX ABS ROUND
SUM CHOOSE) and prints the last period. Exit status 1 when a check fails."""
import re
import sys

from openpyxl import load_workbook
from openpyxl.utils import column_index_from_string, get_column_letter

REF = re.compile(r"(?:(\w+)!)?\$?([A-Z]{1,3})\$?(\d+)(?::\$?([A-Z]{1,3})\$?(\d+))?")


def py_expr(formula, sheet):
    out, pos = [], 0
    body = formula[1:]
    while pos < len(body):
        m = REF.match(body, pos)
        if m and (pos == 0 or not (body[pos - 1].isalnum() or body[pos - 1] == "_")):
            sh = m.group(1) or sheet
            if m.group(4):
                out.append(f"rng({sh!r},{m.group(2)!r},{int(m.group(3))},{m.group(4)!r},{int(m.group(5))})")
            else:
                out.append(f"ref({sh!r},{m.group(2)!r},{int(m.group(3))})")
            pos = m.end()
            continue
        fm = re.match(r"(MIN|MAX|ABS|ROUND|SUM|CHOOSE)\(", body[pos:])
        if fm:
            out.append("f_" + fm.group(1).lower() + "(")
            pos += len(fm.group(0))
            continue
        ch = body[pos]
        if ch in "0123456789.+-*/(), ":
            out.append(ch)
            pos += 1
            continue
        raise ValueError(f"unsupported formula {formula!r}")
    return "".join(out)


class Book:
    def __init__(self, wb, scenario):
        self.wb, self.scenario, self.cache, self.empty_refs = wb, scenario, {}, set()

    def ref(self, sheet, col, row):
        key = (sheet, col, row)
        if key in self.cache:
            return self.cache[key]
        if sheet == "Inputs" and col == "B" and row == 2:
            return self.scenario
        v = self.wb[sheet][f"{col}{row}"].value
        if v is None:
            self.empty_refs.add(f"{sheet}!{col}{row}")
            v = 0
        elif isinstance(v, str) and v.startswith("="):
            v = self.eval(v, sheet)
        self.cache[key] = v
        return v

    def rng(self, sheet, c1, r1, c2, r2):
        vals = []
        for c in range(column_index_from_string(c1), column_index_from_string(c2) + 1):
            for r in range(r1, r2 + 1):
                vals.append(self.ref(sheet, get_column_letter(c), r))
        return vals

    def eval(self, formula, sheet):
        def flat(args):
            for a in args:
                if isinstance(a, list):
                    yield from a
                else:
                    yield a
        env = {
            "ref": self.ref, "rng": self.rng,
            "f_min": lambda *a: min(flat(a)), "f_max": lambda *a: max(flat(a)),
            "f_abs": abs, "f_round": lambda x, n=0: round(x, int(n)),
            "f_sum": lambda *a: sum(flat(a)), "f_choose": lambda i, *a: a[int(i) - 1],
        }
        return eval(py_expr(formula, sheet), {"__builtins__": {}}, env)  # noqa: S307 - our grammar only


def main():
    if len(sys.argv) != 2:
        print("usage: check_model.py model.xlsx", file=sys.stderr)
        return 1
    wb = load_workbook(sys.argv[1])
    if "Model" not in wb.sheetnames or "Inputs" not in wb.sheetnames:
        print("check_model: the workbook needs an Inputs and a Model sheet", file=sys.stderr)
        return 1
    ws = wb["Model"]
    formulas, constants, problems = 0, [], []
    lines = []
    for r in range(4, ws.max_row + 1):
        label = ws.cell(row=r, column=1).value
        if label is None:
            continue
        lines.append((r, label))
        for c in range(2, ws.max_column + 1):
            v = ws.cell(row=r, column=c).value
            if v is None:
                continue
            if isinstance(v, str) and v.startswith("="):
                formulas += 1
            else:
                constants.append(f"Model!{get_column_letter(c)}{r}={v!r}")
    print(f"Model sheet: {formulas} formulas, {len(constants)} pasted constants")
    for c in constants:
        problems.append(f"pasted constant (should be a formula or an input): {c}")
    last_col = max(c for c in range(2, ws.max_column + 1)
                   if ws.cell(row=3, column=c).value not in (None, "Total"))
    head = ws.cell(row=3, column=last_col).value
    results = {}
    for k, name in ((1, "base"), (2, "upside"), (3, "downside")):
        b = Book(wb, k)
        try:
            results[name] = {lab: b.ref("Model", get_column_letter(last_col), r) for r, lab in lines}
        except (ValueError, ZeroDivisionError, TypeError) as e:
            problems.append(f"{name}: cannot compute: {e}")
            continue
        for e in sorted(b.empty_refs):
            problems.append(f"formula refers to the empty cell {e}")
    if results:
        names = list(results)
        print(f"\n{'line (' + str(head) + ')':<34}" + "".join(f"{n:>16}" for n in names))
        for _, lab in lines:
            row = "".join(f"{results[n][lab]:>16,.2f}" if isinstance(results[n][lab], (int, float))
                          else f"{str(results[n][lab]):>16}" for n in names)
            print(f"{str(lab)[:33]:<34}{row}")
    print()
    for p in sorted(set(problems)):
        print("problem:", p)
    print("ok: every line is a formula" if not problems else f"{len(set(problems))} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
