// A populated tusko, and everything its API reads: for the tests that carry a
// database somewhere else and check nothing was lost — the backup round trip
// (tests/integration/app/backup.test.mjs) and the upgrade from the previous
// release (tests/integration/app/upgrade.test.mjs).
//
//   const data = await populate(base, { users: [alice, bob], sandbox: true });
//   const before = await readAll(base, data);
//   ... move the database ...
//   assert.deepEqual(await readAll(other, data), before);
//
// Users come with a Bearer token ({ id, email, auth }); the turns run against
// the scripted model server with POPULATE_SCENARIOS loaded.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';

import { api, sleep, sse } from './harness.mjs';

const call = (...calls) => ({ steps: [{ tool_calls: calls.map(([name, args]) => ({ name, arguments: args })) }, { text: 'done: {{tool_result}}' }] });

export const POPULATE_SCENARIOS = {
  'pop-talk': { steps: [{ text: 'A plain answer, **with** some Markdown.' }] },
  'pop-plan': call(['plan_task', { goal: 'Write the quarterly notes', milestones: ['outline', 'draft', 'review'] }]),
  'pop-remember': call(
    ['remember', { fact: { subject: 'Ada Quist', predicate: 'lives in', object: 'Lisbon', valid_from: '2021-04' } }],
    ['remember', { note: 'The user prefers short answers.' }],
  ),
  'pop-save': call(['save_document', { title: 'Harvest findings', content: '# Harvest\n\nThe apples came in early this year.\n' }]),
  'pop-write': call(
    ['write_file', { path: 'out/report.md', content: '# Report\n\nFrom the populated instance.\n' }],
    ['execute_command', { command: 'wc -c out/report.md' }],
  ),
};

async function turnOf(base, user, sid, content) {
  const r = await api(base, `/api/sessions/${sid}/messages`, { json: { content }, headers: user.auth });
  assert.equal(r.status, 202, r.text);
  const turnId = r.json.turn_id;
  const got = await sse(base, `/api/sessions/${sid}/events`, {
    headers: user.auth,
    timeoutMs: 60000,
    until: (e) => e.event === 'turn_end' && e.json && e.json.turn_id === turnId,
  });
  const end = got.events.find((e) => e.event === 'turn_end' && e.json.turn_id === turnId);
  assert.ok(end, `turn ${turnId} did not end: ${got.events.map((e) => e.event).join(',')}`);
  assert.equal(end.json.state, 'done', JSON.stringify(end.json));
  return turnId;
}

async function newChat(base, user, title) {
  const r = await api(base, '/api/sessions', { json: { title }, headers: user.auth });
  assert.equal(r.status, 201, r.text);
  return r.json.id;
}

async function ok(p, status = 201) {
  const r = await p;
  assert.equal(r.status, status, r.text);
  return r.json;
}

// Fills tusko at base: for each user chats with tool calls (a plan, memory
// tools, a saved document; with sandbox, a file written, a command run and the
// file downloaded), an uploaded document, a memory, dated facts. Returns
// { users, chats: [{ user, id }], downloads: [{ user, id }], entities }.
export async function populate(base, { users, sandbox = false }) {
  const out = { users, chats: [], downloads: [], entities: ['Ada Quist', 'Bo Lind'] };
  for (const [i, u] of users.entries()) {
    const a = await newChat(base, u, `Planning ${i}`);
    await turnOf(base, u, a, 'make a plan #scenario:pop-plan');
    await turnOf(base, u, a, 'thanks #scenario:pop-talk');
    const b = await newChat(base, u, `Memory ${i}`);
    await turnOf(base, u, b, 'remember this #scenario:pop-remember');
    await turnOf(base, u, b, 'save it #scenario:pop-save');
    out.chats.push({ user: u, id: a }, { user: u, id: b });
    if (sandbox && i === 0) {
      const c = await newChat(base, u, 'Files');
      await turnOf(base, u, c, 'write the report #scenario:pop-write');
      const d = await ok(api(base, `/api/sessions/${c}/files/download`, { json: { path: 'out/report.md' }, headers: u.auth }));
      out.chats.push({ user: u, id: c });
      out.downloads.push({ user: u, id: d.id });
    }
    await ok(
      api(base, '/api/utopia/documents?filename=notes.md&title=Field%20notes', {
        method: 'POST',
        body: `# Field notes ${i}\n\nOtters were seen by the river on Tuesday.\n`,
        headers: { ...u.auth, 'content-type': 'text/markdown' },
      }),
    );
    await ok(api(base, '/api/utopia/memories', { json: { note: `User ${i} keeps bees.` }, headers: u.auth }));
    await ok(api(base, '/api/utopia/facts', { json: { fact: { subject: 'Bo Lind', predicate: 'works at', object: 'Acme', valid_from: '2019' } }, headers: u.auth }));
    await ok(api(base, '/api/utopia/facts', { json: { fact: { subject: 'Bo Lind', predicate: 'works at', object: 'Initech', valid_from: '2023-06-01' } }, headers: u.auth }));
  }
  // let the last events' group commit settle
  await sleep(100);
  return out;
}

const sha = (b) => crypto.createHash('sha256').update(b).digest('hex');

async function read(base, user, p, out) {
  const r = await fetch(base + p, { headers: user.auth });
  const body = Buffer.from(await r.arrayBuffer());
  let v;
  if ((r.headers.get('content-type') || '').includes('application/json')) v = JSON.parse(body.toString('utf8'));
  else v = { bytes: body.length, sha256: sha(body), type: r.headers.get('content-type') };
  out[`${user.email} ${p}`] = { status: r.status, body: v };
  return v;
}

// Every read of the data populate made, per user: the account, the chat list,
// each chat, its messages, its whole event stream, each turn's trace, the
// sandboxes, each download's bytes, documents (and each one), memories, facts,
// recall and graph of the entities, a search. Keyed "email path" → {status, body}.
export async function readAll(base, data) {
  const out = {};
  for (const u of data.users) {
    await read(base, u, '/api/me', out);
    const list = await read(base, u, '/api/sessions?limit=200', out);
    for (const s of list.sessions || []) {
      await read(base, u, `/api/sessions/${s.id}`, out);
      await read(base, u, `/api/sessions/${s.id}/messages?limit=1000`, out);
      const ev = await sse(base, `/api/sessions/${s.id}/events?follow=0`, { headers: u.auth, timeoutMs: 15000 });
      out[`${u.email} events ${s.id}`] = { status: ev.status, body: ev.events.map((e) => ({ id: e.id, event: e.event, data: e.data })) };
      for (const t of new Set(ev.events.filter((e) => e.json && e.json.turn_id).map((e) => e.json.turn_id)))
        await read(base, u, `/api/turns/${t}/trace`, out);
    }
    await read(base, u, '/api/sandboxes', out);
    for (const d of data.downloads.filter((x) => x.user === u)) await read(base, u, `/api/downloads/${d.id}`, out);
    const docs = await read(base, u, '/api/utopia/documents', out);
    for (const d of docs.documents || []) await read(base, u, `/api/utopia/documents/${d.id}`, out);
    await read(base, u, '/api/utopia/memories', out);
    await read(base, u, '/api/utopia/facts', out);
    for (const e of data.entities) {
      await read(base, u, `/api/utopia/recall?entity=${encodeURIComponent(e)}&at=2024-01-01`, out);
      await read(base, u, `/api/utopia/graph?entity=${encodeURIComponent(e)}&at=2024-01-01`, out);
    }
    await read(base, u, '/api/utopia/search?q=otters%20river', out);
  }
  return out;
}

// How much readAll saw (to show a comparison was over real data).
export function census(reads) {
  const n = { reads: 0, events: 0, messages: 0, sessions: 0, spans: 0, documents: 0, downloads: 0 };
  for (const [k, v] of Object.entries(reads)) {
    n.reads++;
    if (k.includes(' events ')) n.events += v.body.length;
    if (k.endsWith('/messages?limit=1000')) n.messages += v.body.messages.length;
    if (k.endsWith('/api/sessions?limit=200')) n.sessions += v.body.sessions.length;
    if (k.includes('/trace')) n.spans += v.body.spans.length;
    if (k.endsWith('/api/utopia/documents')) n.documents += v.body.documents.length;
    if (k.includes('/api/downloads/')) n.downloads++;
  }
  return n;
}
