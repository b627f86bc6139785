// save_document through the agent loop, against the scripted model server, a
// real Postgres and a stand-in OpenSandbox that counts every request (so the
// sandbox lane is on, and a tool that reached for a sandbox would show): a
// finding saved by the model becomes a Utopia document (source "agent", the
// chat and turn recorded) listed by /api/utopia/documents and found by
// search_chunks in a later turn of another chat; bad input (no title, too
// large, another format, no text) gives error results and the turn goes on;
// "chat" scope keeps it with its chat; the Researcher subagent is offered the
// tool and saves with it. No sandbox request is made.
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, describe, test } from 'node:test';

import { stopAll } from '../../lib/harness.mjs';
import { api, events, makeUser, newSession, post, startModels, startTusko, textOf, turn, until } from './lib.mjs';

const FINDING =
  '# Saffron harvest\n\n## Timing\n\nCrocus sativus flowers are picked at dawn in late October; the stigmas of about 150 flowers make one gram of zafferano.\n\n## Drying\n\nThe stigmas are toasted over embers within hours of picking.\n';
const save = (args) => ({ name: 'save_document', arguments: args });

// A turn followed by replaying the session's events until its turn_end: a
// tool_start carrying 300 KB of arguments is more than a live event stream
// buffers, and the server ends such a lagging stream (clients replay).
async function turnReplayed(base, user, sid, content) {
  const r = await post(base, user, sid, content);
  assert.equal(r.status, 202, r.text);
  const id = r.json.turn_id;
  const evs = await until(async () => {
    const all = (await events(base, user, sid)).filter((e) => e.json && e.json.turn_id === id);
    return all.length && all.at(-1).event === 'turn_end' ? all : null;
  }, { timeoutMs: 60000, what: `the end of turn ${id}` });
  return { turnId: id, events: evs, end: evs.at(-1).json };
}

const SCENARIOS = {
  'save-finding': {
    steps: [
      {
        tool_calls: [
          save({ title: 'Saffron harvest: findings', content: FINDING }),
          save({ content: 'no title' }),
          save({ title: 'Huge', content: 'word '.repeat(60 * 1024) }),
          save({ title: 'A PDF', content: '%PDF-1.4 ...', format: 'pdf' }),
          save({ title: 'Blank', content: ' \n\t\n ' }),
          save({ title: 'Scoped', content: 'x', scope: 'everywhere' }),
        ],
      },
      { text: 'results: {{tool_results}}' },
    ],
  },
  'save-chat': {
    steps: [
      { tool_calls: [save({ title: 'Chat note on kumquats', content: 'Kumquats are eaten whole, peel and all.', format: 'text', scope: 'chat' })] },
      { text: 'saved: {{tool_result}}' },
    ],
  },
  'search-saved': {
    steps: [
      { tool_calls: [{ name: 'search_chunks', arguments: { query: 'zafferano stigmas' } }] },
      { text: 'found: {{tool_result}}' },
    ],
  },
  'delegate-save': {
    steps: [
      { tool_calls: [{ name: 'delegate_subagent', arguments: { role: 'researcher', task: 'find out about loquats and save it #scenario:researcher-save' } }] },
      { text: 'researcher: {{tool_result}}' },
    ],
  },
  'researcher-save': {
    steps: [
      { tool_calls: [save({ title: 'Loquat notes', content: '# Loquats\n\nLoquats ripen in early spring and bruise easily.\n' })] },
      { text: 'Saved the loquat notes.' },
    ],
  },
};

describe('save_document', () => {
  let ms, stack, base, sandboxRequests, fakeSandbox;

  before(async () => {
    // every request the stand-in OpenSandbox gets is recorded and refused
    sandboxRequests = [];
    fakeSandbox = http.createServer((req, res) => {
      sandboxRequests.push(`${req.method} ${req.url}`);
      req.resume();
      res.writeHead(503, { 'content-type': 'application/json' });
      res.end('{"code":"UNAVAILABLE","message":"stand-in"}');
    });
    await new Promise((r) => fakeSandbox.listen(0, '127.0.0.1', r));
    ms = await startModels({ scenarios: SCENARIOS });
    stack = await startTusko(ms, {
      env: { OPENSANDBOX_URL: `http://127.0.0.1:${fakeSandbox.address().port}`, OPENSANDBOX_API_KEY: 'stand-in-key' },
    });
    base = stack.tusko.url;
  });
  after(async () => {
    await stopAll();
    await ms.close();
    await new Promise((r) => fakeSandbox.close(r));
  });

  test('a finding is saved as a document, listed, and found by search_chunks in a later turn; bad input is an error result', async () => {
    const u = makeUser(stack.pg);
    const sid = await newSession(base, u);
    const t = await turnReplayed(base, u, sid, 'research saffron and keep it #scenario:save-finding');
    assert.equal(t.end.state, 'done', JSON.stringify(t.end));
    const ends = t.events.filter((e) => e.event === 'tool_end').map((e) => e.json);
    assert.deepEqual(ends.map((e) => [e.name, e.lane, e.ok]), [
      ['save_document', 'fast', true],
      ['save_document', 'fast', false],
      ['save_document', 'fast', false],
      ['save_document', 'fast', false],
      ['save_document', 'fast', false],
      ['save_document', 'fast', false],
    ]);
    const [ok, noTitle, huge, pdf, blank, scope] = ends;
    assert.match(ok.result, /^Saved the document "Saffron harvest: findings" \(\d+ chunks?, \d+ bytes\) to the user's library/);
    assert.equal(ok.data.title, 'Saffron harvest: findings');
    assert.equal(ok.document_id, ok.data.id);
    assert.equal(ok.scope, 'user');
    assert.match(noTitle.result, /"title" .* is required/);
    assert.match(huge.result, /not saved: "content" is 307200 bytes; at most 262144 are accepted/);
    assert.match(pdf.result, /"format" is "markdown" \(the default\) or "text"/);
    assert.match(blank.result, /not saved: no text found/);
    assert.match(scope.result, /"scope" is "user"/);
    // the turn went on: the model was given every result and answered
    assert.match(textOf(t.events), /results: Saved the document/);
    assert.equal(ms.requests('save-finding').at(-1).step, 1);
    // the sandbox lane was on (its tools offered), and none of this used it
    assert.ok(ms.requests('save-finding')[0].tools.includes('execute_command'));
    assert.ok(ms.requests('save-finding')[0].tools.includes('save_document'));
    assert.ok(!t.events.some((e) => e.event === 'sandbox_spawn'));

    // the Memory tab's documents: the finding, from the agent, with its chat and turn
    const docs = await api(base, '/api/utopia/documents', { headers: u.auth });
    assert.equal(docs.status, 200, docs.text);
    assert.equal(docs.json.documents.length, 1, 'only the good one was stored');
    const d = docs.json.documents[0];
    assert.equal(d.id, ok.data.id);
    assert.equal(d.title, 'Saffron harvest: findings');
    assert.equal(d.source, 'agent');
    assert.equal(d.mime, 'text/markdown');
    assert.equal(d.chat_id, null, 'the user library (default scope)');
    assert.equal(d.source_chat_id, sid);
    assert.equal(d.source_turn_id, t.turnId);
    const full = await api(base, `/api/utopia/documents/${d.id}`, { headers: u.auth });
    assert.ok(full.json.chunks.some((c) => c.heading.includes('Timing') && c.text.includes('zafferano')), full.text);

    // a later turn, in another chat, finds it with search_chunks
    const sid2 = await newSession(base, u);
    const s = await turn(base, u, sid2, 'what do we know? #scenario:search-saved');
    const found = s.events.find((e) => e.event === 'tool_end').json;
    assert.equal(found.ok, true, found.result);
    const chunk = found.data.results.find((r) => r.type === 'chunk');
    assert.equal(chunk.document_id, d.id);
    assert.match(found.result, /\[1\] Saffron harvest: findings — .*Timing/);
    assert.match(textOf(s.events), /found: .*\*\*zafferano\*\*/s);

    // another user sees none of it
    const other = makeUser(stack.pg);
    const od = await api(base, '/api/utopia/documents', { headers: other.auth });
    assert.equal(od.json.documents.length, 0);
    assert.deepEqual(sandboxRequests.filter((r) => r.startsWith('POST')), [], 'no sandbox was asked for');
  });

  test('scope "chat" keeps the document with its chat: deleting the chat deletes it', async () => {
    const u = makeUser(stack.pg);
    const sid = await newSession(base, u);
    const t = await turn(base, u, sid, 'note it here #scenario:save-chat');
    const end = t.events.find((e) => e.event === 'tool_end').json;
    assert.equal(end.ok, true, end.result);
    assert.match(end.result, /to this chat's documents/);
    let docs = await api(base, `/api/utopia/documents?chat_id=${sid}`, { headers: u.auth });
    assert.equal(docs.json.documents.length, 1);
    assert.equal(docs.json.documents[0].chat_id, sid);
    assert.equal(docs.json.documents[0].mime, 'text/plain');
    const del = await api(base, `/api/sessions/${sid}`, { method: 'DELETE', headers: u.auth });
    assert.ok(del.status === 200 || del.status === 204, del.text);
    docs = await api(base, '/api/utopia/documents', { headers: u.auth });
    assert.equal(docs.json.documents.length, 0);
  });

  test('the Researcher subagent is offered save_document and saves with it', async () => {
    const u = makeUser(stack.pg);
    const sid = await newSession(base, u);
    const t = await turn(base, u, sid, 'delegate #scenario:delegate-save');
    assert.equal(t.end.state, 'done', JSON.stringify(t.end));
    const start = t.events.find((e) => e.event === 'subagent_start').json;
    assert.equal(start.agent, 'researcher');
    assert.ok(start.tools.includes('save_document'), start.tools.join(','));
    assert.ok(ms.requests('researcher-save')[0].tools.includes('save_document'));
    const nested = t.events.find((e) => e.event === 'tool_end' && e.json.subagent_id === start.subagent_id).json;
    assert.equal(nested.name, 'save_document');
    assert.equal(nested.ok, true, nested.result);
    const docs = await api(base, '/api/utopia/documents', { headers: u.auth });
    assert.deepEqual(docs.json.documents.map((x) => [x.title, x.source, x.source_chat_id, x.source_turn_id]), [['Loquat notes', 'agent', sid, t.turnId]]);
    assert.deepEqual(sandboxRequests.filter((r) => r.startsWith('POST')), [], 'no sandbox was asked for');
  });
});
