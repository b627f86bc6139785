// docs/SECURITY.md names files, functions and tests as proof of each guardrail;
// this keeps those names true. Every `path` must exist, every `function()` must
// be defined or called somewhere in src/ or sql/, every quoted test title after
// a tests/….test.mjs file must be a test in that file, and every `name` after a
// tests/unit/….c file must be a TEST(name) there. Markdown links must resolve.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';

import { ROOT } from '../../lib/harness.mjs';

const DOC = path.join(ROOT, 'docs/SECURITY.md');
const text = fs.readFileSync(DOC, 'utf8');

// paragraphs (and list blocks) with their lines joined: quoted titles may wrap
const paragraphs = text
  .split(/\n\s*\n/)
  .filter((p) => !p.trimStart().startsWith('|'))
  .map((p) => p.replace(/\s+/g, ' '));

function sourceFiles(dir) {
  const out = [];
  for (const e of fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) out.push(...sourceFiles(p));
    else if (/\.(c|h|sql)$/.test(e.name)) out.push(p);
  }
  return out;
}
let corpus = null;
function defined(fn) {
  corpus ??= [...sourceFiles('src'), ...sourceFiles('sql')].map((f) => fs.readFileSync(path.join(ROOT, f), 'utf8')).join('\n');
  return new RegExp(`\\b${fn}\\s*\\(`).test(corpus);
}

const norm = (s) => s.replace(/\s+/g, ' ');
const files = new Map();
const read = (f) => {
  if (!files.has(f)) files.set(f, norm(fs.readFileSync(path.join(ROOT, f), 'utf8').replace(/\\(['"])/g, '$1')));
  return files.get(f);
};

describe('docs/SECURITY.md', () => {
  test('every file and folder it names exists', () => {
    const paths = new Set([...text.matchAll(/`((?:src|tests|sql|docs|scripts)\/[A-Za-z0-9_.\/-]+)`/g)].map((m) => m[1]));
    assert.ok(paths.size > 60, `only ${paths.size} paths found: the pattern is broken`);
    const missing = [...paths].filter((p) => !fs.existsSync(path.join(ROOT, p)));
    assert.deepEqual(missing, []);
  });

  test('every function it names exists in src/ or sql/', () => {
    const fns = new Set([...text.matchAll(/`([A-Za-z_][A-Za-z0-9_]*)\(\)`/g)].map((m) => m[1]));
    assert.ok(fns.size > 40, `only ${fns.size} functions found`);
    const missing = [...fns].filter((f) => !defined(f));
    assert.deepEqual(missing, []);
  });

  test('every test it cites is a test of the file it names', () => {
    let checked = 0;
    const missing = [];
    for (const p of paragraphs) {
      let current = null;
      // tokens in order: `path`, `identifier`, "quoted title"
      for (const m of p.matchAll(/`([^`]+)`|"([^"]+)"/g)) {
        if (m[1] !== undefined) {
          const tok = m[1];
          if (/^(src|tests|sql|docs|scripts)\//.test(tok)) {
            current = tok;
          } else if (current && /^tests\/unit\/.*\.c$/.test(current) && /^[a-z][a-z0-9_]+$/.test(tok)) {
            checked++;
            if (!new RegExp(`TEST\\(${tok}\\)`).test(read(current))) missing.push(`${current}: TEST(${tok})`);
          }
        } else if (current && /\.test\.mjs$/.test(current)) {
          checked++;
          const title = norm(m[2]);
          if (!read(current).includes(title)) missing.push(`${current}: "${title}"`);
        }
      }
    }
    assert.ok(checked > 60, `only ${checked} test citations found`);
    assert.deepEqual(missing, []);
  });

  test('its links resolve, and the README links to it', () => {
    const links = [...text.matchAll(/\]\(([^)#]+)(#[^)]*)?\)/g)].map((m) => m[1]).filter((l) => !/^https?:/.test(l));
    const missing = links.filter((l) => !fs.existsSync(path.resolve(path.dirname(DOC), l)));
    assert.deepEqual(missing, []);
    const anchors = [...text.matchAll(/\]\(#([^)]+)\)/g)].map((m) => m[1]);
    const slugs = [...text.matchAll(/^#+ (.+)$/gm)].map((m) => m[1].toLowerCase().replace(/[^a-z0-9 -]/g, '').replace(/ /g, '-'));
    assert.deepEqual(anchors.filter((a) => !slugs.includes(a)), []);
    assert.match(fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8'), /\(docs\/SECURITY\.md\)/);
  });

  test('one section per guardrail of the product specification, each with where, settings and tests', () => {
    const sections = text.split(/^## /m).slice(1);
    const guardrails = ['1. Fail-closed credentials', '2. Per-user sandbox quota', '3. Path safety', '4. Outbound fetch checks (SSRF)', '5. Chat guardrails', '6. Idle reaping'];
    for (const g of guardrails) {
      const s = sections.find((x) => x.startsWith(g));
      assert.ok(s, `no section "${g}"`);
      for (const part of ['**Enforced.**', '**Where.**', '**Settings.**', '**Tests.**']) assert.ok(s.includes(part), `${g}: no ${part}`);
    }
    assert.ok(sections.some((x) => x.startsWith('Reporting a vulnerability')));
    assert.doesNotMatch(text, /security@example|<owner>|TODO|TBD/);
  });
});
