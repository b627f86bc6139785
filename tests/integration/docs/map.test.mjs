// docs/MAP.md and docs/internals/turn.md answer "where does it happen?" with
// `file:function`; this keeps every answer true. Each name must be defined in
// the file it is given with: a C function (its definition, not a prototype or
// a call) or table at the top level, a plpgsql function (CREATE FUNCTION), a
// JavaScript function or method, or a shell function. Markdown links resolve.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';

import { ROOT } from '../../lib/harness.mjs';

const esc = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

// Whether name is defined in the text of file (by its language).
export function definedIn(file, text, name) {
  const n = esc(name);
  if (file.endsWith('.sql')) return new RegExp(`CREATE (OR REPLACE )?FUNCTION ${n}\\s*\\(`, 'i').test(text);
  if (/\.(m?js)$/.test(file))
    return new RegExp(`(^|\\n)\\s*(export\\s+)?(async\\s+)?(function\\s*\\*?\\s*${n}\\s*\\(|${n}\\s*\\([^)\\n]*\\)\\s*\\{)`).test(text);
  if (file.endsWith('.sh')) return new RegExp(`(^|\\n)${n}\\s*\\(\\)`).test(text);
  if (/\.[ch]$/.test(file)) {
    // a table: a top-level declaration with "name[] =" or "name =" (not extern)
    if (new RegExp(`(^|\\n)(?!extern)(?:[A-Za-z_][^\\n;=]*)?\\b${n}\\s*(\\[[^\\]\\n]*\\])?[)(\\w\\s]*=`).test(text)) return true;
    // a function: a top-level line naming it with "(", whose declaration ends in "{" before any ";"
    const re = new RegExp(`(^|\\n)(?:[A-Za-z_][^\\n;=]*)?\\b${n}\\s*\\(`, 'g');
    for (const m of text.matchAll(re)) {
      const rest = text.slice(m.index + m[0].length);
      const brace = rest.search(/\)\s*\{/);
      const semi = rest.indexOf(';');
      if (brace >= 0 && (semi < 0 || brace < semi)) return true;
    }
    return false;
  }
  return false;
}

function entries(doc) {
  const text = fs.readFileSync(path.join(ROOT, doc), 'utf8');
  const found = [...text.matchAll(/`((?:src|sql|web|tests|scripts|bench)\/[A-Za-z0-9_.\/-]+):([A-Za-z_][A-Za-z0-9_]*)`/g)];
  return { text, found: found.map((m) => ({ file: m[1], name: m[2] })) };
}

for (const [doc, min] of [
  ['docs/MAP.md', 60],
  ['docs/internals/turn.md', 30],
]) {
  describe(doc, () => {
    const { text, found } = entries(doc);

    test(`names at least ${min} file:function pairs`, () => {
      assert.ok(found.length >= min, `only ${found.length} found: the pattern or the document is broken`);
    });

    test('every file:function is defined in that file', () => {
      const wrong = [];
      for (const { file, name } of found) {
        const p = path.join(ROOT, file);
        if (!fs.existsSync(p)) {
          wrong.push(`${file}:${name} (no such file)`);
          continue;
        }
        if (!definedIn(file, fs.readFileSync(p, 'utf8'), name)) wrong.push(`${file}:${name}`);
      }
      assert.deepEqual(wrong, []);
    });

    test('every link resolves', () => {
      const dir = path.dirname(path.join(ROOT, doc));
      const links = [...text.matchAll(/\]\(([^)#\s]+)(#[^)]*)?\)/g)].map((m) => m[1]).filter((l) => !/^[a-z]+:/.test(l));
      const broken = links.filter((l) => !fs.existsSync(path.join(dir, l)));
      assert.deepEqual(broken, []);
    });
  });
}

describe('docs/MAP.md questions', () => {
  test('at least 25 questions, each answered with a file:function', () => {
    const text = fs.readFileSync(path.join(ROOT, 'docs/MAP.md'), 'utf8');
    const rows = text.split('\n').filter((l) => /^\| [^|]*\? \|/.test(l));
    assert.ok(rows.length >= 25, `${rows.length} questions`);
    const bare = rows.filter((r) => !/`[^`]+\/[^`]+:[A-Za-z_]\w*`/.test(r));
    assert.deepEqual(bare, []);
  });
});

describe('the definition check itself', () => {
  test('finds definitions and refuses prototypes, calls and other files', () => {
    const c = 'static void run_step(agent_run *r);\nint x = run_step(r);\nstatic void\nrun_step2(int a,\n  int b)\n{\n}\nstatic const struct s sets[] = {\n};\nextern const int routes[];\n';
    assert.equal(definedIn('a.c', c, 'run_step'), false);
    assert.equal(definedIn('a.c', c, 'run_step2'), true);
    assert.equal(definedIn('a.c', c, 'sets'), true);
    assert.equal(definedIn('a.c', c, 'routes'), false);
    assert.equal(definedIn('a.c', 'void f(void)\n{\n}\n', 'f'), true);
    assert.equal(definedIn('a.c', '    f(x);\n', 'f'), false);
    assert.equal(definedIn('a.sql', 'CREATE FUNCTION tusko_x(p int)', 'tusko_x'), true);
    assert.equal(definedIn('a.sql', 'SELECT tusko_x(1)', 'tusko_x'), false);
    assert.equal(definedIn('a.js', 'export function fold(chat, ev) {', 'fold'), true);
    assert.equal(definedIn('a.js', '  onMessage(e) {\n', 'onMessage'), true);
    assert.equal(definedIn('a.js', '  this.onMessage(e);\n', 'onMessage'), false);
  });
});
