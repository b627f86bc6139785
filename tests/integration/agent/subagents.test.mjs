// delegate_subagent against the scripted model server, a real Postgres and a
// real tusko-sandboxd (native runtime), sandboxes counted through sandboxd's
// own GET /v1/sandboxes: a turn that searches, remembers and delegates to a
// Researcher creates zero sandboxes; a Coder works in the parent chat's
// sandbox (it sees the parent's file) and no second one is made; the depth
// limit (default SUBAGENT_MAX_DEPTH=1) is refused clearly; two delegations of
// one answer run at the same time; cancelling the turn stops a running
// subagent. Nested events carry parent_call_id and subagent_id; the trace
// nests the subagent's spans under its tool call.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { stopAll } from '../../lib/harness.mjs';
import { KEY, startSandboxd } from '../sandboxd/sbx.mjs';
import { api, makeUser, messages, newSession, post, startModels, startTusko, textOf, turn, until, untilTurnEnd } from './lib.mjs';

const delegate = (role, task, context) => ({ name: 'delegate_subagent', arguments: context ? { role, task, context } : { role, task } });

const SCENARIOS = {
  // the parent: search, remember, then a researcher
  'talk-research': {
    steps: [
      {
        tool_calls: [
          { name: 'search_chunks', arguments: { query: 'saffron harvest' } },
          { name: 'remember', arguments: { note: 'The user is planning a saffron harvest in October.' } },
        ],
      },
      { tool_calls: [delegate('researcher', 'Find what we know about the saffron harvest #scenario:researcher-a', 'the user asked in chat')] },
      { text: 'The researcher said: {{tool_result}}' },
    ],
  },
  'researcher-a': {
    steps: [
      { text: 'Searching.', tool_calls: [{ name: 'search_chunks', arguments: { query: 'saffron harvest October' } }, { name: 'recall_facts', arguments: { entity: 'Saffron' } }] },
      { text: 'Found: {{tool_results}}' },
    ],
  },
  // the parent writes a file, then a coder reads it and writes another
  'write-then-code': {
    steps: [
      { tool_calls: [{ name: 'write_file', arguments: { path: 'parent.txt', content: 'written by the parent agent\n' } }] },
      { tool_calls: [delegate('coder', 'Read parent.txt and copy it #scenario:coder-a')] },
      { tool_calls: [{ name: 'read_file', arguments: { path: 'coder.txt' } }] },
      { text: 'parent read: {{tool_result}}' },
    ],
  },
  'coder-a': {
    steps: [
      { tool_calls: [{ name: 'execute_command', arguments: { command: 'cat /workspace/parent.txt && ls /workspace' } }] },
      { tool_calls: [{ name: 'write_file', arguments: { path: 'coder.txt', content: 'the coder was here\n' } }] },
      { text: 'coder saw: {{tool_result}}' },
    ],
  },
  // the depth limit: a researcher (depth 1) tries to delegate
  'deep-top': { steps: [{ tool_calls: [delegate('researcher', 'go #scenario:deep-child')] }, { text: 'top: {{tool_result}}' }] },
  'deep-child': {
    steps: [{ tool_calls: [delegate('researcher', 'deeper #scenario:text')] }, { text: 'child got: {{tool_result}}' }],
  },
  // two at once, each taking a while to answer
  'two-at-once': {
    steps: [
      { tool_calls: [delegate('researcher', 'part A #scenario:slow-a'), delegate('reviewer', 'part B #scenario:slow-b')] },
      { text: 'both: {{tool_results}}' },
    ],
  },
  'slow-a': { steps: [{ text: 'answer A', delay_ms: 1500 }] },
  'slow-b': { steps: [{ text: 'findings B: none', delay_ms: 1500 }] },
  // cancel: a subagent whose model never answers
  'hang-top': { steps: [{ tool_calls: [delegate('researcher', 'wait #scenario:hang-child')] }, { text: 'not reached' }] },
  'hang-child': { steps: [{ hang: true }] },
};

describe('subagents', () => {
  let ms, sbx, stack, base;

  const remote = async () => {
    const r = await sbx.api.list('?pageSize=200');
    assert.equal(r.status, 200, r.text);
    return r.json.items.filter((s) => !['Terminated', 'Failed', 'Stopping'].includes(s.status.state));
  };
  const remoteOf = async (user) => (await remote()).filter((s) => s.metadata && s.metadata.user === user.id);
  const trace = async (user, turnId) => {
    const r = await api(base, `/api/turns/${turnId}/trace`, { headers: user.auth });
    assert.equal(r.status, 200, r.text);
    return r.json.spans;
  };

  before(async () => {
    ms = await startModels({ scenarios: SCENARIOS });
    sbx = await startSandboxd({ env: { SANDBOX_WARM_POOL_SIZE: '1' } });
    stack = await startTusko(ms, { env: { OPENSANDBOX_URL: sbx.url, OPENSANDBOX_API_KEY: KEY, TUSKO_TOOL_WORKERS: '8' } });
    base = stack.tusko.url;
  });
  after(async () => {
    for (const s of await remote()) await sbx.api.del(s.id);
    await stopAll();
    await ms.close();
  });

  test('search_chunks, remember and a Researcher subagent in one turn create zero sandboxes', async () => {
    const u = makeUser(stack.pg);
    const sid = await newSession(base, u);
    const t = await turn(base, u, sid, 'tell me about the harvest #scenario:talk-research');
    assert.equal(t.end.state, 'done', JSON.stringify(t.end));
    assert.ok(!t.events.some((e) => e.event === 'sandbox_spawn'));
    assert.equal((await remoteOf(u)).length, 0, 'sandboxd lists no sandbox of the user');
    // the nested events: framed by subagent_start/_end, each tagged with the parent call
    const top = t.events.find((e) => e.event === 'tool_start' && e.json.name === 'delegate_subagent').json;
    const start = t.events.find((e) => e.event === 'subagent_start').json;
    assert.equal(start.parent_call_id, top.call_id);
    assert.equal(start.agent, 'researcher');
    assert.equal(start.depth, 1);
    assert.equal(start.model, 'openai:gpt-4o-mini');
    assert.equal(start.max_steps, 8);
    assert.match(start.task, /saffron harvest/);
    assert.equal(start.context, 'the user asked in chat');
    for (const name of ['search_chunks', 'recall_facts', 'remember', 'list_files', 'preview', 'web_fetch']) assert.ok(start.tools.includes(name), name);
    for (const name of ['plan_task', 'delegate_subagent', 'write_file', 'execute_command', 'read_file', 'schedule_task', 'list_schedules', 'cancel_schedule']) assert.ok(!start.tools.includes(name), name);
    const nested = t.events.filter((e) => e.json.subagent_id === start.subagent_id);
    assert.deepEqual(
      nested.filter((e) => e.event !== 'text').map((e) => e.event),
      ['subagent_start', 'tool_start', 'tool_end', 'tool_start', 'tool_end', 'subagent_end'],
    );
    for (const e of nested) {
      assert.equal(e.json.parent_call_id, top.call_id);
      assert.equal(e.json.agent, 'researcher');
      assert.equal(e.json.depth, 1);
    }
    const childText = nested.filter((e) => e.event === 'text').map((e) => e.json.delta).join('');
    assert.match(childText, /^Searching\.Found: /);
    assert.doesNotMatch(textOf(t.events.filter((e) => !e.json.subagent_id)), /Searching\./, "the subagent's text is not the answer's");
    const nestedTools = nested.filter((e) => e.event === 'tool_end').map((e) => e.json);
    assert.deepEqual(nestedTools.map((e) => [e.name, e.lane, e.ok]), [['search_chunks', 'fast', true], ['recall_facts', 'fast', true]]);
    // the search found the memory the parent saved a step earlier
    assert.match(nestedTools[0].result, /saffron harvest in October/);
    const end = t.events.find((e) => e.event === 'subagent_end').json;
    assert.equal(end.state, 'done');
    assert.equal(end.steps, 2);
    assert.equal(end.tool_calls, 2);
    assert.ok(end.input_tokens > 0 && end.output_tokens > 0);
    // the parent got the concise final text
    const dEnd = t.events.find((e) => e.event === 'tool_end' && e.json.call_id === top.call_id && !e.json.subagent_id).json;
    assert.equal(dEnd.ok, true);
    assert.match(dEnd.result, /^Researcher subagent \(2 model calls, 2 tool calls\):\nFound: /);
    assert.equal(dEnd.data.subagent_id, start.subagent_id);
    assert.match(textOf(t.events.filter((e) => !e.json.subagent_id)), /The researcher said: Researcher subagent/);
    // what the researcher's model was sent: its own prompt, the task, its tools
    const [req] = ms.requests('researcher-a');
    assert.match(req.system, /^You are the Researcher, a subagent of Tusko/);
    assert.doesNotMatch(req.system, /Long-term memory/);
    assert.equal(req.message_count, 2, 'system + the task');
    assert.match(req.last_user, /^Task: Find what we know about the saffron harvest #scenario:researcher-a\n\nContext from the agent that delegated this:\nthe user asked in chat$/);
    assert.deepEqual([...req.tools].sort(), [...start.tools].sort());
    // the turn's usage includes the subagent's
    assert.ok(t.end.input_tokens >= end.input_tokens + 3);
    // the span tree: turn > delegate_subagent tool > subagent > llm, tools
    const spans = await trace(u, t.turnId);
    const tool = spans.find((s) => s.kind === 'tool' && s.name === 'delegate_subagent');
    const sub = spans.find((s) => s.kind === 'subagent');
    assert.equal(sub.parent_id, tool.id);
    assert.equal(sub.name, 'researcher');
    assert.equal(sub.attrs.subagent_id, start.subagent_id);
    assert.equal(sub.attrs.state, 'done');
    assert.equal(sub.status, 'ok');
    const kids = spans.filter((s) => s.parent_id === sub.id);
    assert.deepEqual(kids.map((s) => `${s.kind}:${s.name}`).sort(), ['llm:openai:gpt-4o-mini', 'llm:openai:gpt-4o-mini', 'tool:recall_facts', 'tool:search_chunks']);
    assert.ok(sub.duration_ms <= tool.duration_ms);
    assert.ok(!spans.some((s) => s.kind === 'sandbox_spawn'));
    // the chat stores the parent's conversation only, paired
    const msgs = await messages(base, u, sid);
    assert.deepEqual(msgs.filter((m) => m.role === 'tool').map((m) => m.tool_name), ['search_chunks', 'remember', 'delegate_subagent']);
  });

  test("a Coder subagent works in the parent chat's sandbox and no second one is created", async () => {
    const u = makeUser(stack.pg);
    const sid = await newSession(base, u);
    const t = await turn(base, u, sid, 'write and delegate #scenario:write-then-code', {}, { timeoutMs: 60000 });
    assert.equal(t.end.state, 'done', JSON.stringify(t.end));
    const spawns = t.events.filter((e) => e.event === 'sandbox_spawn');
    assert.equal(spawns.length, 1, 'one spawn: the parent\'s first write');
    assert.ok(!spawns[0].json.subagent_id, 'made by the parent, not the coder');
    const live = await remoteOf(u);
    assert.equal(live.length, 1, 'sandboxd lists exactly one sandbox of the user');
    assert.equal(live[0].id, spawns[0].json.remote_id);
    assert.equal(live[0].metadata.session, sid);
    const start = t.events.find((e) => e.event === 'subagent_start').json;
    assert.equal(start.agent, 'coder');
    for (const name of ['write_file', 'read_file', 'execute_command', 'execute_code', 'list_files', 'preview', 'search_chunks']) assert.ok(start.tools.includes(name), name);
    const nested = t.events.filter((e) => e.json.subagent_id === start.subagent_id);
    const out = nested.filter((e) => e.event === 'tool_output').map((e) => e.json.text).join('\n');
    assert.match(out, /written by the parent agent/);
    assert.match(out, /parent\.txt/);
    const nestedEnds = nested.filter((e) => e.event === 'tool_end').map((e) => e.json);
    assert.deepEqual(nestedEnds.map((e) => [e.name, e.lane, e.ok]), [['execute_command', 'sandbox', true], ['write_file', 'sandbox', true]]);
    // the parent reads what the coder wrote
    assert.match(textOf(t.events.filter((e) => !e.json.subagent_id)), /parent read: the coder was here/);
    const spans = await trace(u, t.turnId);
    assert.equal(spans.filter((s) => s.kind === 'sandbox_spawn').length, 1);
    const sub = spans.find((s) => s.kind === 'subagent');
    assert.equal(sub.attrs.lane, 'sandbox');
    assert.ok(spans.some((s) => s.kind === 'tool' && s.name === 'execute_command' && s.parent_id === sub.id && s.attrs.lane === 'sandbox'));
  });

  test('the depth limit: a subagent is not offered delegate_subagent, and called anyway it is refused', async () => {
    const u = makeUser(stack.pg);
    const sid = await newSession(base, u);
    const t = await turn(base, u, sid, 'go #scenario:deep-top');
    assert.equal(t.end.state, 'done', JSON.stringify(t.end));
    assert.ok(ms.requests('deep-top')[0].tools.includes('delegate_subagent'), 'the chat agent may delegate');
    assert.ok(!ms.requests('deep-child')[0].tools.includes('delegate_subagent'), 'a subagent is not offered it');
    assert.equal(t.events.filter((e) => e.event === 'subagent_start').length, 1, 'no second subagent started');
    const refused = t.events.find((e) => e.event === 'tool_end' && e.json.subagent_id).json;
    assert.equal(refused.name, 'delegate_subagent');
    assert.equal(refused.ok, false);
    assert.equal(refused.result, 'refused: a subagent cannot delegate further — this researcher subagent runs at depth 1 and SUBAGENT_MAX_DEPTH is 1; do the work yourself with your own tools');
    assert.match(textOf(t.events.filter((e) => !e.json.subagent_id)), /top: Researcher subagent .*child got: refused: a subagent cannot delegate further/s);
    assert.equal(ms.requests('text').length, 0, 'the refused delegation reached no model');
  });

  test('two delegate_subagent calls of one answer run at the same time', async () => {
    const u = makeUser(stack.pg);
    const sid = await newSession(base, u);
    await fetch(`${ms.url}/_stats`, { method: 'DELETE' });
    const t = await turn(base, u, sid, 'split it #scenario:two-at-once');
    assert.equal(t.end.state, 'done', JSON.stringify(t.end));
    // both subagents' model calls were in flight together
    assert.ok(ms.stats().peak >= 2, `peak ${ms.stats().peak}`);
    const kinds = t.events.filter((e) => ['subagent_start', 'subagent_end'].includes(e.event)).map((e) => `${e.event}:${e.json.agent}`);
    assert.deepEqual(kinds.slice(0, 2).sort(), ['subagent_start:researcher', 'subagent_start:reviewer']);
    assert.deepEqual(kinds.slice(2).map((k) => k.split(':')[0]), ['subagent_end', 'subagent_end']);
    const [a, b] = [ms.requests('slow-a')[0], ms.requests('slow-b')[0]];
    assert.ok(b.ts < a.ts + a.duration_ms && a.ts < b.ts + b.duration_ms, 'the two model calls overlapped');
    // each tool span says it ran in a parallel group; results come back in the model's order
    const spans = await trace(u, t.turnId);
    const tools = spans.filter((s) => s.kind === 'tool' && s.name === 'delegate_subagent');
    assert.equal(tools.length, 2);
    assert.ok(tools.every((s) => s.attrs.parallel === 2));
    assert.match(textOf(t.events.filter((e) => !e.json.subagent_id)), /both: Researcher subagent .*answer A\nReviewer subagent .*findings B: none/s);
    const msgs = await messages(base, u, sid);
    const assistant = msgs.find((m) => m.role === 'assistant' && m.tool_calls);
    const results = msgs.filter((m) => m.role === 'tool');
    assert.deepEqual(results.map((m) => m.tool_call_id), assistant.tool_calls.map((c) => c.id));
    assert.equal(ms.requests('slow-b')[0].system.startsWith('You are the Reviewer'), true);
    assert.deepEqual([...ms.requests('slow-b')[0].tools].sort(), ['list_files', 'preview', 'read_file', 'search_chunks']);
  });

  test('cancelling the turn stops a running subagent', async () => {
    const u = makeUser(stack.pg);
    const sid = await newSession(base, u);
    const r = await post(base, u, sid, 'wait #scenario:hang-top');
    assert.equal(r.status, 202);
    await until(() => ms.requests('hang-child').length > 0, { what: "the subagent's model call" });
    assert.equal(ms.stats().active, 1, 'its model call is in flight');
    assert.equal((await api(base, `/api/sessions/${sid}/cancel`, { method: 'POST', headers: u.auth })).status, 202);
    const evs = await untilTurnEnd(base, u, sid, r.json.turn_id);
    assert.equal(evs.at(-1).json.state, 'cancelled');
    const end = evs.find((e) => e.event === 'subagent_end').json;
    assert.equal(end.state, 'cancelled');
    const dEnd = evs.find((e) => e.event === 'tool_end' && !e.json.subagent_id).json;
    assert.equal(dEnd.ok, false);
    assert.match(dEnd.result, /stopped: the turn was cancelled \(the researcher subagent was interrupted\)/);
    // its model stream was closed, not left hanging
    await until(() => ms.stats().active === 0, { what: 'the hanging model call to be closed' });
    const spans = await trace(u, r.json.turn_id);
    assert.equal(spans.find((s) => s.kind === 'subagent').status, 'cancelled');
    assert.equal(ms.requests('hang-top').length, 1, 'the parent did not go on');
    const msgs = await messages(base, u, sid);
    const calls = msgs.flatMap((m) => (m.tool_calls || []).map((c) => c.id));
    assert.deepEqual(calls, msgs.filter((m) => m.role === 'tool').map((m) => m.tool_call_id));
  });
});
