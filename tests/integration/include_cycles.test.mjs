// The #include graph of src/ has no cycle, so the layering stays: a module is a
// file stem (x.c and x.h are one module, x), and a module that includes
// another depends on it. A cycle is a strongly connected component of more than
// one module; each is reported with the include lines that close it. An
// include resolves as the compiler's -Isrc does (or next to the including
// file); a system header (<...>) or a name no file of the tree has is not an
// edge.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, test } from 'node:test';

import { ROOT } from '../lib/harness.mjs';

const INCLUDE = /^\s*#\s*include\s+"([^"]+)"/gm;

function walk(dir, out = []) {
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) walk(p, out);
    else if (/\.[ch]$/.test(e.name)) out.push(p);
  }
  return out;
}

// {modules: Map(module → Map(dependency → ["file: #include line", ...]))}
export function includeGraph(root) {
  const base = path.dirname(path.resolve(root));
  const files = walk(path.resolve(root)).map((p) => path.relative(base, p).split(path.sep).join('/'));
  const stem = (f) => f.replace(/\.[ch]$/, '');
  const known = new Set(files.map(stem));
  const edges = new Map([...known].map((m) => [m, new Map()]));
  for (const f of files) {
    const from = stem(f);
    const text = fs.readFileSync(path.join(base, f), 'utf8');
    for (const [, inc] of text.matchAll(INCLUDE)) {
      const want = stem(inc);
      const beside = path.posix.normalize(path.posix.join(path.posix.dirname(f), want));
      let to = known.has(beside) ? beside : null;
      if (!to) {
        const c = [...known].filter((k) => k === want || k.endsWith(`/${want}`));
        to = c.length === 1 ? c[0] : null;
      }
      if (!to || to === from) continue;
      const why = edges.get(from).get(to) || [];
      why.push(`${f}: #include "${inc}"`);
      edges.get(from).set(to, why);
    }
  }
  return edges;
}

// Tarjan's strongly connected components of more than one module, each sorted
export function cycles(edges) {
  let n = 0;
  const idx = new Map();
  const low = new Map();
  const stack = [];
  const on = new Set();
  const out = [];
  const visit = (v) => {
    idx.set(v, n);
    low.set(v, n);
    n++;
    stack.push(v);
    on.add(v);
    for (const w of edges.get(v).keys()) {
      if (!idx.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v), low.get(w)));
      } else if (on.has(w)) low.set(v, Math.min(low.get(v), idx.get(w)));
    }
    if (low.get(v) === idx.get(v)) {
      const comp = [];
      let w;
      do {
        w = stack.pop();
        on.delete(w);
        comp.push(w);
      } while (w !== v);
      if (comp.length > 1) out.push(comp.sort());
    }
  };
  for (const v of [...edges.keys()].sort()) if (!idx.has(v)) visit(v);
  return out;
}

// A cycle's include lines: the edges between its members
function explain(edges, comp) {
  const inside = new Set(comp);
  const lines = [];
  for (const from of comp) for (const [to, why] of edges.get(from)) if (inside.has(to)) lines.push(`    ${from} -> ${to} (${why.join('; ')})`);
  return `cycle: ${comp.join(' ')}\n${lines.join('\n')}`;
}

function tree(files) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'include-cycles-'));
  for (const [name, text] of Object.entries(files)) {
    fs.mkdirSync(path.join(dir, 'src', path.dirname(name)), { recursive: true });
    fs.writeFileSync(path.join(dir, 'src', name), text);
  }
  return path.join(dir, 'src');
}

describe('the include graph of src/', () => {
  test('the check finds a cycle between modules, through .c and .h alike, and only a cycle', () => {
    const src = tree({
      'app/a.h': '#include "lib/common.h"\n',
      'app/a.c': '#include "app/a.h"\n#include "app/b/b.h"\n#include <stdio.h>\n',
      'app/b/b.h': '#include "lib/common.h"\n',
      'app/b/b.c': '#include "app/b/b.h"\n#include "c.h"\n',
      'app/b/c.h': '  #  include "app/a.h"\n',
      'app/d.c': '#include "app/a.h"\n#include "missing.h"\n',
      'lib/common.h': '',
    });
    const g = includeGraph(src);
    assert.deepEqual([...g.get('src/app/b/b').keys()].sort(), ['src/app/b/c', 'src/lib/common']);
    assert.deepEqual(cycles(g), [['src/app/a', 'src/app/b/b', 'src/app/b/c']]);
    assert.match(explain(g, cycles(g)[0]), /src\/app\/b\/c -> src\/app\/a \(src\/app\/b\/c\.h: #include "app\/a\.h"\)/);
    // the same tree without the include that closes it: no cycle
    fs.writeFileSync(path.join(src, 'app/b/c.h'), '#include "lib/common.h"\n');
    assert.deepEqual(cycles(includeGraph(src)), []);
    fs.rmSync(path.dirname(src), { recursive: true, force: true });
  });

  test('src/ has no cycle', () => {
    const g = includeGraph(path.join(ROOT, 'src'));
    assert.ok(g.size > 100, `${g.size} modules read`);
    const found = cycles(g);
    assert.deepEqual(found, [], `include cycles in src/ (move the declaration to the layer both can include):\n${found.map((c) => explain(g, c)).join('\n')}`);
  });
});
