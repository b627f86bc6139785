// /api/utopia/...: documents (upload in every format, view, delete), search,
// memories and dated facts through the real tusko, scoped to the caller; a
// malformed PDF and zip-bomb DOCX files are refused and the server carries on.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import { after, before, describe, test } from 'node:test';
import zlib from 'node:zlib';

import { api, stopAll } from '../../lib/harness.mjs';
import { makeUser, startTusko } from '../app/lib.mjs';

after(stopAll);

// A DOCX-shaped zip holding word/document.xml (deflated). declared: the
// uncompressed size its headers claim (default: the truth).
function docx(xml, declared) {
  const data = zlib.deflateRawSync(Buffer.from(xml), { level: 9 });
  const name = Buffer.from('word/document.xml');
  const usize = declared ?? Buffer.byteLength(xml);
  const crc = zlib.crc32 ? zlib.crc32(Buffer.from(xml)) : 0;
  const local = Buffer.alloc(30);
  local.writeUInt32LE(0x04034b50, 0);
  local.writeUInt16LE(20, 4);
  local.writeUInt16LE(8, 8);
  local.writeUInt32LE(crc >>> 0, 14);
  local.writeUInt32LE(data.length, 18);
  local.writeUInt32LE(usize, 22);
  local.writeUInt16LE(name.length, 26);
  const cd = Buffer.alloc(46);
  cd.writeUInt32LE(0x02014b50, 0);
  cd.writeUInt16LE(20, 4);
  cd.writeUInt16LE(20, 6);
  cd.writeUInt16LE(8, 10);
  cd.writeUInt32LE(crc >>> 0, 16);
  cd.writeUInt32LE(data.length, 20);
  cd.writeUInt32LE(usize, 24);
  cd.writeUInt16LE(name.length, 28);
  const cdOff = local.length + name.length + data.length;
  const eocd = Buffer.alloc(22);
  eocd.writeUInt32LE(0x06054b50, 0);
  eocd.writeUInt16LE(1, 8);
  eocd.writeUInt16LE(1, 10);
  eocd.writeUInt32LE(cd.length + name.length, 12);
  eocd.writeUInt32LE(cdOff, 16);
  return Buffer.concat([local, name, data, cd, name, eocd]);
}

const W = (s) => `<w:p><w:r><w:t>${s}</w:t></w:r></w:p>`;
const H1 = (s) => `<w:p><w:pPr><w:pStyle w:val="Heading1"/></w:pPr><w:r><w:t>${s}</w:t></w:r></w:p>`;
const DOC = (body) => `<?xml version="1.0"?><w:document xmlns:w="x"><w:body>${body}</w:body></w:document>`;

const PDF =
  '%PDF-1.4\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n2 0 obj << /Type /Pages /Kids [3 0 R] /Count 1 >> endobj\n' +
  '3 0 obj << /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >> endobj\n' +
  '4 0 obj << /Length 58 >> stream\nBT /F1 18 Tf 72 700 Td (The quokka census was held) Tj ET\nendstream endobj\n' +
  '5 0 obj << /Type /Font /Subtype /Type1 /BaseFont /Helvetica >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n';

function rssKb(pid, field = 'VmRSS') {
  const m = fs.readFileSync(`/proc/${pid}/status`, 'utf8').match(new RegExp(`${field}:\\s+(\\d+)`));
  return Number(m[1]);
}

// A raw upload of `total` body bytes of which only `first` are sent (all when
// equal) before waiting for the answer; with contentLength false the body is
// chunked. Resolves to { status, json, text } or { error } when the server
// closed the connection instead.
function rawUpload(base, auth, { total, first = total, contentLength = true }) {
  const u = new URL('/api/utopia/documents', base);
  return new Promise((resolve) => {
    let done = false;
    const finish = (v) => { if (!done) { done = true; resolve(v); req.destroy(); } };
    const headers = { ...auth, 'content-type': 'text/plain' };
    if (contentLength) headers['content-length'] = String(total);
    const req = http.request({ host: u.hostname, port: u.port, path: u.pathname, method: 'POST', headers }, (res) => {
      const parts = [];
      res.on('data', (d) => parts.push(d));
      res.on('end', () => {
        const text = Buffer.concat(parts).toString();
        let json = null;
        try { json = JSON.parse(text); } catch { /* not JSON */ }
        finish({ status: res.statusCode, json, text });
      });
    });
    req.on('error', (error) => finish({ error }));
    const block = Buffer.alloc(64 << 10, 'a ');
    let left = first;
    const write = () => {
      while (left > 0 && !done) {
        const k = Math.min(left, block.length);
        left -= k;
        if (!req.write(block.subarray(0, k))) return void req.once('drain', write);
      }
      if (!done && first === total) req.end();
    };
    write();
  });
}

describe('utopia api', () => {
  let t, alice, bob;
  const upload = (who, body, type, q = '') =>
    api(t.tusko.url, `/api/utopia/documents${q}`, { method: 'POST', body, headers: { ...who.auth, 'content-type': type } });

  before(async () => {
    t = await startTusko({ tag: 'utopia' });
    alice = makeUser(t.pg, 'alice@example.com');
    bob = makeUser(t.pg, 'bob@example.com');
  });

  test('upload text, Markdown, HTML, CSV, JSON, PDF and DOCX; view, search, scope', async () => {
    const cases = [
      ['text/plain', 'Otters hold hands while sleeping.', '?title=Otter%20facts', 'Otter facts'],
      ['text/markdown', '# Field guide\n\n## Herons\n\nHerons stalk fish in the shallows.\n', '', 'Field guide'],
      ['text/html', '<html><head><title>Owls</title><script>steal()</script></head><body><h1>Owls</h1><p>Owls hunt at night.</p></body></html>', '', 'Owls'],
      ['text/csv', 'animal,diet\nbadger,earthworms\n', '?filename=diets.csv', 'diets.csv'],
      ['application/json', '{"lynx": {"range": "boreal forest"}}', '?filename=lynx.json', 'lynx.json'],
      ['application/pdf', PDF, '?filename=census.pdf', 'census.pdf'],
      ['application/octet-stream', docx(DOC(H1('Beaver dams') + W('Beavers build dams from branches.'))), '?filename=beavers.docx', 'Beaver dams'],
    ];
    for (const [type, body, q, title] of cases) {
      const r = await upload(alice, body, type, q);
      assert.equal(r.status, 201, `${type}: ${r.text}`);
      assert.equal(r.json.title, title, type);
      assert.ok(r.json.chunks >= 1);
      assert.equal(r.headers.get('location'), `/api/utopia/documents/${r.json.id}`);
    }
    let r = await api(t.tusko.url, '/api/utopia/documents', { headers: alice.auth });
    assert.equal(r.json.documents.length, cases.length);
    const html = r.json.documents.find((d) => d.title === 'Owls');
    r = await api(t.tusko.url, `/api/utopia/documents/${html.id}`, { headers: alice.auth });
    assert.equal(r.status, 200);
    assert.ok(!JSON.stringify(r.json.chunks).includes('steal'), 'scripts are not text');
    for (const [q, want] of [['quokka census', 'census.pdf'], ['beaver dams branches', 'Beaver dams'], ['hunting owls', 'Owls'], ['badger earthworms', 'diets.csv'], ['boreal', 'lynx.json']]) {
      r = await api(t.tusko.url, `/api/utopia/search?q=${encodeURIComponent(q)}`, { headers: alice.auth });
      assert.equal(r.status, 200, r.text);
      assert.equal(r.json.results[0].title, want, q);
      assert.ok(r.json.results[0].cite.startsWith('[1] '));
    }
    // another user sees none of it
    r = await api(t.tusko.url, `/api/utopia/documents/${html.id}`, { headers: bob.auth });
    assert.equal(r.status, 404);
    r = await api(t.tusko.url, '/api/utopia/search?q=owls', { headers: bob.auth });
    assert.equal(r.json.results.length, 0);
    r = await api(t.tusko.url, `/api/utopia/documents/${html.id}`, { method: 'DELETE', headers: bob.auth });
    assert.equal(r.status, 404);
    // chat scope: the chat must be the caller's
    const chat = (await api(t.tusko.url, '/api/sessions', { method: 'POST', headers: alice.auth })).json.id;
    r = await upload(alice, 'Narwhal tusks are teeth.', 'text/plain', `?chat_id=${chat}`);
    assert.equal(r.status, 201);
    r = await upload(bob, 'x', 'text/plain', `?chat_id=${chat}`);
    assert.equal(r.status, 404);
    r = await api(t.tusko.url, `/api/utopia/search?q=narwhal&scope=chat&chat_id=${chat}`, { headers: alice.auth });
    assert.equal(r.json.results.length, 1);
    r = await api(t.tusko.url, `/api/utopia/search?q=otters&scope=chat&chat_id=${chat}`, { headers: alice.auth });
    assert.equal(r.json.results.length, 0);
  });

  test('a malformed PDF and zip-bomb DOCX files are refused; the server carries on', async () => {
    const pid = t.tusko.proc.pid;
    const before = rssKb(pid);
    let r = await upload(alice, '%PDF-1.7\n1 0 obj << /Pages 9 0 R >>\nstream\n\u00ff\u00fe garbage\n', 'application/pdf');
    assert.equal(r.status, 400, r.text);
    assert.match(r.json.message, /PDF could not be read/);
    // 64 MiB of paragraphs claiming to be 1 KiB: caught while inflating, in the helper
    const unit = W('a'.repeat(40));
    const big = DOC(unit.repeat(Math.ceil((64 << 20) / unit.length)));
    r = await upload(alice, docx(big, 1024), 'application/octet-stream', '?filename=bomb.docx');
    assert.equal(r.status, 400, r.text);
    assert.match(r.json.message, /zip bomb/);
    // honest about its size, past the cap
    r = await upload(alice, docx(big), 'application/octet-stream', '?filename=bomb2.docx');
    assert.equal(r.status, 400, r.text);
    assert.match(r.json.message, /zip bomb|past the cap/);
    // random bytes with a zip signature
    r = await upload(alice, Buffer.concat([Buffer.from('PK\x03\x04'), Buffer.alloc(5000, 7)]), 'application/octet-stream', '?filename=x.docx');
    assert.equal(r.status, 400);
    assert.ok(rssKb(pid) - before < 64 * 1024, 'the server did not inflate anything itself');
    r = await api(t.tusko.url, '/healthz');
    assert.equal(r.status, 200);
    r = await upload(alice, 'still working', 'text/plain');
    assert.equal(r.status, 201);
    r = await upload(alice, '', 'text/plain');
    assert.equal(r.status, 400);
    r = await upload(alice, Buffer.from([0, 1, 2, 0, 5]), 'application/zip');
    assert.equal(r.status, 400);
  });

  test('facts change over time; deleting a document keeps what was learned in chats', async () => {
    const post = (json) => api(t.tusko.url, '/api/utopia/facts', { json, headers: alice.auth });
    let r = await post({ fact: { subject: 'Ada', predicate: 'lives in', object: 'London', valid_from: '2018' } });
    assert.equal(r.status, 201, r.text);
    r = await post({ fact: { subject: 'Ada', predicate: 'lives in', object: 'Paris', valid_from: 'March 2021' } });
    assert.equal(r.json.closed.length, 1);
    r = await post({ fact: { subject: 'Ada', predicate: 'lives in', object: 'Rome', valid_from: '2024-02-01' } });
    for (const [at, want] of [['2019-06-01', 'London'], ['2022', 'Paris'], ['', 'Rome']]) {
      r = await api(t.tusko.url, `/api/utopia/recall?entity=ada${at ? '&at=' + at : ''}`, { headers: alice.auth });
      assert.equal(r.status, 200, r.text);
      assert.deepEqual(r.json.facts.filter((f) => f.predicate === 'lives_in').map((f) => f.object), [want], at);
    }
    r = await post({ fact: { subject: 'Ada', predicate: 'lives in', object: 'Oslo', valid_from: '05/06/2024' } });
    assert.equal(r.status, 400);
    assert.match(r.json.message, /ambiguous/);
    r = await post({ note: 'Ada prefers tea' });
    assert.equal(r.status, 201);
    r = await api(t.tusko.url, '/api/utopia/graph?entity=Ada&hops=1', { headers: alice.auth });
    assert.deepEqual(r.json.entities.map((e) => e.name).sort(), ['Ada', 'Rome']);
    // delete every document: the facts and the memory stay
    const docs = (await api(t.tusko.url, '/api/utopia/documents', { headers: alice.auth })).json.documents;
    for (const d of docs) {
      r = await api(t.tusko.url, `/api/utopia/documents/${d.id}`, { method: 'DELETE', headers: alice.auth });
      assert.equal(r.status, 200);
    }
    r = await api(t.tusko.url, '/api/utopia/search?q=otters', { headers: alice.auth });
    assert.equal(r.json.results.length, 0);
    r = await api(t.tusko.url, '/api/utopia/facts?entity=Ada', { headers: alice.auth });
    assert.equal(r.json.facts.length, 3);
    r = await api(t.tusko.url, '/api/utopia/memories', { headers: alice.auth });
    assert.equal(r.json.memories.length, 1);
    const mem = r.json.memories[0].id;
    r = await api(t.tusko.url, `/api/utopia/memories/${mem}`, { method: 'DELETE', headers: bob.auth });
    assert.equal(r.status, 404);
    r = await api(t.tusko.url, `/api/utopia/memories/${mem}`, { method: 'DELETE', headers: alice.auth });
    assert.equal(r.status, 200);
    r = await api(t.tusko.url, '/api/utopia/recall?entity=Ada', { headers: bob.auth });
    assert.equal(r.status, 404);
    r = await api(t.tusko.url, '/api/utopia/search?q=x&scope=everything', { headers: alice.auth });
    assert.equal(r.status, 400);
  });
});

// What every route answers for bad input, another user's ids and ids that are
// none (status, code and message to the letter), in what order a route checks,
// the success shapes of the writes and deletes, and the paging parameters.
describe('utopia api: every route, error paths and shapes', () => {
  let t, erin, fred, chat, fredChat;
  const NOID = '00000000-0000-4000-8000-000000000000';
  const get = (p, who = erin) => api(t.tusko.url, p, { headers: who.auth });
  const del = (p, who = erin) => api(t.tusko.url, p, { method: 'DELETE', headers: who.auth });
  const upload = (q, body, who = erin) =>
    api(t.tusko.url, `/api/utopia/documents${q}`, { method: 'POST', body, headers: { ...who.auth, 'content-type': 'text/plain' } });
  const refused = (r, status, code, message, what) => {
    assert.equal(r.status, status, `${what}: ${r.text}`);
    assert.deepEqual(r.json, { code, message }, what);
  };

  before(async () => {
    t = await startTusko({ tag: 'utopiaerr' });
    erin = makeUser(t.pg, 'erin@example.com');
    fred = makeUser(t.pg, 'fred@example.com');
    chat = (await api(t.tusko.url, '/api/sessions', { method: 'POST', headers: erin.auth })).json.id;
    fredChat = (await api(t.tusko.url, '/api/sessions', { method: 'POST', headers: fred.auth })).json.id;
  });

  test('chat_id: not an id is 400, another user\'s chat or none is 404, checked before anything else', async () => {
    for (const [what, p] of [
      ['list', (q) => get(`/api/utopia/documents${q}`)],
      ['upload', (q) => upload(q, 'Some text.')],
      ['upload, empty body', (q) => upload(q, '')],
      ['search', (q) => get(`/api/utopia/search${q}&q=x`)],
    ]) {
      refused(await p('?chat_id=nope'), 400, 'INVALID_REQUEST', 'chat_id: not a chat id', what);
      refused(await p(`?chat_id=${fredChat}`), 404, 'NOT_FOUND', 'no such chat', what);
      refused(await p(`?chat_id=${NOID}`), 404, 'NOT_FOUND', 'no such chat', what);
    }
    refused(await upload('', ''), 400, 'INVALID_REQUEST', 'the request body is the document; it was empty', 'empty upload');
    refused(await upload(`?chat_id=${chat}`, ''), 400, 'INVALID_REQUEST', 'the request body is the document; it was empty', 'empty upload to a chat');
    // scope is checked before chat_id
    refused(await get('/api/utopia/search?q=x&scope=all&chat_id=nope'), 400, 'INVALID_REQUEST', 'scope: "user" or "chat"', 'bad scope');
    const r = await get(`/api/utopia/search?q=x&scope=chat&chat_id=${chat}`);
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.json.results, []);
  });

  test('a chat_id whose lookup fails is a database error (500), not "no such chat"', async () => {
    t.pg.query('ALTER TABLE chat_sessions RENAME TO chat_sessions_away');
    try {
      refused(await get(`/api/utopia/documents?chat_id=${chat}`), 500, 'UTOPIA_ERROR', 'could not look up the chat: database error', 'list');
      refused(await upload(`?chat_id=${chat}`, 'Some text.'), 500, 'UTOPIA_ERROR', 'could not look up the chat: database error', 'upload');
    } finally {
      t.pg.query('ALTER TABLE chat_sessions_away RENAME TO chat_sessions');
    }
    assert.equal((await get(`/api/utopia/documents?chat_id=${chat}`)).status, 200);
  });

  test('ids in the path: not an id, none and another user\'s are all 404 with the kind named', async () => {
    const doc = (await upload(`?chat_id=${chat}&title=Voles`, 'Voles dig burrows.')).json;
    const mem = (await api(t.tusko.url, '/api/utopia/memories', { json: { note: 'Erin keeps voles' }, headers: erin.auth }));
    assert.equal(mem.status, 201, mem.text);
    const fact = await api(t.tusko.url, '/api/utopia/facts', { json: { fact: { subject: 'Erin', predicate: 'keeps', object: 'voles' } }, headers: erin.auth });
    assert.equal(fact.status, 201, fact.text);
    const memId = mem.json.memory.id;
    const factId = fact.json.fact.id;
    assert.ok(memId && factId, `${mem.text} ${fact.text}`);
    for (const [p, mine, message] of [
      ['GET /api/utopia/documents/', doc.id, 'no such document'],
      ['DELETE /api/utopia/documents/', doc.id, 'no such document'],
      ['DELETE /api/utopia/memories/', memId, 'no such memory'],
      ['DELETE /api/utopia/facts/', factId, 'no such fact'],
    ]) {
      const [method, path] = p.split(' ');
      const call = (id, who) => api(t.tusko.url, path + id, { method, headers: who.auth });
      for (const id of ['nope', NOID, '0000000000000000000000000000000000000']) refused(await call(id, erin), 404, 'NOT_FOUND', message, `${p}${id}`);
      refused(await call(mine, fred), 404, 'NOT_FOUND', message, `${p} of another user`);
    }
    // the answers when they are there
    let r = await get(`/api/utopia/documents/${doc.id}`);
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.id, doc.id);
    assert.equal(r.json.chat_id, chat);
    assert.deepEqual(r.json.chunks.map((c) => c.text), ['Voles dig burrows.']);
    r = await del(`/api/utopia/memories/${memId}`);
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.json, { deleted: true });
    r = await del(`/api/utopia/facts/${factId}`);
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.json, { deleted: true });
    r = await del(`/api/utopia/documents/${doc.id}`);
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.json, { deleted: true, chunks: 1 });
    // gone now
    refused(await del(`/api/utopia/memories/${memId}`), 404, 'NOT_FOUND', 'no such memory', 'memory deleted twice');
    refused(await del(`/api/utopia/facts/${factId}`), 404, 'NOT_FOUND', 'no such fact', 'fact deleted twice');
    refused(await get(`/api/utopia/documents/${doc.id}`), 404, 'NOT_FOUND', 'no such document', 'document deleted');
  });

  test('recall and graph need an entity; remember needs a JSON body', async () => {
    refused(await get('/api/utopia/recall'), 400, 'INVALID_REQUEST', 'entity: required', 'recall');
    refused(await get('/api/utopia/recall?at=2020'), 400, 'INVALID_REQUEST', 'entity: required', 'recall with at');
    refused(await get('/api/utopia/graph?hops=2'), 400, 'INVALID_REQUEST', 'entity: required', 'graph');
    for (const p of ['/api/utopia/memories', '/api/utopia/facts']) {
      let r = await api(t.tusko.url, p, { method: 'POST', body: '{"note": ', headers: { ...erin.auth, 'content-type': 'application/json' } });
      assert.equal(r.status, 400, r.text);
      assert.equal(r.json.code, 'INVALID_JSON', p);
      r = await api(t.tusko.url, p, { method: 'POST', headers: erin.auth });
      refused(r, 400, 'INVALID_JSON', 'a JSON request body is required', `${p} without a body`);
    }
    const r = await api(t.tusko.url, '/api/utopia/facts', { json: { note: 'Erin likes moles' }, headers: erin.auth });
    assert.equal(r.status, 201, r.text);
    assert.equal(r.json.memory.text, 'Erin likes moles');
  });

  test('limit, offset, k, hops and kinds', async () => {
    const ids = [];
    for (const n of ['one', 'two', 'three']) {
      const r = await upload(`?title=Shrew%20${n}`, `Shrews ${n} eat insects.`, fred);
      assert.equal(r.status, 201, r.text);
      ids.push(r.json.id);
    }
    const titles = async (q) => (await get(`/api/utopia/documents${q}`, fred)).json.documents.map((d) => d.title);
    assert.deepEqual(await titles(''), ['Shrew three', 'Shrew two', 'Shrew one']);
    assert.deepEqual(await titles('?limit=1'), ['Shrew three']);
    assert.deepEqual(await titles('?limit=2&offset=1'), ['Shrew two', 'Shrew one']);
    assert.deepEqual(await titles('?offset=2'), ['Shrew one']);
    // a limit or offset that is not a number from 0 to 100000 is the default
    assert.deepEqual(await titles('?limit=x&offset=-1'), ['Shrew three', 'Shrew two', 'Shrew one']);
    assert.deepEqual(await titles('?limit=100001'), ['Shrew three', 'Shrew two', 'Shrew one']);
    for (const note of ['Fred counts shrews', 'Fred feeds shrews']) {
      const r = await api(t.tusko.url, '/api/utopia/memories', { json: { note }, headers: fred.auth });
      assert.equal(r.status, 201, r.text);
    }
    let r = await get('/api/utopia/memories?limit=1', fred);
    assert.equal(r.json.memories.length, 1);
    r = await get('/api/utopia/memories?offset=1', fred);
    assert.equal(r.json.memories.length, 1);
    for (const [s, o] of [['Fred', 'Shrewsbury'], ['Shrewsbury', 'England'], ['England', 'Europe']]) {
      r = await api(t.tusko.url, '/api/utopia/facts', { json: { fact: { subject: s, predicate: 'is in', object: o } }, headers: fred.auth });
      assert.equal(r.status, 201, r.text);
    }
    r = await get('/api/utopia/facts?limit=2', fred);
    assert.equal(r.json.facts.length, 2);
    r = await get('/api/utopia/facts?entity=England&offset=1', fred);
    assert.equal(r.json.facts.length, 1);
    const names = async (q) => (await get(`/api/utopia/graph?entity=Fred${q}`, fred)).json.entities.map((e) => e.name).sort();
    assert.deepEqual(await names(''), ['Fred', 'Shrewsbury']);
    assert.deepEqual(await names('&hops=2'), ['England', 'Fred', 'Shrewsbury']);
    assert.deepEqual(await names('&hops=x'), ['Fred', 'Shrewsbury']);
    r = await get('/api/utopia/recall?entity=Shrewsbury', fred);
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.facts.length, 2);
    // k caps the results; kinds picks them
    r = await get('/api/utopia/search?q=shrews&k=1', fred);
    assert.equal(r.json.results.length, 1);
    r = await get('/api/utopia/search?q=shrews&kinds=memories', fred);
    assert.ok(r.json.results.length >= 1);
    assert.deepEqual([...new Set(r.json.results.map((x) => x.type))], ['memory']);
    r = await get('/api/utopia/search?q=shrews&kinds=chunks', fred);
    assert.ok(r.json.results.length >= 1);
    assert.deepEqual([...new Set(r.json.results.map((x) => x.type))], ['chunk']);
  });
});

describe('utopia upload cap', () => {
  const CAP = 256 << 10;
  let t, u;
  before(async () => {
    t = await startTusko({ tag: 'utopiacap', env: { UTOPIA_MAX_DOCUMENT_BYTES: String(CAP) } });
    u = makeUser(t.pg, 'dora@example.com');
  });

  test('an upload over UTOPIA_MAX_DOCUMENT_BYTES is refused with 413 before its body is read', { timeout: 20000 }, async () => {
    // Content-Length one byte over and only 1 KiB of the body sent: answered
    // at once (a server that reads the body first never answers: the test
    // times out)
    const r = await rawUpload(t.tusko.url, u.auth, { total: CAP + 1, first: 1024 });
    assert.equal(r.status, 413, r.text || String(r.error));
    assert.equal(r.json.code, 'PAYLOAD_TOO_LARGE');
    assert.match(r.json.message, new RegExp(`${CAP + 1} bytes is over the limit of ${CAP} bytes`));
  });

  test('a chunked upload of 32 MiB is not buffered: the server memory does not grow by it', { timeout: 60000 }, async () => {
    const pid = t.tusko.proc.pid;
    fs.writeFileSync(`/proc/${pid}/clear_refs`, '5'); // the peak (VmHWM) starts again from now
    const peak = rssKb(pid, 'VmHWM');
    const r = await rawUpload(t.tusko.url, u.auth, { total: 32 << 20, contentLength: false });
    // refused: a 413, or the connection closed once the refused part passed
    // what the server discards
    assert.ok(r.error || r.status === 413, `refused: ${r.status} ${r.text}`);
    const grown = rssKb(pid, 'VmHWM') - peak;
    assert.ok(grown < 16 * 1024, `peak memory grew by ${grown} KiB`);
    const h = await api(t.tusko.url, '/healthz');
    assert.equal(h.status, 200);
  });

  test('an upload just under the cap is accepted', async () => {
    const body = 'Capybaras are the largest rodents. '.repeat(Math.floor((CAP - 1) / 35)).padEnd(CAP - 1, '.');
    assert.equal(Buffer.byteLength(body), CAP - 1);
    let r = await api(t.tusko.url, '/api/utopia/documents?title=Capybaras', { method: 'POST', body, headers: { ...u.auth, 'content-type': 'text/plain' } });
    assert.equal(r.status, 201, r.text);
    assert.equal(r.json.bytes, CAP - 1);
    r = await api(t.tusko.url, '/api/utopia/documents', { method: 'POST', body: body + '..', headers: { ...u.auth, 'content-type': 'text/plain' } });
    assert.equal(r.status, 413, r.text);
  });
});

describe('utopia and chats', () => {
  test('deleting a chat deletes its documents, not what was learned in it', async () => {
    const t = await startTusko({ tag: 'utopiachat' });
    const u = makeUser(t.pg, 'carol@example.com');
    const chat = (await api(t.tusko.url, '/api/sessions', { method: 'POST', headers: u.auth })).json.id;
    let r = await api(t.tusko.url, `/api/utopia/documents?chat_id=${chat}`, { method: 'POST', body: 'Pangolins eat ants.', headers: { ...u.auth, 'content-type': 'text/plain' } });
    assert.equal(r.status, 201);
    r = await api(t.tusko.url, '/api/utopia/documents', { method: 'POST', body: 'Pangolins have scales.', headers: { ...u.auth, 'content-type': 'text/plain' } });
    assert.equal(r.status, 201);
    r = await api(t.tusko.url, '/api/utopia/facts', { json: { fact: { subject: 'Pangolin', predicate: 'eats', object: 'ants' }, note: 'Carol likes pangolins' }, headers: u.auth });
    assert.equal(r.status, 201);
    r = await api(t.tusko.url, `/api/sessions/${chat}`, { method: 'DELETE', headers: u.auth });
    assert.ok(r.status === 200 || r.status === 204, r.text);
    r = await api(t.tusko.url, '/api/utopia/documents', { headers: u.auth });
    assert.deepEqual(r.json.documents.map((d) => d.chat_id), [null], 'the library document stays');
    r = await api(t.tusko.url, '/api/utopia/search?q=pangolins', { headers: u.auth });
    const kinds = r.json.results.map((x) => x.type).sort();
    assert.deepEqual(kinds, ['chunk', 'fact', 'memory']);
  });
});

test('refused Utopia settings stop the server with the setting named', async () => {
  const { runProgram, startPostgres } = await import('../../lib/harness.mjs');
  const pg = await startPostgres('utopiacfg');
  const r = runProgram('tusko', ['serve'], { env: { DATABASE_URL: pg.url, TUSKO_LISTEN: '127.0.0.1:0', UTOPIA_CHUNK_SIZE: '1000', UTOPIA_CHUNK_OVERLAP: '600' } });
  assert.notEqual(r.code, 0);
  assert.match(r.stderr, /UTOPIA_CHUNK_OVERLAP/);
  const r2 = runProgram('tusko', ['serve'], { env: { DATABASE_URL: pg.url, TUSKO_LISTEN: '127.0.0.1:0', UTOPIA_FTS_CONFIG: 'English; DROP' } });
  assert.notEqual(r2.code, 0);
  assert.match(r2.stderr, /UTOPIA_FTS_CONFIG/);
});
