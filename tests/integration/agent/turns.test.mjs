// Turns end to end against the scripted model server and a real Postgres: the
// answer streamed as events, stored and replayable; plans and tools with their
// lanes; provider failures keeping what was streamed; the guardrails checked on
// what the model server recorded (allowlist, 200-message window, 8,000-char
// system prompt, rate limit, step budget, time limit); cancellation; isolation.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { after, before, describe, test } from 'node:test';

import { stopAll } from '../../lib/harness.mjs';
import {
  api,
  events,
  makeUser,
  messages,
  newSession,
  post,
  sse,
  startModels,
  startTusko,
  textOf,
  turn,
  until,
  untilTurnEnd,
} from './lib.mjs';

const SCENARIOS = {
  'plan-then-list': {
    steps: [
      {
        text: 'Planning first.',
        tool_calls: [
          { name: 'list_files', arguments: { path: '/workspace' } },
          { name: 'plan_task', arguments: { goal: 'Tidy the notes', milestones: ['read', 'sort', 'write up'] } },
        ],
      },
      { tool_calls: [{ name: 'plan_task', arguments: { update: [{ milestone: 1, status: 'done' }] } }] },
      { text: 'Planned. {{tool_result}}' },
    ],
  },
  'write-when-off': {
    steps: [{ tool_calls: [{ name: 'write_file', arguments: { path: 'a.txt', content: 'x' } }] }, { text: 'Tool said: {{tool_result}}' }],
  },
  'bad-args': {
    steps: [{ tool_calls: [{ name: 'plan_task', arguments: '{"goal": "x", ' }] }, { text: 'got: {{tool_result}}' }],
  },
  'tool-loop': { on_exhausted: 'repeat', steps: [{ tool_calls: [{ name: 'list_files', arguments: {} }] }] },
  'slow-long': {
    steps: [{ text: Array.from({ length: 40 }, (_, i) => `w${i}`).join(' '), chunk_delay_ms: 150 }],
  },
  slowish: { steps: [{ text: Array.from({ length: 8 }, (_, i) => `s${i}`).join(' '), chunk_delay_ms: 120 }] },
  'quick-echo': { steps: [{ text: 'sys={{system_length}} n={{message_count}} tools={{tools}}' }] },
};

describe('turns', () => {
  let ms, stack, base, alice, bob;

  before(async () => {
    ms = await startModels({ scenarios: SCENARIOS });
    stack = await startTusko(ms, { env: { TUSKO_LLM_IDLE_TIMEOUT: '2s', TUSKO_LLM_RETRIES: '2' } });
    base = stack.tusko.url;
    alice = makeUser(stack.pg);
    bob = makeUser(stack.pg);
  });
  after(async () => {
    await stopAll();
    await ms.close();
  });

  test('a talk turn streams, is stored, and replays with contiguous ids', async () => {
    const sid = await newSession(base, alice);
    const t = await turn(base, alice, sid, 'hello #scenario:text');
    assert.equal(t.end.state, 'done');
    assert.deepEqual(t.events.map((e) => e.event).filter((e, i, a) => e !== a[i - 1]), ['turn_start', 'text', 'turn_end']);
    assert.equal(textOf(t.events), 'Hello! This is a scripted reply to 2 messages.');
    const msgs = await messages(base, alice, sid);
    assert.deepEqual(msgs.map((m) => m.role), ['user', 'assistant']);
    assert.equal(msgs[1].content, 'Hello! This is a scripted reply to 2 messages.');
    assert.equal(msgs[1].turn_id, t.turnId);
    // replay: the same events, ids 1..n without gaps
    const all = await events(base, alice, sid);
    assert.deepEqual(all.map((e) => Number(e.id)), all.map((_, i) => i + 1));
    assert.deepEqual(all.map((e) => e.json), t.events.map((e) => e.json));
    // resume after an id: only what came later
    const later = await events(base, alice, sid, 1);
    assert.equal(later.length, all.length - 1);
    assert.equal(later[0].id, '2');
    // Last-Event-ID works the same
    const r = await sse(base, `/api/sessions/${sid}/events?follow=0`, { headers: { ...alice.auth, 'last-event-id': String(all.length - 1) } });
    assert.deepEqual(r.events.map((e) => e.event), ['turn_end']);
    // the model saw the fast-lane tools only: the sandbox lane is off (fail-closed)
    const rec = ms.requests('text').pop();
    for (const t of ['list_files', 'plan_task', 'preview', 'search_chunks', 'remember', 'recall_facts', 'delegate_subagent', 'web_fetch']) assert.ok(rec.tools.includes(t), t);
    for (const t of ['write_file', 'read_file', 'execute_command', 'execute_code']) assert.ok(!rec.tools.includes(t), t);
    assert.equal(rec.headers.authorization, 'Bearer [redacted]');
    // the trace: a turn span and the model call with tokens and time to first token
    const tr = await api(base, `/api/turns/${t.turnId}/trace`, { headers: alice.auth });
    assert.equal(tr.status, 200);
    assert.equal(tr.json.turn.state, 'done');
    const llm = tr.json.spans.filter((s) => s.kind === 'llm');
    assert.equal(llm.length, 1);
    assert.equal(llm[0].attrs.model, 'gpt-4o-mini');
    assert.ok(llm[0].attrs.ttft_ms >= 0 && llm[0].attrs.output_tokens > 0 && llm[0].attrs.input_tokens > 0);
    assert.ok(llm[0].duration_ms > 0);
    assert.equal((await api(base, `/api/turns/${t.turnId}/trace`, { headers: bob.auth })).status, 404);
  });

  test('a live listener sees the turn as it happens', async () => {
    const sid = await newSession(base, alice);
    const live = sse(base, `/api/sessions/${sid}/events`, { headers: alice.auth, timeoutMs: 20000, until: (e) => e.event === 'turn_end' });
    await new Promise((r) => setTimeout(r, 200));
    const r = await post(base, alice, sid, 'go #scenario:text');
    assert.equal(r.status, 202);
    assert.equal(r.json.state, 'queued');
    const got = await live;
    assert.equal(got.events.at(-1).event, 'turn_end');
    assert.equal(textOf(got.events), 'Hello! This is a scripted reply to 2 messages.');
  });

  test('plan_task runs first, milestones update, list_files says nothing is there', async () => {
    const sid = await newSession(base, alice);
    const t = await turn(base, alice, sid, 'tidy #scenario:plan-then-list');
    assert.equal(t.end.state, 'done');
    const names = t.events.map((e) => e.event);
    const plan = t.events.find((e) => e.event === 'plan');
    assert.ok(plan, names.join(','));
    assert.equal(plan.json.goal, 'Tidy the notes');
    assert.deepEqual(plan.json.milestones.map((m) => m.status), ['in_progress', 'pending', 'pending']);
    // the plan came before anything else ran
    const firstStart = t.events.find((e) => e.event === 'tool_start');
    assert.equal(firstStart.json.name, 'plan_task');
    assert.ok(names.indexOf('plan') < names.findIndex((n, i) => n === 'tool_start' && t.events[i].json.name === 'list_files'));
    const upd = t.events.find((e) => e.event === 'plan_update');
    assert.deepEqual(upd.json.milestones.map((m) => m.status), ['done', 'in_progress', 'pending']);
    const listEnd = t.events.find((e) => e.event === 'tool_end' && e.json.name === 'list_files');
    assert.equal(listEnd.json.lane, 'fast');
    assert.ok(listEnd.json.ok);
    assert.match(listEnd.json.result, /nothing here yet/);
    // tool calls are stored paired with their results
    const msgs = await messages(base, alice, sid);
    assert.deepEqual(msgs.map((m) => m.role), ['user', 'assistant', 'tool', 'tool', 'assistant', 'tool', 'assistant']);
    assert.equal(msgs[1].tool_calls.length, 2);
    assert.ok(msgs.slice(2, 4).every((m) => msgs[1].tool_calls.some((c) => c.id === m.tool_call_id)));
    const tr = await api(base, `/api/turns/${t.turnId}/trace`, { headers: alice.auth });
    const tools = tr.json.spans.filter((s) => s.kind === 'tool');
    assert.deepEqual(tools.map((s) => [s.name, s.attrs.lane]), [['plan_task', 'fast'], ['list_files', 'fast'], ['plan_task', 'fast']]);
    assert.ok(tools.every((s) => s.attrs.result_size > 0 && s.duration_ms >= 0));
    // the model's second request carried both results, paired (strict mode)
    const recs = ms.requests('plan-then-list');
    assert.equal(recs.length, 3);
    assert.ok(recs.every((r) => r.status === 200));
  });

  test('without the sandbox service a sandbox tool executes nothing and says why', async () => {
    const sid = await newSession(base, alice);
    const t = await turn(base, alice, sid, 'write #scenario:write-when-off');
    const end = t.events.find((e) => e.event === 'tool_end');
    assert.equal(end.json.lane, 'sandbox');
    assert.equal(end.json.ok, false);
    assert.match(end.json.result, /code execution is off.*OPENSANDBOX_URL/);
    assert.ok(!t.events.some((e) => e.event === 'sandbox_spawn'));
  });

  test('tool arguments that are not JSON come back as a tool error', async () => {
    const sid = await newSession(base, alice);
    const t = await turn(base, alice, sid, 'x #scenario:bad-args');
    assert.equal(t.end.state, 'done');
    assert.match(textOf(t.events), /not valid JSON/);
  });

  for (const [scenario, code, kept] of [
    ['http-500', 'MODEL_PROVIDER_ERROR', ''],
    ['cut-stream', 'MODEL_CUT_STREAM', 'one two three'],
    ['malformed-chunks', 'MODEL_MALFORMED_CHUNK', 'alpha'],
    ['stream-error', 'MODEL_PROVIDER_ERROR', 'Starting the'],
    ['hang', 'MODEL_TIMEOUT', ''],
  ]) {
    test(`${scenario}: the turn ends with a clear error and keeps what was streamed`, async () => {
      const sid = await newSession(base, alice);
      const t = await turn(base, alice, sid, `x #scenario:${scenario}`);
      assert.equal(t.end.state, 'failed');
      assert.equal(t.end.error_code, code);
      const err = t.events.find((e) => e.event === 'error');
      assert.equal(err.json.code, code);
      assert.ok(err.json.message.length > 10, err.json.message);
      assert.equal(textOf(t.events), kept);
      const msgs = await messages(base, alice, sid);
      if (kept) {
        assert.equal(msgs.length, 2);
        assert.equal(msgs[1].content, kept);
        assert.equal(msgs[1].partial, true);
      } else {
        assert.equal(msgs.length, 1);
      }
      const tr = await api(base, `/api/turns/${t.turnId}/trace`, { headers: alice.auth });
      assert.equal(tr.json.turn.state, 'failed');
      assert.equal(tr.json.turn.error_code, code);
    });
  }

  test('a 429 is retried after Retry-After and then answered', async () => {
    const sid = await newSession(base, alice);
    const t = await turn(base, alice, sid, 'x #scenario:retry-429');
    assert.equal(t.end.state, 'done');
    assert.equal(textOf(t.events), 'Answered on attempt two.');
    const recs = ms.requests('retry-429');
    assert.deepEqual(recs.map((r) => r.status), [429, 200]);
    const tr = await api(base, `/api/turns/${t.turnId}/trace`, { headers: alice.auth });
    assert.equal(tr.json.spans.find((s) => s.kind === 'llm').attrs.attempts, 2);
  });

  test('anthropic: tool_use with input_json_delta, results paired', async () => {
    const sid = await newSession(base, alice);
    const t = await turn(base, alice, sid, 'look it up #scenario:tool-then-text', { model: 'anthropic:claude-sonnet-4' });
    assert.equal(t.end.state, 'done');
    const start = t.events.find((e) => e.event === 'tool_start');
    assert.deepEqual(start.json.arguments, { query: 'quarterly revenue', limit: 5 });
    assert.match(textOf(t.events), /Let me look that up\.The search returned: Nothing found for "quarterly revenue"/);
    const recs = ms.requests('tool-then-text').filter((r) => r.protocol === 'anthropic');
    assert.equal(recs.length, 2);
    assert.equal(recs[1].status, 200);
    assert.equal(recs[1].model, 'claude-sonnet-4');
    assert.equal(recs[1].headers['x-api-key'], '[redacted]');
    const last = recs[1].body.messages.at(-1);
    assert.equal(last.role, 'user');
    assert.equal(last.content[0].type, 'tool_result');
  });

  test('a model outside the allowlist is refused with 400 and reaches no provider', async () => {
    const sid = await newSession(base, alice);
    const before = ms.requests().length;
    const r = await post(base, alice, sid, 'hi #scenario:text', { model: 'openai:gpt-5-secret' });
    assert.equal(r.status, 400);
    assert.equal(r.json.code, 'MODEL_NOT_ALLOWED');
    const r2 = await post(base, alice, sid, 'hi #scenario:text', { model: 'mystery:model' });
    assert.equal(r2.status, 400);
    assert.equal(ms.requests().length, before);
    assert.deepEqual((await messages(base, alice, sid)).length, 0);
  });

  test('a second message while a turn runs is refused with 409; cancel stops the stream', async () => {
    const sid = await newSession(base, alice);
    const r = await post(base, alice, sid, 'long #scenario:slow-long');
    assert.equal(r.status, 202);
    // wait for some text, then try a second message and cancel
    await sse(base, `/api/sessions/${sid}/events`, { headers: alice.auth, timeoutMs: 10000, until: (e) => e.event === 'text' });
    const busy = await post(base, alice, sid, 'again #scenario:text');
    assert.equal(busy.status, 409);
    assert.equal(busy.json.code, 'TURN_IN_PROGRESS');
    assert.equal(busy.json.turn_id, r.json.turn_id);
    const c = await api(base, `/api/sessions/${sid}/cancel`, { method: 'POST', headers: alice.auth });
    assert.equal(c.status, 202);
    const evs = await untilTurnEnd(base, alice, sid, r.json.turn_id);
    const end = evs.at(-1).json;
    assert.equal(end.state, 'cancelled');
    const streamed = textOf(evs);
    assert.ok(streamed.length > 0 && streamed.length < 200, streamed);
    const msgs = await messages(base, alice, sid);
    assert.equal(msgs.at(-1).role, 'assistant');
    assert.equal(msgs.at(-1).content, streamed);
    assert.equal(msgs.at(-1).partial, true);
    // the provider's stream was closed by us
    await until(() => ms.requests('slow-long').at(-1).outcome === 'client_closed', { what: 'the model stream closed' });
    // nothing runs now: a cancel says so, and a new message is accepted
    const c2 = await api(base, `/api/sessions/${sid}/cancel`, { method: 'POST', headers: alice.auth });
    assert.equal(c2.json.cancelled, false);
    const t2 = await turn(base, alice, sid, 'again #scenario:text');
    assert.equal(t2.end.state, 'done');
  });

  test('turn_end goes out only once the end is stored: a message sent on seeing it is accepted', async () => {
    const sid = await newSession(base, alice);
    const r = await post(base, alice, sid, 'one #scenario:slowish');
    assert.equal(r.status, 202);
    const turnId = r.json.turn_id;
    let locker;
    let lockedAt = 0;
    let sent;
    let endAt = 0;
    await sse(base, `/api/sessions/${sid}/events`, {
      headers: alice.auth,
      timeoutMs: 30000,
      until: (e) => {
        if (e.event === 'text' && !locker) {
          // while the turn streams, hold its row for 2 s (NO KEY: the messages' and spans'
          // foreign keys still pass): storing the end waits for it
          locker = spawn('/usr/lib/postgresql/15/bin/psql', ['-X', '-q', stack.pg.url, '-c', `BEGIN; SELECT 1 FROM turns WHERE id = '${turnId}' FOR NO KEY UPDATE; SELECT pg_sleep(2); COMMIT;`]);
          lockedAt = Date.now();
        }
        if (e.event === 'turn_end' && e.json.turn_id === turnId) {
          endAt = Date.now();
          sent = post(base, alice, sid, 'two #scenario:text'); // at once, from the event's callback
          return true;
        }
        return false;
      },
    });
    assert.ok(locker, 'the turn streamed text');
    const code = await new Promise((res) => (locker.exitCode !== null ? res(locker.exitCode) : locker.on('exit', res)));
    assert.equal(code, 0, 'the lock was taken and released');
    assert.ok(endAt - lockedAt >= 1500, `turn_end came ${endAt - lockedAt} ms after the row was locked for 2 s: before the end was stored`);
    const next = await sent;
    assert.equal(next.status, 202, next.text);
    const tr = await api(base, `/api/turns/${turnId}/trace`, { headers: alice.auth });
    assert.equal(tr.json.turn.state, 'done');
    assert.ok(tr.json.spans.some((x) => x.kind === 'llm'), 'the spans are stored');
    await untilTurnEnd(base, alice, sid, next.json.turn_id);
  });

  test("another user's chat answers 404 on every turn route", async () => {
    const sid = await newSession(base, alice);
    for (const [method, p, json] of [
      ['POST', `/api/sessions/${sid}/messages`, { content: 'hi' }],
      ['POST', `/api/sessions/${sid}/cancel`, undefined],
      ['GET', `/api/sessions/${sid}/events?follow=0`, undefined],
      ['GET', `/api/sessions/${sid}/files`, undefined],
      ['GET', `/api/sessions/${sid}/files/preview?path=a.txt`, undefined],
      ['POST', `/api/sessions/${sid}/files/download`, { path: 'a.txt' }],
    ]) {
      const r = await api(base, p, { method, json, headers: bob.auth });
      assert.equal(r.status, 404, `${method} ${p}: ${r.status} ${r.text}`);
    }
    const r = await api(base, `/api/sessions/${sid}/events?follow=0`, {});
    assert.equal(r.status, 401);
  });

  test('GET /api/sandboxes is empty and says execution is off', async () => {
    const r = await api(base, '/api/sandboxes', { headers: alice.auth });
    assert.equal(r.status, 200);
    assert.deepEqual(r.json.sandboxes, []);
    assert.equal(r.json.execution, false);
    const f = await api(base, `/api/sessions/${await newSession(base, alice)}/files`, { headers: alice.auth });
    assert.equal(f.status, 200);
    assert.deepEqual(f.json.entries, []);
  });
});

describe('guardrails on what the model was sent', () => {
  let ms;
  before(async () => {
    ms = await startModels({ scenarios: SCENARIOS });
  });
  after(async () => {
    await stopAll();
    await ms.close();
  });

  test('the request carries the last 200 messages, starting paired, and a capped system prompt', async () => {
    const prompt = 'é'.repeat(7990) + 'ABCDEFGHIJ'; // exactly 8,000 characters
    const { tusko, pg } = await startTusko(ms, { env: { TUSKO_SYSTEM_PROMPT: prompt } });
    const u = makeUser(pg);
    const sid = await newSession(tusko.url, u);
    // 300 stored messages; a tool exchange straddles the window's start
    const rows = [];
    for (let i = 0; i < 300; i++) {
      if (i === 99) rows.push(`(gen_random_uuid(), '${sid}', 'assistant', '', '[{"id":"c99","name":"list_files","arguments":"{}"}]', NULL)`);
      else if (i === 100) rows.push(`(gen_random_uuid(), '${sid}', 'tool', 'r99', NULL, 'c99')`);
      else rows.push(`(gen_random_uuid(), '${sid}', '${i % 2 === 0 ? 'user' : 'assistant'}', 'm${i}', NULL, NULL)`);
    }
    pg.query(`INSERT INTO messages (id, session_id, role, content, tool_calls, tool_call_id) VALUES ${rows.join(',')}`);
    const t = await turn(tusko.url, u, sid, 'count #scenario:quick-echo');
    assert.equal(t.end.state, 'done');
    const rec = ms.requests('quick-echo').at(-1);
    assert.equal(rec.status, 200, JSON.stringify(rec.error));
    assert.equal(rec.system_length, 8000);
    assert.equal(rec.system, prompt);
    const convo = rec.body.messages.filter((m) => m.role !== 'system');
    assert.ok(convo.length <= 200, `${convo.length} messages`);
    assert.ok(convo.length >= 195, `${convo.length} messages`);
    assert.equal(convo[0].role, 'user');
    assert.equal(convo.at(-1).content, 'count #scenario:quick-echo');
    // no orphan tool result, no unanswered call (strict mode would have refused)
    assert.ok(!convo.some((m) => m.role === 'tool' && m.tool_call_id === 'c99'));
  });

  test('a system prompt over 8,000 characters is refused at start-up', async () => {
    const pg = await (await import('../../lib/harness.mjs')).startPostgres('agentsp');
    const { runProgram } = await import('../../lib/harness.mjs');
    const r = runProgram('tusko', ['serve'], {
      env: { DATABASE_URL: pg.url, TUSKO_LISTEN: '127.0.0.1:0', TUSKO_MODELS: 'openai:gpt-4o-mini', TUSKO_SYSTEM_PROMPT: 'x'.repeat(8001) },
      timeoutMs: 20000,
    });
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, /TUSKO_SYSTEM_PROMPT.*8000/);
  });

  test('the chat rate limit answers 429 with Retry-After', async () => {
    const { tusko, pg } = await startTusko(ms, { env: { CHAT_RATE_LIMIT_MAX: '3' } });
    const u = makeUser(pg);
    const sid = await newSession(tusko.url, u);
    for (let i = 0; i < 3; i++) {
      const t = await turn(tusko.url, u, sid, `n${i} #scenario:text`);
      assert.equal(t.end.state, 'done');
    }
    const before = ms.requests('text').length;
    const r = await post(tusko.url, u, sid, 'one more #scenario:text');
    assert.equal(r.status, 429);
    assert.equal(r.json.code, 'RATE_LIMITED');
    assert.ok(Number(r.headers.get('retry-after')) >= 1);
    assert.equal(ms.requests('text').length, before);
  });

  test('the step budget ends a tool loop; the time limit ends a slow turn', async () => {
    const { tusko, pg } = await startTusko(ms, { env: { TUSKO_STEP_BUDGET: '3', TUSKO_TURN_TIMEOUT: '2s' } });
    const u = makeUser(pg);
    let sid = await newSession(tusko.url, u);
    const t = await turn(tusko.url, u, sid, 'loop #scenario:tool-loop');
    assert.equal(t.end.state, 'failed');
    assert.equal(t.end.error_code, 'STEP_BUDGET');
    assert.equal(t.end.steps, 3);
    assert.equal(ms.requests('tool-loop').length, 3);
    sid = await newSession(tusko.url, u);
    const s = await turn(tusko.url, u, sid, 'slow #scenario:slow-long');
    assert.equal(s.end.state, 'failed');
    assert.equal(s.end.error_code, 'TURN_TIMEOUT');
    assert.ok(textOf(s.events).length > 0);
  });
});
