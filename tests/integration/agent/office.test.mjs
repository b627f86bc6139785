// Office documents through the agent loop, against a real tusko-sandboxd
// (native runtime) running the sandbox image with LibreOffice: the scripted
// model server sends the tool calls a model would. The product page's example
// ("a 6-slide Q3 deck with speaker notes") yields a real .pptx with six slides
// and six notes, previewed as six pictures; a workbook with formulas previews
// with computed values; compare_files aligns rows and paragraphs; parse_pdf
// reads text and tables; bad input gets a tool error that names the problem
// and leaves the sandbox usable; nothing is left in /workspace.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';

import { stopAll } from '../../lib/harness.mjs';
import { KEY, startSandboxd } from '../sandboxd/sbx.mjs';
import { api, events, makeUser, newSession, post, sleep, startModels, startTusko } from './lib.mjs';

const fixture = (f) => readFileSync(new URL(`../../fixtures/office/${f}`, import.meta.url), 'utf8');
const call = (name, args) => ({ tool_calls: [{ name, arguments: args }] });
const one = (name, args) => ({ steps: [call(name, args), { text: 'done: {{tool_result}}' }] });

// the deck's integrity, checked inside the sandbox by Python's zipfile
const CHECK = `python3 -c "
import json, re, zipfile
z = zipfile.ZipFile('q3.pptx'); n = z.namelist()
print('CHECK', json.dumps({'slides': len([x for x in n if re.fullmatch(r'ppt/slides/slide\\d+\\.xml', x)]),
  'notes': len([x for x in n if re.fullmatch(r'ppt/notesSlides/notesSlide\\d+\\.xml', x)]),
  'dups': len(n) - len(set(n)), 'bad': z.testzip()}))"`;

const BAD = `python3 -c "
import zipfile
from pypdf import PdfWriter
with zipfile.ZipFile('bomb.xlsx', 'w', zipfile.ZIP_DEFLATED) as z:
    z.writestr('[Content_Types].xml', '<Types/>')
    z.writestr('xl/big.xml', b'0' * (80 << 20))
open('broken.pptx', 'wb').write(b'PK\\x03\\x04' + bytes(range(256)) * 8)
open('fake.docx', 'w').write('plain text, not a document')
w = PdfWriter()
for _ in range(2000): w.add_blank_page(200, 200)
w.write('huge.pdf')
print('bad files made')"`;

const SCENARIOS = {
  deck: {
    steps: [
      call('write_file', { path: 'make.js', content: fixture('make.js') }),
      call('execute_command', { command: 'node make.js' }),
      call('execute_command', { command: CHECK }),
      call('preview', { path: 'q3.pptx' }),
      { text: 'Here is your deck: {{tool_result}}' },
    ],
  },
  'deck-again': one('preview', { path: 'q3.pptx' }),
  'deck-slides': one('preview', { path: 'q3.pptx', pages: '5-6' }),
  docs: {
    steps: [
      call('write_file', { path: 'make.py', content: fixture('make.py') }),
      call('execute_command', { command: 'python3 make.py' }),
      call('preview', { path: 'sales.xlsx' }),
      { text: 'ok' },
    ],
  },
  'cmp-sheets': one('compare_files', { a: 'sales.xlsx', b: 'sales2.xlsx' }),
  'cmp-docx': one('compare_files', { a: 'report.docx', b: 'report2.docx' }),
  'cmp-csv': one('compare_files', { a: 'a.csv', b: 'b.csv' }),
  'cmp-same': one('compare_files', { a: 'q3.pptx', b: 'q3.pptx' }),
  'cmp-families': one('compare_files', { a: 'a.csv', b: 'report.docx' }),
  'make-pdf': one('execute_command', { command: 'soffice -env:UserInstallation=file:///tmp/lo-test --headless --convert-to pdf report.docx >/dev/null 2>&1; rm -rf /tmp/lo-test; ls report.pdf' }),
  'parse-pdf': one('parse_pdf', { path: 'report.pdf' }),
  'preview-docx': one('preview', { path: 'report.docx' }),
  'make-bad': one('execute_command', { command: BAD }),
  'bad-fake': one('preview', { path: 'fake.docx' }),
  'bad-bomb': one('preview', { path: 'bomb.xlsx' }),
  'bad-broken': one('preview', { path: 'broken.pptx' }),
  'bad-missing': one('preview', { path: 'nope.pptx' }),
  'bad-outside': one('preview', { path: '../../etc/passwd.pdf' }),
  'bad-parse-outside': one('parse_pdf', { path: '/etc/passwd' }),
  'huge-preview': one('preview', { path: 'huge.pdf' }),
  'huge-parse': one('parse_pdf', { path: 'huge.pdf', pages: '1999-2000' }),
  'bad-range': one('preview', { path: 'huge.pdf', pages: '3000-3001' }),
  alive: one('execute_command', { command: 'echo alive; ls -a /workspace' }),
};

// Sends a message and waits for its turn's end by reading the stored events
// (a live stream is ended by the server when one event — 20 JPEG pages — is
// past its 256 KiB buffer and the next comes at once; the web UI reconnects
// and resumes, this helper just reads the replay).
async function turn(base, user, sid, content, extra = {}, { timeoutMs = 60000 } = {}) {
  const r = await post(base, user, sid, content, extra);
  assert.equal(r.status, 202, r.text);
  const id = r.json.turn_id;
  const until = Date.now() + timeoutMs;
  for (;;) {
    const evs = (await events(base, user, sid)).filter((e) => e.json && e.json.turn_id === id);
    if (evs.length && evs.at(-1).event === 'turn_end') return { turnId: id, events: evs, end: evs.at(-1).json };
    assert.ok(Date.now() < until, `turn ${id} did not end within ${timeoutMs} ms: ${evs.map((e) => e.event).join(',')}`);
    await sleep(250);
  }
}

const ends = (t, name) => t.events.filter((e) => e.event === 'tool_end' && e.json.name === name);
const output = (t) => t.events.filter((e) => e.event === 'tool_output').map((e) => e.json.text).join('');

describe('office documents', () => {
  let ms, sbx, stack, base, user, sid;

  before(async () => {
    ms = await startModels({ scenarios: SCENARIOS });
    sbx = await startSandboxd({ env: { SANDBOX_MEMORY: '2Gi' } });
    stack = await startTusko(ms, { env: { OPENSANDBOX_URL: sbx.url, OPENSANDBOX_API_KEY: KEY, TUSKO_TOOL_WORKERS: '4' } });
    base = stack.tusko.url;
    user = makeUser(stack.pg);
    sid = await newSession(base, user);
  });
  after(async () => {
    for (const s of (await sbx.api.list('?pageSize=200')).json.items || []) await sbx.api.del(s.id);
    await stopAll();
    await ms.close();
  });

  test('the 6-slide Q3 deck with speaker notes: a sound .pptx, previewed as six pictures', async () => {
    const t = await turn(base, user, sid, 'Create a 6-slide Q3 deck with speaker notes #scenario:deck', {}, { timeoutMs: 120000 });
    assert.equal(t.end.state, 'done', JSON.stringify(t.end));
    const check = JSON.parse(output(t).split('CHECK ')[1]);
    assert.deepEqual(check, { slides: 6, notes: 6, dups: 0, bad: null });
    const [pv] = ends(t, 'preview');
    assert.equal(pv.json.ok, true, pv.json.result);
    assert.equal(pv.json.lane, 'fast');
    const d = pv.json.data;
    assert.equal(d.kind, 'pages');
    assert.equal(d.family, 'slides');
    assert.equal(d.page_count, 6);
    assert.equal(d.rendered, true);
    assert.equal(d.pages.length, 6);
    d.pages.forEach((p, i) => {
      assert.equal(p.page, i + 1);
      assert.equal(p.mime, 'image/png');
      const png = Buffer.from(p.base64, 'base64');
      assert.equal(png.subarray(1, 4).toString(), 'PNG');
      assert.equal(png.readUInt32BE(16), 1280, 'slides are 1280 px wide');
      assert.match(p.notes, new RegExp(`Speaker notes for slide ${i + 1}`));
    });
    assert.match(d.pages[0].body, /Q3 overview/);
    // the model reads each slide's text, not the pictures
    assert.match(pv.json.result, /6 slides; slides 1–6 of 6 shown to the user as pictures/);
    const back = ms.requests('deck').at(-1).body.messages.filter((m) => m.role === 'tool').at(-1);
    const text = typeof back.content === 'string' ? back.content : back.content.map((p) => p.text).join('');
    assert.match(text, /Slide 4\n[^]*notes: Speaker notes for slide 4: mention West\./);
    assert.ok(!text.includes(d.pages[0].base64.slice(0, 40)), 'no base64 for the model');

    // cached by content: the same pictures again; a range; the Files panel's route
    const again = ends(await turn(base, user, sid, 'again #scenario:deck-again'), 'preview')[0].json.data;
    assert.equal(again.sha256, d.sha256);
    assert.deepEqual(again.pages.map((p) => p.base64), d.pages.map((p) => p.base64));
    const part = ends(await turn(base, user, sid, 'part #scenario:deck-slides'), 'preview')[0].json;
    assert.deepEqual(part.data.pages.map((p) => p.page), [5, 6]);
    assert.match(part.result, /slides 5–6 of 6/);
    const route = await api(base, `/api/sessions/${sid}/files/preview?path=q3.pptx&pages=2`, { headers: user.auth });
    assert.equal(route.status, 200, route.text);
    assert.equal(route.json.kind, 'pages');
    assert.deepEqual(route.json.pages.map((p) => p.page), [2]);
    // downloadable
    const dl = await api(base, `/api/sessions/${sid}/files/download`, { json: { path: 'q3.pptx' }, headers: user.auth });
    assert.equal(dl.status, 201, dl.text);
    const got = await fetch(base + dl.json.url, { headers: user.auth });
    assert.equal(Buffer.from(await got.arrayBuffer()).subarray(0, 2).toString(), 'PK');
  });

  test('a workbook with formulas previews with computed values; compare_files aligns rows, cells and paragraphs', async () => {
    const t = await turn(base, user, sid, 'sheets #scenario:docs', {}, { timeoutMs: 120000 });
    assert.equal(t.end.state, 'done', JSON.stringify(t.end));
    const pv = ends(t, 'preview')[0].json;
    assert.equal(pv.ok, true, pv.result);
    assert.equal(pv.data.kind, 'sheets');
    const [sales, notes] = pv.data.sheets;
    assert.equal(sales.name, 'Sales');
    assert.equal(notes.name, 'Notes');
    assert.deepEqual(sales.rows[1], ['North', '20', '24', '44'], 'openpyxl caches no values: recalculated');
    assert.equal(sales.formulas.D2, '=B2+C2');
    assert.equal(sales.total_rows, 5);
    assert.equal(sales.truncated, false);

    const cs = ends(await turn(base, user, sid, 'c #scenario:cmp-sheets', {}, { timeoutMs: 120000 }), 'compare_files')[0].json;
    assert.equal(cs.ok, true, cs.result);
    // one row inserted at the top is one added row, not every cell below changed
    assert.deepEqual(cs.data.counts, { added: 1, removed: 0, changed: 2 });
    assert.deepEqual(cs.data.changes.map((c) => c.where), ['Sales row 2', 'Sales!B4', 'Sales!D4']);
    assert.equal(cs.data.changes[1].old, '30');
    assert.equal(cs.data.changes[1].new, '999');
    assert.match(cs.result, /changed Sales!B4: "30" → "999"/);

    const cd = ends(await turn(base, user, sid, 'c #scenario:cmp-docx'), 'compare_files')[0].json.data;
    assert.deepEqual(cd.changes.map((c) => c.where), ['paragraph 2', 'table 1 row 2']);
    assert.deepEqual(cd.changes[0].hunks.filter((h) => h[0] !== 'eq'), [['del', 'every'], ['ins', 'most'], ['ins', 's']]);
    const cc = ends(await turn(base, user, sid, 'c #scenario:cmp-csv'), 'compare_files')[0].json.data;
    assert.deepEqual(cc.counts, { added: 1, removed: 0, changed: 1 });
    const same = ends(await turn(base, user, sid, 'c #scenario:cmp-same'), 'compare_files')[0].json;
    assert.equal(same.data.identical, true);
    assert.match(same.result, /identical/);
    const ls = await api(base, `/api/sessions/${sid}/files`, { headers: user.auth });
    assert.deepEqual(ls.json.entries.map((e) => e.name).sort(), ['a.csv', 'b.csv', 'fake.docx', 'make.js', 'make.py', 'q3.pptx', 'report.docx', 'report2.docx', 'sales.xlsx', 'sales2.xlsx'], 'previews leave nothing in /workspace');
    const fam = ends(await turn(base, user, sid, 'c #scenario:cmp-families'), 'compare_files')[0].json;
    assert.equal(fam.ok, false);
    assert.match(fam.result, /a spreadsheet and \/workspace\/report\.docx is a document/);
  });

  test('parse_pdf keeps layout and splits tables; a document previews as JPEG pages', async () => {
    await turn(base, user, sid, 'pdf #scenario:make-pdf', {}, { timeoutMs: 60000 });
    const p = ends(await turn(base, user, sid, 'p #scenario:parse-pdf'), 'parse_pdf')[0].json;
    assert.equal(p.ok, true, p.result);
    assert.equal(p.data.page_count, 1);
    assert.equal(p.data.metadata.Producer.startsWith('LibreOffice'), true);
    assert.deepEqual(p.data.pages[0].tables[0], [['Region', 'Revenue'], ['North', '120']]);
    assert.match(p.result, /\| Region \| Revenue \|/);
    const d = ends(await turn(base, user, sid, 'd #scenario:preview-docx', {}, { timeoutMs: 60000 }), 'preview')[0].json.data;
    assert.equal(d.family, 'document');
    assert.equal(d.pages[0].mime, 'image/jpeg');
    const jpg = Buffer.from(d.pages[0].base64, 'base64');
    assert.equal(jpg[0], 0xff);
    assert.equal(jpg[1], 0xd8);
    assert.match(d.pages[0].text, /Q3 report/);
  });

  test('bad input: a tool error naming the problem, within the bound; the sandbox stays usable', async () => {
    // a user and chat of their own (the first chat's events hold many pictures,
    // and its finished event streams count against the user's USER_MAX_STREAMS)
    const user = makeUser(stack.pg);
    const sid = await newSession(base, user);
    const made = await turn(base, user, sid, 'bad #scenario:make-bad', {}, { timeoutMs: 60000 });
    assert.match(output(made), /bad files made/);
    const err = async (sc, re) => {
      const e = ends(await turn(base, user, sid, `x #scenario:${sc}`, {}, { timeoutMs: 90000 }), sc.includes('parse') ? 'parse_pdf' : 'preview')[0].json;
      assert.equal(e.ok, false, `${sc}: ${e.result}`);
      assert.match(e.result, re, sc);
    };
    await err('bad-fake', /fake\.docx is not a \.docx file/);
    await err('bad-bomb', /zip bomb/);
    await err('bad-broken', /broken\.pptx is corrupt/);
    await err('bad-missing', /nope\.pptx: no such file/);
    await err('bad-outside', /"\.\." is not allowed|outside/);
    await err('bad-parse-outside', /\/workspace/);
    await err('bad-range', /the file has 2000 pages/);
    // a 2,000-page PDF: 20 pages a call, and the answer says which
    const hp = ends(await turn(base, user, sid, 'x #scenario:huge-preview', {}, { timeoutMs: 90000 }), 'preview')[0].json;
    assert.equal(hp.ok, true, hp.result);
    assert.equal(hp.data.pages.length, 20);
    assert.match(hp.result, /pages 1–20 of 2000/);
    assert.match(hp.result, /preview with pages "21-40"/);
    const pp = ends(await turn(base, user, sid, 'x #scenario:huge-parse'), 'parse_pdf')[0].json;
    assert.deepEqual(pp.data.pages.map((p) => [p.page, p.note]), [[1999, 'an empty page'], [2000, 'an empty page']]);
    // the sandbox still works, and nothing of the previews is in /workspace
    const alive = await turn(base, user, sid, 'x #scenario:alive');
    const ls = output(alive).split('\n').filter((l) => l && l !== '.' && l !== '..');
    assert.equal(ls[0], 'alive');
    assert.deepEqual(ls.slice(1).sort(), ['bomb.xlsx', 'broken.pptx', 'fake.docx', 'huge.pdf']);
  });
});
