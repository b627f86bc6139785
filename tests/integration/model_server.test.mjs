// Tests of the scripted model server (tests/model-server/server.mjs), driven
// over real HTTP with fetch.  Run: node --test tests/integration/model_server.test.mjs
import { test as nodeTest, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import http from 'node:http';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startModelServer } from '../model-server/server.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const SERVER = path.join(ROOT, 'tests/model-server/server.mjs');
const KEY = 'sk-test-SECRET-value-1234';
const OA_HEADERS = { 'content-type': 'application/json', authorization: `Bearer ${KEY}` };
const AN_HEADERS = { 'content-type': 'application/json', 'x-api-key': KEY, 'anthropic-version': '2023-06-01' };

// --- helpers ---------------------------------------------------------------

function oa(url, body, { headers = OA_HEADERS, signal } = {}) {
  return fetch(`${url}/v1/chat/completions`, { method: 'POST', headers, body: JSON.stringify(body), signal });
}
function an(url, body, { headers = AN_HEADERS, signal } = {}) {
  return fetch(`${url}/v1/messages`, { method: 'POST', headers, body: JSON.stringify({ max_tokens: 1024, ...body }), signal });
}
const user = (content) => ({ role: 'user', content });

// Read a body to its end, keeping what arrived if the connection breaks.
async function readAll(res) {
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let text = '';
  let error = null;
  const arrivals = [];
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      arrivals.push({ t: performance.now(), s: dec.decode(value, { stream: true }) });
      text += arrivals.at(-1).s;
    }
  } catch (e) {
    error = e;
  }
  return { text, error, arrivals };
}

function parseSSE(text) {
  return text.split('\n\n').filter((b) => b.trim()).map((block) => {
    const ev = { event: null, data: null, raw: block };
    for (const line of block.split('\n')) {
      if (line.startsWith('event: ')) ev.event = line.slice(7);
      else if (line.startsWith('data: ')) ev.data = ev.data === null ? line.slice(6) : `${ev.data}\n${line.slice(6)}`;
    }
    return ev;
  });
}

function tryJson(s) {
  try { return JSON.parse(s); } catch { return undefined; }
}

// Reassemble an OpenAI chat.completion.chunk stream the way a client would.
function collectOpenAI(text) {
  const out = { text: '', calls: [], finish: null, usage: null, done: false, ids: new Set(), chunks: [], bad: [], deltas: 0 };
  for (const ev of parseSSE(text)) {
    if (ev.data === null) { out.bad.push(ev.raw); continue; }
    if (ev.data === '[DONE]') { out.done = true; continue; }
    const c = tryJson(ev.data);
    if (c === undefined) { out.bad.push(ev.raw); continue; }
    out.chunks.push(c);
    if (c.error) { out.error = c.error; continue; }
    out.ids.add(c.id);
    if (c.usage) out.usage = c.usage;
    for (const ch of c.choices) {
      if (ch.finish_reason) out.finish = ch.finish_reason;
      if (typeof ch.delta.content === 'string' && ch.delta.content) { out.text += ch.delta.content; out.deltas++; }
      for (const tc of ch.delta.tool_calls ?? []) {
        const slot = (out.calls[tc.index] ??= { id: null, name: null, arguments: '', pieces: 0 });
        if (tc.id) slot.id = tc.id;
        if (tc.function?.name) slot.name = tc.function.name;
        if (tc.function?.arguments) { slot.arguments += tc.function.arguments; slot.pieces++; out.deltas++; }
      }
    }
  }
  return out;
}

// Reassemble an Anthropic Messages event stream.
function collectAnthropic(text) {
  const out = { types: [], text: '', blocks: [], stopReason: null, usage: {}, stopped: false, bad: [], deltas: 0, start: null };
  for (const ev of parseSSE(text)) {
    const d = ev.data === null ? undefined : tryJson(ev.data);
    if (d === undefined) { out.bad.push(ev.raw); continue; }
    assert.equal(ev.event, d.type, 'the event: name matches data.type');
    out.types.push(d.type);
    switch (d.type) {
      case 'message_start': out.start = d.message; Object.assign(out.usage, d.message.usage); break;
      case 'content_block_start': out.blocks[d.index] = { ...d.content_block, json: '', pieces: 0 }; break;
      case 'content_block_delta':
        out.deltas++;
        if (d.delta.type === 'text_delta') { out.blocks[d.index].text += d.delta.text; out.text += d.delta.text; }
        else if (d.delta.type === 'input_json_delta') { out.blocks[d.index].json += d.delta.partial_json; out.blocks[d.index].pieces++; }
        break;
      case 'message_delta': out.stopReason = d.delta.stop_reason; Object.assign(out.usage, d.usage); break;
      case 'message_stop': out.stopped = true; break;
      case 'error': out.error = d.error; break;
      default: break;
    }
  }
  return out;
}

async function jsonOf(res) {
  const t = await res.text();
  const j = tryJson(t);
  assert.notEqual(j, undefined, `expected a JSON body, got: ${t.slice(0, 200)}`);
  return j;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Every test has a deadline, so a stream that never ends fails instead of hanging the run.
const test = (name, fn, timeout = 20_000) => nodeTest(name, { timeout }, fn);

// --- the shared server ------------------------------------------------------

let ms;
before(async () => {
  ms = await startModelServer({
    scenarios: {
      steps3: { on_exhausted: 'error', steps: [{ text: 'step zero' }, { text: 'step one' }, { text: 'step two' }] },
      repeat2: { steps: [{ text: 'first' }, { text: 'last' }] },
      usage: { steps: [{ text: 'counted', usage: { input_tokens: 111, output_tokens: 22 } }] },
    },
  });
});
after(async () => {
  await ms.close();
});

describe('basics', () => {
  test('health, models and unknown paths', async () => {
    const h = await fetch(`${ms.url}/_health`);
    assert.equal(h.status, 200);
    assert.equal((await h.json()).ok, true);

    const om = await fetch(`${ms.url}/v1/models`, { headers: OA_HEADERS });
    assert.equal(om.status, 200);
    const ol = await om.json();
    assert.equal(ol.object, 'list');
    assert.ok(ol.data.length > 0 && ol.data.every((m) => m.object === 'model' && typeof m.id === 'string'));

    const am = await fetch(`${ms.url}/v1/models`, { headers: AN_HEADERS });
    const al = await am.json();
    assert.ok(al.data.length > 0 && al.data.every((m) => m.type === 'model' && m.id.startsWith('claude')));
    assert.equal(al.has_more, false);

    assert.equal((await fetch(`${ms.url}/v1/models`)).status, 401);
    const nf = await fetch(`${ms.url}/v1/nothing`, { method: 'POST', headers: OA_HEADERS, body: '{}' });
    assert.equal(nf.status, 404);
    assert.equal(typeof (await nf.json()).error.message, 'string');
  });

  test('server is tuned for many long-lived connections', () => {
    assert.equal(ms.server.maxConnections, Infinity);
    assert.ok(ms.server.keepAliveTimeout >= 5000);
    assert.ok(ms.server.headersTimeout > 0 && ms.server.headersTimeout <= 60_000);
    assert.ok(ms.server.requestTimeout > 0);
    assert.equal(ms.server.address().address, '127.0.0.1');
  });

  test('keep-alive: a second request reuses the connection', async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const once = () => new Promise((resolve, reject) => {
      const req = http.request(`${ms.url}/v1/chat/completions`, { method: 'POST', agent, headers: OA_HEADERS }, (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode, reused: req.reusedSocket }));
      });
      req.on('error', reject);
      req.end(JSON.stringify({ model: 'gpt-4o', messages: [user('hi')] }));
    });
    const a = await once();
    const b = await once();
    agent.destroy();
    assert.equal(a.status, 200);
    assert.equal(b.reused, true);
  });
});

describe('auth and request validation', () => {
  test('OpenAI: missing or non-Bearer Authorization is refused in OpenAI error shape', async () => {
    for (const headers of [{ 'content-type': 'application/json' }, { authorization: 'Basic abc' }, { authorization: 'Bearer ' }]) {
      const r = await oa(ms.url, { model: 'gpt-4o', messages: [user('hi')] }, { headers });
      assert.equal(r.status, 401);
      const b = await r.json();
      assert.equal(typeof b.error.message, 'string');
      assert.equal(b.error.type, 'invalid_request_error');
      assert.ok('param' in b.error && 'code' in b.error);
    }
  });

  test('Anthropic: x-api-key and anthropic-version are required, errors in Anthropic shape', async () => {
    const body = { model: 'claude-sonnet-4-5', messages: [user('hi')] };
    const r1 = await an(ms.url, body, { headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01' } });
    assert.equal(r1.status, 401);
    const b1 = await r1.json();
    assert.equal(b1.type, 'error');
    assert.equal(b1.error.type, 'authentication_error');
    const r2 = await an(ms.url, body, { headers: { 'content-type': 'application/json', 'x-api-key': KEY } });
    assert.equal(r2.status, 400);
    const b2 = await r2.json();
    assert.equal(b2.error.type, 'invalid_request_error');
    assert.match(b2.error.message, /anthropic-version/);
    // A Bearer header is not a substitute for x-api-key.
    const r3 = await an(ms.url, body, { headers: { authorization: `Bearer ${KEY}`, 'anthropic-version': '2023-06-01' } });
    assert.equal(r3.status, 401);
  });

  test('apiKey option: only the configured key is accepted', async () => {
    const s = await startModelServer({ scenariosDir: false, apiKey: 'right' });
    try {
      const bad = await oa(s.url, { model: 'm', messages: [user('x')] }, { headers: { authorization: 'Bearer wrong' } });
      assert.equal(bad.status, 401);
      assert.equal((await bad.json()).error.code, 'invalid_api_key');
      const good = await oa(s.url, { model: 'm', messages: [user('x')] }, { headers: { authorization: 'Bearer right' } });
      assert.equal(good.status, 200);
      const abad = await an(s.url, { model: 'm', messages: [user('x')] }, { headers: { ...AN_HEADERS, 'x-api-key': 'wrong' } });
      assert.equal(abad.status, 401);
    } finally {
      await s.close();
    }
  });

  test('invalid JSON and missing fields are 400s the real APIs would give', async () => {
    const r = await fetch(`${ms.url}/v1/chat/completions`, { method: 'POST', headers: OA_HEADERS, body: '{"model":' });
    assert.equal(r.status, 400);
    assert.match((await r.json()).error.message, /parse the JSON/);
    assert.equal((await oa(ms.url, { messages: [user('x')] })).status, 400);
    assert.equal((await oa(ms.url, { model: 'gpt-4o', messages: [] })).status, 400);
    const noMax = await fetch(`${ms.url}/v1/messages`, { method: 'POST', headers: AN_HEADERS,
      body: JSON.stringify({ model: 'claude-sonnet-4-5', messages: [user('x')] }) });
    assert.equal(noMax.status, 400);
    assert.match((await noMax.json()).error.message, /max_tokens/);
    const sys = await an(ms.url, { model: 'c', messages: [{ role: 'system', content: 's' }, user('x')] });
    assert.equal(sys.status, 400);
    assert.match((await sys.json()).error.message, /Unexpected role "system"/);
    const empty = await an(ms.url, { model: 'c', messages: [user('')] });
    assert.equal(empty.status, 400);
  });

  test('tool call / tool result pairing is enforced (strict mode)', async () => {
    const call = { id: 'call_1', type: 'function', function: { name: 'f', arguments: '{}' } };
    const missing = await oa(ms.url, { model: 'm', messages: [user('x'), { role: 'assistant', content: null, tool_calls: [call] }, user('y')] });
    assert.equal(missing.status, 400);
    assert.match((await missing.json()).error.message, /call_1/);
    const orphan = await oa(ms.url, { model: 'm', messages: [user('x'), { role: 'tool', tool_call_id: 'call_9', content: 'r' }] });
    assert.equal(orphan.status, 400);
    assert.match((await orphan.json()).error.message, /role 'tool'/);

    const use = { type: 'tool_use', id: 'toolu_1', name: 'f', input: {} };
    const aMissing = await an(ms.url, { model: 'c', messages: [user('x'), { role: 'assistant', content: [use] }, user('y')] });
    assert.equal(aMissing.status, 400);
    assert.match((await aMissing.json()).error.message, /toolu_1/);
    const aOrphan = await an(ms.url, { model: 'c', messages: [user([{ type: 'tool_result', tool_use_id: 'toolu_x', content: 'r' }])] });
    assert.equal(aOrphan.status, 400);

    const lenient = await startModelServer({ scenariosDir: false, strict: false });
    try {
      assert.equal((await oa(lenient.url, { model: 'm', messages: [user('x'), { role: 'assistant', content: null, tool_calls: [call] }, user('y')] })).status, 200);
    } finally {
      await lenient.close();
    }
  });
});

describe('OpenAI Chat Completions', () => {
  test('default scenario, non-streaming: echoes the message count', async () => {
    const r = await oa(ms.url, { model: 'gpt-4o', messages: [{ role: 'system', content: 'S' }, user('a'), { role: 'assistant', content: 'b' }, user('c')] });
    assert.equal(r.status, 200);
    assert.equal(r.headers.get('x-scenario'), 'default');
    const b = await r.json();
    assert.equal(b.object, 'chat.completion');
    assert.equal(b.model, 'gpt-4o');
    assert.equal(b.choices[0].message.role, 'assistant');
    assert.match(b.choices[0].message.content, /received 4 messages/);
    assert.equal(b.choices[0].finish_reason, 'stop');
    assert.ok(b.usage.prompt_tokens > 0 && b.usage.total_tokens === b.usage.prompt_tokens + b.usage.completion_tokens);
  });

  test('streaming text: chunk format, one id, finish_reason stop, [DONE] last', async () => {
    const r = await oa(ms.url, { model: 'gpt-4o-mini', stream: true, messages: [user('#scenario:text')] });
    assert.equal(r.status, 200);
    assert.match(r.headers.get('content-type'), /^text\/event-stream/);
    const { text, error } = await readAll(r);
    assert.equal(error, null);
    const events = parseSSE(text);
    assert.equal(events.at(-1).data, '[DONE]');
    const c = collectOpenAI(text);
    assert.equal(c.text, 'Hello! This is a scripted reply to 1 messages.');
    assert.equal(c.deltas, 9, 'one delta per word');
    assert.equal(c.ids.size, 1);
    assert.equal(c.finish, 'stop');
    assert.equal(c.bad.length, 0);
    assert.ok(c.chunks.every((ch) => ch.object === 'chat.completion.chunk' && ch.model === 'gpt-4o-mini' && !('usage' in ch)));
    assert.deepEqual(c.chunks[0].choices[0].delta, { role: 'assistant', content: '', refusal: null });
  });

  test('stream_options.include_usage adds a final usage chunk with empty choices', async () => {
    const r = await oa(ms.url, { model: 'm', stream: true, stream_options: { include_usage: true }, messages: [user('#scenario:usage')] });
    const c = collectOpenAI((await readAll(r)).text);
    assert.ok(c.done);
    const last = c.chunks.at(-1);
    assert.deepEqual(last.choices, []);
    assert.deepEqual({ p: last.usage.prompt_tokens, c: last.usage.completion_tokens, t: last.usage.total_tokens }, { p: 111, c: 22, t: 133 });
    assert.ok(c.chunks.slice(0, -1).every((ch) => ch.usage === null), 'earlier chunks carry usage: null');
  });

  test('tool call streamed in pieces, then step 1 after the tool result quotes it', async () => {
    const tools = [{ type: 'function', function: { name: 'search_chunks', parameters: { type: 'object' } } }];
    const first = [user('Find revenue #scenario:tool-then-text')];
    const r0 = await oa(ms.url, { model: 'gpt-4o', stream: true, tools, messages: first });
    assert.equal(r0.headers.get('x-scenario-step'), '0');
    const c0 = collectOpenAI((await readAll(r0)).text);
    assert.equal(c0.finish, 'tool_calls');
    assert.equal(c0.text, 'Let me look that up.');
    assert.equal(c0.calls.length, 1);
    assert.equal(c0.calls[0].name, 'search_chunks');
    assert.match(c0.calls[0].id, /^call_/);
    assert.ok(c0.calls[0].pieces > 1, 'arguments arrive in several pieces');
    assert.deepEqual(JSON.parse(c0.calls[0].arguments), { query: 'quarterly revenue', limit: 5 });
    assert.ok(c0.done);

    const history = [...first,
      { role: 'assistant', content: c0.text, tool_calls: [{ id: c0.calls[0].id, type: 'function', function: { name: 'search_chunks', arguments: c0.calls[0].arguments } }] },
      { role: 'tool', tool_call_id: c0.calls[0].id, content: 'revenue was 42 MEUR' }];
    const r1 = await oa(ms.url, { model: 'gpt-4o', stream: true, tools, messages: history });
    assert.equal(r1.headers.get('x-scenario-step'), '1');
    const c1 = collectOpenAI((await readAll(r1)).text);
    assert.equal(c1.text, 'The search returned: revenue was 42 MEUR');
    assert.equal(c1.finish, 'stop');
  });

  test('non-streaming tool call: arguments is a JSON string, content null', async () => {
    const r = await oa(ms.url, { model: 'gpt-4o', messages: [user('#scenario:parallel-tools')] });
    const b = await r.json();
    const m = b.choices[0].message;
    assert.equal(b.choices[0].finish_reason, 'tool_calls');
    assert.equal(m.content, null);
    assert.equal(m.tool_calls.length, 2);
    assert.equal(m.tool_calls[0].type, 'function');
    assert.deepEqual(JSON.parse(m.tool_calls[0].function.arguments), { goal: 'Q3 deck', milestones: ['outline', 'slides', 'notes'] });
    assert.deepEqual(JSON.parse(m.tool_calls[1].function.arguments), { fact: 'user prefers dark themes' });
    assert.notEqual(m.tool_calls[0].id, m.tool_calls[1].id);
  });

  test('parallel tool calls stream with their own index; tool_result_count templating', async () => {
    const r = await oa(ms.url, { model: 'gpt-4o', stream: true, messages: [user('#scenario:parallel-tools')] });
    const c = collectOpenAI((await readAll(r)).text);
    assert.equal(c.calls.length, 2);
    assert.deepEqual(c.calls.map((x) => x.name), ['plan_task', 'remember']);
    assert.equal(c.calls[1].pieces, 3, 'the scenario asked for 3 pieces');
    assert.deepEqual(JSON.parse(c.calls[1].arguments), { fact: 'user prefers dark themes' });
    // The tool role message has no content array issues: reply after two results.
    const msgs = [user('#scenario:parallel-tools'),
      { role: 'assistant', content: null, tool_calls: c.calls.map((x) => ({ id: x.id, type: 'function', function: { name: x.name, arguments: x.arguments } })) },
      { role: 'tool', tool_call_id: c.calls[0].id, content: 'planned' },
      { role: 'tool', tool_call_id: c.calls[1].id, content: [{ type: 'text', text: 'remembered' }] }];
    const r1 = await oa(ms.url, { model: 'gpt-4o', stream: true, messages: msgs });
    const c1 = collectOpenAI((await readAll(r1)).text);
    assert.equal(c1.text, 'Done: 2 tool results received.');
    assert.equal(c1.deltas, 4);
  });
});

describe('Anthropic Messages', () => {
  test('streaming text: exact event sequence', async () => {
    const r = await an(ms.url, { model: 'claude-sonnet-4-5', stream: true, messages: [user('#scenario:text')] });
    assert.equal(r.status, 200);
    assert.match(r.headers.get('content-type'), /^text\/event-stream/);
    const { text, error } = await readAll(r);
    assert.equal(error, null);
    const c = collectAnthropic(text);
    const deltas = Array(9).fill('content_block_delta');
    assert.deepEqual(c.types, ['message_start', 'ping', 'content_block_start', ...deltas, 'content_block_stop', 'message_delta', 'message_stop']);
    assert.equal(c.text, 'Hello! This is a scripted reply to 1 messages.');
    assert.equal(c.stopReason, 'end_turn');
    assert.equal(c.start.model, 'claude-sonnet-4-5');
    assert.equal(c.start.role, 'assistant');
    assert.match(c.start.id, /^msg_/);
  });

  test('usage numbers from the scenario appear in message_start and message_delta', async () => {
    const c = collectAnthropic((await readAll(await an(ms.url, { model: 'c', stream: true, messages: [user('#scenario:usage')] }))).text);
    assert.equal(c.usage.input_tokens, 111);
    assert.equal(c.usage.output_tokens, 22);
  });

  test('tool_use streamed as input_json_delta, step 1 after tool_result', async () => {
    const tools = [{ name: 'search_chunks', description: 'search', input_schema: { type: 'object' } }];
    const first = [user([{ type: 'text', text: 'Find it #scenario:tool-then-text' }])];
    const r0 = await an(ms.url, { model: 'claude-sonnet-4-5', stream: true, tools, messages: first });
    const c0 = collectAnthropic((await readAll(r0)).text);
    assert.equal(c0.stopReason, 'tool_use');
    assert.ok(c0.stopped);
    assert.equal(c0.blocks[0].type, 'text');
    assert.equal(c0.blocks[0].text, 'Let me look that up.');
    const tu = c0.blocks[1];
    assert.equal(tu.type, 'tool_use');
    assert.equal(tu.name, 'search_chunks');
    assert.deepEqual(tu.input, {});
    assert.match(tu.id, /^toolu_/);
    assert.ok(tu.pieces > 1);
    assert.deepEqual(JSON.parse(tu.json), { query: 'quarterly revenue', limit: 5 });

    const history = [...first,
      { role: 'assistant', content: [{ type: 'text', text: c0.blocks[0].text }, { type: 'tool_use', id: tu.id, name: tu.name, input: JSON.parse(tu.json) }] },
      user([{ type: 'tool_result', tool_use_id: tu.id, content: [{ type: 'text', text: '7 chunks found' }] }])];
    const r1 = await an(ms.url, { model: 'claude-sonnet-4-5', stream: true, tools, messages: history });
    assert.equal(r1.headers.get('x-scenario-step'), '1');
    const c1 = collectAnthropic((await readAll(r1)).text);
    assert.equal(c1.text, 'The search returned: 7 chunks found');
    assert.equal(c1.stopReason, 'end_turn');
  });

  test('non-streaming: content blocks with tool_use input object', async () => {
    const r = await an(ms.url, { model: 'claude-x', messages: [user('#scenario:tool-then-text')] });
    const b = await r.json();
    assert.equal(b.type, 'message');
    assert.equal(b.role, 'assistant');
    assert.equal(b.stop_reason, 'tool_use');
    assert.deepEqual(b.content[0], { type: 'text', text: 'Let me look that up.' });
    assert.equal(b.content[1].type, 'tool_use');
    assert.deepEqual(b.content[1].input, { query: 'quarterly revenue', limit: 5 });
    assert.ok(b.usage.input_tokens > 0 && b.usage.output_tokens > 0);
  });
});

describe('scenario selection', () => {
  test('step = assistant messages after the last marked user message', async () => {
    const conv = [user('#scenario:steps3'), { role: 'assistant', content: 'a' }, user('go on'), { role: 'assistant', content: 'b' }, user('and?')];
    const b = await (await oa(ms.url, { model: 'm', messages: conv })).json();
    assert.equal(b.choices[0].message.content, 'step two');
    const ab = await (await an(ms.url, { model: 'c', messages: conv })).json();
    assert.equal(ab.content[0].text, 'step two');
    // A later marker starts a new scenario at step 0.
    const again = [...conv, { role: 'assistant', content: 'c' }, user('now #scenario:repeat2')];
    const b2 = await (await oa(ms.url, { model: 'm', messages: again })).json();
    assert.equal(b2.choices[0].message.content, 'first');
    // The last marker inside one message wins.
    const b3 = await (await oa(ms.url, { model: 'm', messages: [user('#scenario:steps3 no, #scenario:repeat2')] })).json();
    assert.equal(b3.choices[0].message.content, 'first');
    // Markers in system prompts or tool results do not select.
    const b4 = await (await oa(ms.url, { model: 'm', messages: [{ role: 'system', content: '#scenario:steps3' }, user('plain')] })).json();
    assert.match(b4.choices[0].message.content, /Hello from the Tusko model server/);
  });

  test('running past the last step: repeat by default, 400 with on_exhausted "error"', async () => {
    const conv = [user('#scenario:repeat2'), { role: 'assistant', content: '1' }, user('x'), { role: 'assistant', content: '2' }, user('y')];
    const b = await (await oa(ms.url, { model: 'm', messages: conv })).json();
    assert.equal(b.choices[0].message.content, 'last');
    const ex = [user('#scenario:steps3'), ...['1', '2', '3'].flatMap((a) => [{ role: 'assistant', content: a }, user('more')])];
    const r = await oa(ms.url, { model: 'm', messages: ex });
    assert.equal(r.status, 400);
    const e = await r.json();
    assert.equal(e.error.code, 'scenario_exhausted');
    assert.match(e.error.message, /"steps3" has 3 step\(s\); step 3/);
  });

  test('unknown scenario: HTTP 400 naming it, in each protocol\'s shape', async () => {
    const r = await oa(ms.url, { model: 'm', stream: true, messages: [user('#scenario:no-such-thing')] });
    assert.equal(r.status, 400);
    const b = await r.json();
    assert.match(b.error.message, /unknown scenario "no-such-thing"/);
    assert.equal(b.error.code, 'unknown_scenario');
    const ra = await an(ms.url, { model: 'c', messages: [user('#scenario:no-such-thing')] });
    assert.equal(ra.status, 400);
    const ba = await ra.json();
    assert.equal(ba.type, 'error');
    assert.match(ba.error.message, /unknown scenario "no-such-thing"/);
  });

  test('inline scenarios: POST /_scenarios validates, then serves; addScenario too', async () => {
    const bad = await fetch(`${ms.url}/_scenarios`, { method: 'POST', body: JSON.stringify({ name: 'typo', steps: [{ txt: 'x' }] }) });
    assert.equal(bad.status, 400);
    assert.match((await bad.json()).error, /unknown field "txt"/);
    const badVar = await fetch(`${ms.url}/_scenarios`, { method: 'POST', body: JSON.stringify({ name: 'v', steps: [{ text: '{{nope}}' }] }) });
    assert.equal(badVar.status, 400);
    assert.match((await badVar.json()).error, /\{\{nope\}\}/);
    const badName = await fetch(`${ms.url}/_scenarios`, { method: 'POST', body: JSON.stringify({ name: 'a b', steps: [{ text: 'x' }] }) });
    assert.equal(badName.status, 400);

    const ok = await fetch(`${ms.url}/_scenarios`, { method: 'POST', body: JSON.stringify({ name: 'inline-x', steps: [{ chunks: ['in', 'line'] }] }) });
    assert.equal(ok.status, 201);
    assert.deepEqual(await ok.json(), { name: 'inline-x', steps: 1 });
    const c = collectOpenAI((await readAll(await oa(ms.url, { model: 'm', stream: true, messages: [user('#scenario:inline-x')] }))).text);
    assert.equal(c.text, 'inline');
    assert.equal(c.deltas, 2);
    const list = await (await fetch(`${ms.url}/_scenarios`)).json();
    assert.ok(list.scenarios.some((s) => s.name === 'inline-x'));

    ms.addScenario('inline-y', { steps: [{ text: 'why' }] });
    const b = await (await an(ms.url, { model: 'c', messages: [user('#scenario:inline-y')] })).json();
    assert.equal(b.content[0].text, 'why');
    assert.throws(() => ms.addScenario('inline-z', { steps: [] }), /non-empty/);
    assert.throws(() => ms.addScenario('inline-z', { steps: [{ error: { status: 500 }, hang: true }] }), /cannot be combined/);
  });

  test('scenario files are validated at start-up, naming the file', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ms-'));
    try {
      fs.writeFileSync(path.join(dir, 'broken.json'), JSON.stringify({ steps: [{ text: 1 }] }));
      await assert.rejects(startModelServer({ scenariosDir: dir }), /broken\.json.*"text" must be a string/);
    } finally {
      fs.rmSync(dir, { recursive: true });
    }
  });
});

describe('templating', () => {
  test('echo: last_user, message_count, system_length, tools, model (OpenAI)', async () => {
    const sys = 'Système: ünïcödé 👋';
    const r = await oa(ms.url, { model: 'gpt-4.1', messages: [{ role: 'system', content: sys }, user('#scenario:echo hello there')],
      tools: [{ type: 'function', function: { name: 'alpha' } }, { type: 'function', function: { name: 'beta' } }] });
    const b = await r.json();
    assert.equal(b.choices[0].message.content,
      `last_user=#scenario:echo hello there | messages=2 | system_length=${[...sys].length} | tools=alpha,beta | model=gpt-4.1`);
  });

  test('echo through Anthropic, system as text blocks', async () => {
    const r = await an(ms.url, { model: 'claude-sonnet-4-5', stream: true, system: [{ type: 'text', text: 'abc' }, { type: 'text', text: 'de' }],
      tools: [{ name: 'remember', input_schema: { type: 'object' } }], messages: [user([{ type: 'text', text: '#scenario:echo yo' }])] });
    const c = collectAnthropic((await readAll(r)).text);
    assert.equal(c.text, 'last_user=#scenario:echo yo | messages=1 | system_length=6 | tools=remember | model=claude-sonnet-4-5');
  });

  test('templates in tool arguments and explicit argument chunks', async () => {
    ms.addScenario('tmpl-args', { steps: [{ tool_calls: [{ name: 'write_file', id: 'call_fixed', arguments: { path: '/workspace/a.txt', content: '{{last_user}} ({{step}})' }, chunks: ['{"path":"/workspace/a.txt",', '"content":"typed (0)"}'] }] }] });
    // Explicit chunks are sent verbatim (no templating, no re-splitting).
    const c = collectOpenAI((await readAll(await oa(ms.url, { model: 'm', stream: true, messages: [user('#scenario:tmpl-args')] }))).text);
    assert.equal(c.calls[0].id, 'call_fixed');
    assert.equal(c.calls[0].pieces, 2);
    assert.deepEqual(JSON.parse(c.calls[0].arguments), { path: '/workspace/a.txt', content: 'typed (0)' });
    ms.addScenario('tmpl-args2', { steps: [{ tool_calls: [{ name: 'write_file', arguments: { content: '{{last_user}}|{{message_count}}' } }] }] });
    const b = await (await an(ms.url, { model: 'c', messages: [user('#scenario:tmpl-args2 "quoted" \\ text')] })).json();
    assert.deepEqual(b.content[0].input, { content: '#scenario:tmpl-args2 "quoted" \\ text|1' });
  });

  test('tool_result is the latest result; tool_results the last batch', async () => {
    ms.addScenario('rounds', { steps: [{ tool_calls: [{ name: 'a' }] }, { tool_calls: [{ name: 'b' }, { name: 'c' }] },
      { text: 'last={{tool_result}} batch={{tool_results}} n={{tool_result_count}}' }] });
    const call = (id) => ({ id, type: 'function', function: { name: 'f', arguments: '{}' } });
    const msgs = [user('#scenario:rounds'),
      { role: 'assistant', content: null, tool_calls: [call('c1')] }, { role: 'tool', tool_call_id: 'c1', content: 'R1' },
      { role: 'assistant', content: null, tool_calls: [call('c2'), call('c3')] },
      { role: 'tool', tool_call_id: 'c2', content: 'R2' }, { role: 'tool', tool_call_id: 'c3', content: 'R3' }];
    const b = await (await oa(ms.url, { model: 'm', messages: msgs })).json();
    assert.equal(b.choices[0].message.content, 'last=R3 batch=R2\nR3 n=2');
    const use = (id) => ({ type: 'tool_use', id, name: 'f', input: {} });
    const res = (id, content) => ({ type: 'tool_result', tool_use_id: id, content });
    const am = [user('#scenario:rounds'), { role: 'assistant', content: [use('t1')] }, user([res('t1', 'R1')]),
      { role: 'assistant', content: [use('t2'), use('t3')] }, user([res('t2', 'R2'), res('t3', [{ type: 'text', text: 'R3' }])])];
    const ab = await (await an(ms.url, { model: 'c', messages: am })).json();
    assert.equal(ab.content[0].text, 'last=R3 batch=R2\nR3 n=2');
  });

  test('splitting never breaks a surrogate pair', async () => {
    ms.addScenario('emoji', { steps: [{ text: 'h\u00e9llo 👋🏽 w\u00f6rld 🎉🎉', split: 7 }, { text: '👋🏽🎉', split: 'chars' }] });
    const c = collectOpenAI((await readAll(await oa(ms.url, { model: 'm', stream: true, messages: [user('#scenario:emoji')] }))).text);
    assert.equal(c.text, 'h\u00e9llo 👋🏽 w\u00f6rld 🎉🎉');
    assert.equal(c.deltas, 7);
    for (const ch of c.chunks) for (const x of ch.choices) if (x.delta.content) assert.ok(x.delta.content.isWellFormed(), JSON.stringify(x.delta.content));
    const c2 = collectAnthropic((await readAll(await an(ms.url, { model: 'c', stream: true,
      messages: [user('#scenario:emoji'), { role: 'assistant', content: 'x' }, user('y')] }))).text);
    assert.equal(c2.deltas, 3, 'chars = code points');
  });
});

describe('failures', () => {
  test('HTTP 500 in both shapes', async () => {
    const r = await oa(ms.url, { model: 'm', stream: true, messages: [user('#scenario:http-500')] });
    assert.equal(r.status, 500);
    const b = await r.json();
    assert.equal(b.error.type, 'server_error');
    const ra = await an(ms.url, { model: 'c', stream: true, messages: [user('#scenario:http-500')] });
    assert.equal(ra.status, 500);
    assert.deepEqual(Object.keys(await ra.json()).sort(), ['error', 'request_id', 'type']);
  });

  test('HTTP 429 with retry-after header', async () => {
    const r = await oa(ms.url, { model: 'm', messages: [user('#scenario:http-429')] });
    assert.equal(r.status, 429);
    assert.equal(r.headers.get('retry-after'), '2');
    const b = await r.json();
    assert.equal(b.error.code, 'rate_limit_exceeded');
    assert.match(b.error.message, /try again in 2s/);
    const ra = await an(ms.url, { model: 'c', messages: [user('#scenario:http-429')] });
    assert.equal(ra.status, 429);
    assert.equal(ra.headers.get('retry-after'), '2');
    assert.equal((await ra.json()).error.type, 'rate_limit_error');
  });

  test('fail_times: the identical retry succeeds, a different request fails again', async () => {
    const body = { model: 'm', messages: [user(`#scenario:retry-429 ${Math.random()}`)] };
    const r1 = await oa(ms.url, body);
    assert.equal(r1.status, 429);
    assert.equal(r1.headers.get('retry-after'), '1');
    await r1.text();
    const r2 = await oa(ms.url, body);
    assert.equal(r2.status, 200);
    assert.equal((await r2.json()).choices[0].message.content, 'Answered on attempt two.');
    const r3 = await oa(ms.url, { ...body, messages: [user(`#scenario:retry-429 ${Math.random()}`)] });
    assert.equal(r3.status, 429);
    await r3.text();
  });

  test('custom error body and headers are sent verbatim', async () => {
    ms.addScenario('gw', { steps: [{ error: { status: 502, body: '<html>Bad Gateway</html>', headers: { 'x-edge': 'cf' } } }] });
    const r = await oa(ms.url, { model: 'm', messages: [user('#scenario:gw')] });
    assert.equal(r.status, 502);
    assert.equal(r.headers.get('x-edge'), 'cf');
    assert.equal(await r.text(), '<html>Bad Gateway</html>');
  });

  test('cut stream (OpenAI): K deltas, then the connection ends without [DONE]', async () => {
    const r = await oa(ms.url, { model: 'm', stream: true, messages: [user('#scenario:cut-stream')] });
    assert.equal(r.status, 200);
    const { text, error } = await readAll(r);
    assert.ok(error, 'the body read fails: the chunked response never terminated');
    const c = collectOpenAI(text);
    assert.equal(c.done, false);
    assert.equal(c.finish, null);
    assert.equal(c.text, 'one two three');
    const rec = ms.requests('cut-stream').at(-1);
    assert.equal(rec.outcome, 'cut');
  });

  test('cut stream (Anthropic, reset mode): no message_stop', async () => {
    ms.addScenario('cut-reset', { steps: [{ text: 'a b c d e', cut_after: 2, cut_mode: 'reset' }] });
    const r = await an(ms.url, { model: 'c', stream: true, messages: [user('#scenario:cut-reset')] });
    const { text, error } = await readAll(r);
    assert.ok(error);
    const c = collectAnthropic(text);
    assert.equal(c.stopped, false);
    assert.ok(!c.types.includes('message_delta'));
    assert.ok(c.deltas <= 2);
  });

  test('cut non-streaming response: half a body, then the connection ends', async () => {
    ms.addScenario('cut-json', { steps: [{ text: 'some answer here', cut_after: 0 }] });
    const r = await oa(ms.url, { model: 'm', messages: [user('#scenario:cut-json')] });
    assert.equal(r.status, 200);
    const { text, error } = await readAll(r);
    assert.ok(error);
    assert.equal(tryJson(text), undefined);
    assert.ok(text.startsWith('{"id":"chatcmpl-'));
  });

  test('malformed chunks: an invalid JSON data line and a garbage line, then a normal end', async () => {
    const r = await oa(ms.url, { model: 'm', stream: true, messages: [user('#scenario:malformed-chunks')] });
    const { text, error } = await readAll(r);
    assert.equal(error, null);
    const c = collectOpenAI(text);
    assert.equal(c.bad.length, 2);
    assert.ok(c.bad[0].startsWith('data: {') && tryJson(c.bad[0].slice(6)) === undefined, 'a data line with invalid JSON');
    assert.ok(!c.bad[1].startsWith('data:') && !c.bad[1].startsWith('event:'), 'a line that is no SSE field');
    assert.equal(c.text, 'alpha beta gamma delta');
    assert.ok(c.done);
    // Order: after delta 1 and after delta 2.
    const events = parseSSE(text);
    const i1 = events.findIndex((e) => e.raw === c.bad[0]);
    assert.equal(tryJson(events[i1 - 1].data).choices[0].delta.content, 'alpha');
    assert.equal(tryJson(events[i1 + 1].data).choices[0].delta.content, ' beta');

    const ra = await an(ms.url, { model: 'c', stream: true, messages: [user('#scenario:malformed-chunks')] });
    const ca = collectAnthropic((await readAll(ra)).text);
    assert.equal(ca.bad.length, 2);
    assert.ok(ca.bad[0].startsWith('event: content_block_delta\ndata: {'));
    assert.ok(ca.stopped);
  });

  test('malformed non-streaming: a 200 whose JSON body does not parse', async () => {
    ms.addScenario('bad-json', { steps: [{ text: 'x y z', malformed: { kind: 'invalid_json' } }] });
    const r = await an(ms.url, { model: 'c', messages: [user('#scenario:bad-json')] });
    assert.equal(r.status, 200);
    assert.equal(tryJson(await r.text()), undefined);
  });

  test('raw chunks are written verbatim in stream order', async () => {
    ms.addScenario('raw', { steps: [{ chunks: ['a', { raw: ': comment line\n\n' }, 'b'] }] });
    const { text } = await readAll(await oa(ms.url, { model: 'm', stream: true, messages: [user('#scenario:raw')] }));
    const ia = text.indexOf('"content":"a"');
    const ic = text.indexOf(': comment line\n\n');
    const ib = text.indexOf('"content":"b"');
    assert.ok(ia > 0 && ic > ia && ib > ic);
  });

  test('stream_error: an in-stream error event, no message_stop / [DONE]', async () => {
    const ca = collectAnthropic((await readAll(await an(ms.url, { model: 'c', stream: true, messages: [user('#scenario:stream-error')] }))).text);
    assert.deepEqual(ca.error, { type: 'overloaded_error', message: 'Overloaded' });
    assert.equal(ca.types.at(-1), 'error');
    assert.equal(ca.stopped, false);
    assert.equal(ca.deltas, 2);
    const co = collectOpenAI((await readAll(await oa(ms.url, { model: 'm', stream: true, messages: [user('#scenario:stream-error')] }))).text);
    assert.equal(co.error.message, 'Overloaded');
    assert.equal(co.done, false);
    assert.equal(co.text, 'Starting the');
  });

  test('hang: no response at all until the client gives up', async () => {
    const t0 = performance.now();
    await assert.rejects(oa(ms.url, { model: 'm', messages: [user('#scenario:hang')] }, { signal: AbortSignal.timeout(300) }), { name: 'TimeoutError' });
    assert.ok(performance.now() - t0 >= 290);
    const rec = ms.requests('hang').at(-1);
    assert.equal(rec.outcome, 'hang');
  });

  test('hang_after: the stream stalls after K deltas', async () => {
    ms.addScenario('stall', { steps: [{ text: 'a b c d', hang_after: 2 }] });
    const ac = new AbortController();
    const r = await oa(ms.url, { model: 'm', stream: true, messages: [user('#scenario:stall')] }, { signal: ac.signal });
    const reader = r.body.getReader();
    let text = '';
    const dec = new TextDecoder();
    for (;;) {
      const next = await Promise.race([reader.read(), sleep(400).then(() => 'stalled')]);
      if (next === 'stalled') break;
      assert.equal(next.done, false, 'the stream must not end');
      text += dec.decode(next.value);
    }
    ac.abort();
    assert.equal(collectOpenAI(text).text, 'a b');
  });
});

describe('timing', () => {
  test('delay_ms holds the first byte; chunk_delay_ms spaces the deltas', async () => {
    ms.addScenario('timed', { steps: [{ text: 'a b c d e f', delay_ms: 300, chunk_delay_ms: 60 }] });
    const t0 = performance.now();
    const r = await oa(ms.url, { model: 'm', stream: true, messages: [user('#scenario:timed')] });
    const tHeaders = performance.now() - t0;
    const { text, arrivals } = await readAll(r);
    assert.ok(tHeaders >= 290, `headers after ${tHeaders} ms`);
    const c = collectOpenAI(text);
    assert.equal(c.text, 'a b c d e f');
    // Time of arrival of each text delta (one read may carry several frames).
    const deltaTimes = arrivals.flatMap((a) => Array((a.s.match(/"delta":\{"content":"[^"]/g) ?? []).length).fill(a.t));
    assert.equal(deltaTimes.length, 6, 'each delta arrives on its own');
    // Delta i is due i*60 ms after delta 0 (timers never fire early; allow for clock granularity).
    for (let i = 1; i < deltaTimes.length; i++) {
      assert.ok(deltaTimes[i] - deltaTimes[0] >= i * 60 - 5, `delta ${i} after ${deltaTimes[i] - deltaTimes[0]} ms`);
    }
    assert.ok(deltaTimes.at(-1) - deltaTimes[0] < 5_000, 'and not absurdly late');
  });

  test('per-chunk delay_ms in explicit chunks', async () => {
    ms.addScenario('pause', { steps: [{ chunks: ['x', { text: 'y', delay_ms: 250 }] }] });
    const { arrivals } = await readAll(await an(ms.url, { model: 'c', stream: true, messages: [user('#scenario:pause')] }));
    const tx = arrivals.find((a) => a.s.includes('"text":"x"')).t;
    const ty = arrivals.find((a) => a.s.includes('"text":"y"')).t;
    assert.ok(ty - tx >= 240);
  });

  test('a client that goes away mid-stream frees the stream (no leaked timers)', async () => {
    const s = await startModelServer({ record: false });
    try {
      const ac = new AbortController();
      const r = await oa(s.url, { model: 'm', stream: true, messages: [user('#scenario:slow-stream')] }, { signal: ac.signal });
      assert.equal(r.status, 200);
      assert.equal(s.stats().active, 1);
      ac.abort();
      for (let i = 0; i < 50 && s.stats().active !== 0; i++) await sleep(20);
      assert.equal(s.stats().active, 0);
    } finally {
      await s.close();
    }
  });
});

describe('recording', () => {
  test('records what was sent, redacts keys, filters and clears', async () => {
    ms.clearRequests();
    const sys = 'You are Tusko.';
    await (await oa(ms.url, { model: 'gpt-4o', stream: true, messages: [{ role: 'system', content: sys }, user('#scenario:text')],
      tools: [{ type: 'function', function: { name: 'plan_task' } }] })).text();
    await (await an(ms.url, { model: 'claude-sonnet-4-5', system: 'abc', messages: [user('plain')] })).text();

    const all = await (await fetch(`${ms.url}/_requests`)).json();
    assert.equal(all.count, 2);
    const [o, a] = all.requests;
    assert.equal(o.protocol, 'openai');
    assert.equal(o.path, '/v1/chat/completions');
    assert.equal(o.model, 'gpt-4o');
    assert.equal(o.stream, true);
    assert.equal(o.message_count, 2);
    assert.equal(o.system, sys);
    assert.equal(o.system_length, sys.length);
    assert.deepEqual(o.tools, ['plan_task']);
    assert.equal(o.scenario, 'text');
    assert.equal(o.step, 0);
    assert.equal(o.status, 200);
    assert.equal(o.outcome, 'completed');
    assert.equal(o.body.messages[1].content, '#scenario:text');
    assert.ok(Date.parse(o.time) > 0 && typeof o.ts === 'number');
    assert.equal(o.headers.authorization, 'Bearer [redacted]');
    assert.equal(a.protocol, 'anthropic');
    assert.equal(a.scenario, 'default');
    assert.equal(a.system, 'abc');
    assert.equal(a.stream, false);
    assert.equal(a.headers['x-api-key'], '[redacted]');
    assert.equal(a.headers['anthropic-version'], '2023-06-01');
    assert.ok(!JSON.stringify(all).includes(KEY), 'no API key anywhere in the records');
    assert.ok(a.id > o.id);

    const only = await (await fetch(`${ms.url}/_requests?scenario=text`)).json();
    assert.deepEqual(only.requests.map((r) => r.protocol), ['openai']);
    assert.equal(ms.requests({ protocol: 'anthropic' }).length, 1);

    // Refused requests are recorded too.
    await (await oa(ms.url, { model: 'm', messages: [user('x')] }, { headers: {} })).text();
    const refused = ms.requests().at(-1);
    assert.equal(refused.status, 401);
    assert.equal(refused.outcome, 'refused');

    const del = await fetch(`${ms.url}/_requests`, { method: 'DELETE' });
    assert.equal((await del.json()).cleared, 3);
    assert.equal((await (await fetch(`${ms.url}/_requests`)).json()).count, 0);
    assert.equal(ms.requests().length, 0);
  });

  test('the record list is capped; recording can be switched off', async () => {
    const s = await startModelServer({ scenariosDir: false, maxRecords: 5 });
    try {
      for (let i = 0; i < 8; i++) await (await oa(s.url, { model: 'm', messages: [user(`n${i}`)] })).text();
      const recs = s.requests();
      assert.equal(recs.length, 5);
      assert.deepEqual(recs.map((r) => r.last_user), ['n3', 'n4', 'n5', 'n6', 'n7']);
      const off = await fetch(`${s.url}/_recording`, { method: 'POST', body: '{"enabled":false}' });
      assert.equal(off.status, 200);
      await (await oa(s.url, { model: 'm', messages: [user('unrecorded')] })).text();
      assert.equal(s.requests().at(-1).last_user, 'n7');
    } finally {
      await s.close();
    }
  });
});

describe('CLI', () => {
  function startCli(args) {
    const child = spawn(process.execPath, [SERVER, ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    const ready = new Promise((resolve, reject) => {
      let out = '';
      child.stdout.on('data', (d) => {
        out += d;
        const m = /^listening (http:\/\/127\.0\.0\.1:(\d+))\n/.exec(out);
        if (m) resolve({ url: m[1], line: out });
      });
      child.once('exit', (code) => reject(new Error(`exited ${code} before listening`)));
    });
    const exited = new Promise((resolve) => child.once('exit', (code, sig) => resolve({ code, sig })));
    return { child, ready, exited };
  }

  test('prints one listening line, serves fixtures, stops cleanly on SIGTERM', async () => {
    const { child, ready, exited } = startCli(['--port', '0', '--no-record']);
    try {
      const { url, line } = await ready;
      assert.equal(line.split('\n').length, 2, 'exactly one line');
      assert.equal((await fetch(`${url}/_health`)).status, 200);
      const c = collectOpenAI((await readAll(await oa(url, { model: 'm', stream: true, messages: [user('#scenario:text')] }))).text);
      assert.ok(c.done);
      assert.equal((await (await fetch(`${url}/_requests`)).json()).count, 0, '--no-record');
      child.kill('SIGTERM');
      assert.deepEqual(await exited, { code: 0, sig: null });
    } finally {
      child.kill('SIGKILL');
    }
  });

  test('--scenarios DIR and bad options', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ms-'));
    try {
      fs.writeFileSync(path.join(dir, 'only.json'), JSON.stringify({ steps: [{ text: 'from dir' }] }));
      const { child, ready, exited } = startCli(['--scenarios', dir]);
      try {
        const { url } = await ready;
        const b = await (await oa(url, { model: 'm', messages: [user('#scenario:only')] })).json();
        assert.equal(b.choices[0].message.content, 'from dir');
        assert.equal((await oa(url, { model: 'm', messages: [user('#scenario:text')] })).status, 400, 'fixtures not loaded');
        child.kill('SIGTERM');
        await exited;
      } finally {
        child.kill('SIGKILL');
      }
    } finally {
      fs.rmSync(dir, { recursive: true });
    }
    const bad = startCli(['--bogus']);
    await assert.rejects(bad.ready, /exited 2/);
  });
});

describe('load', () => {
  test('500 concurrent streams all complete, and were open at the same time', async () => {
    const N = 500;
    // each stream lasts ~5 s (10 deltas 600 ms apart): long enough that all 500 are open
    // at once even when starting them takes seconds on a loaded 2-core machine
    const s = await startModelServer({ scenarios: { conc: { steps: [{ text: 'w0 w1 w2 w3 w4 w5 w6 w7 w8 w9 {{last_user}}', chunk_delay_ms: 600 }] } } });
    try {
      const one = async (i) => {
        const proto = i % 2 ? 'anthropic' : 'openai';
        const body = { model: 'm', stream: true, messages: [user(`#scenario:conc ${i}`)] };
        const r = proto === 'openai' ? await oa(s.url, body) : await an(s.url, body);
        assert.equal(r.status, 200);
        const { text, error } = await readAll(r);
        assert.equal(error, null);
        const expected = `w0 w1 w2 w3 w4 w5 w6 w7 w8 w9 #scenario:conc ${i}`;
        if (proto === 'openai') {
          const c = collectOpenAI(text);
          assert.ok(c.done);
          assert.equal(c.text, expected);
        } else {
          const c = collectAnthropic(text);
          assert.ok(c.stopped);
          assert.equal(c.text, expected);
        }
      };
      await Promise.all(Array.from({ length: N }, (_, i) => one(i)));
      const st = s.stats();
      assert.equal(st.requests, N);
      assert.equal(st.active, 0);
      assert.ok(st.peak >= N, `peak concurrent streams ${st.peak}`);
      assert.equal(s.requests().length, N);
    } finally {
      await s.close();
    }
  }, 60_000);
});
