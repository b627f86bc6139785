// Utopia through the agent's fast-lane tools, against the scripted model
// server and a real Postgres (the sandbox lane is off here: nothing of this
// needs it): dated facts changed twice and answered for three dates by
// recall_facts; search_chunks over a document, a memory and a fact together,
// cited; remember's validation; memories offered at the start of a turn (in
// the request the model server recorded and in the trace); nested subagents
// with SUBAGENT_MAX_DEPTH=2 (events tagged down two levels, the limit refused
// at depth 2); the Coder refused when execution is off. Then, on a second
// tusko, each role's settings: SUBAGENT_<ROLE>_MODEL in the requests recorded
// (unset: the chat's model), SUBAGENT_<ROLE>_STEPS ending a run that never
// stops, a role model outside TUSKO_MODELS refused at start-up.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { runProgram, startPostgres, stopAll } from '../../lib/harness.mjs';
import { api, makeUser, messages, newSession, startModels, startTusko, textOf, turn, tuskoEnv } from './lib.mjs';

const lives = (city, from) => ({ name: 'remember', arguments: { fact: { subject: 'Ada Quist', predicate: 'lives in', object: city, valid_from: from } } });
const recall = (at) => ({ name: 'recall_facts', arguments: { entity: 'Ada Quist', at } });

const SCENARIOS = {
  'facts-twice': {
    steps: [
      { tool_calls: [lives('Paris', '2019-01-01'), lives('Berlin', 'June 2021'), lives('Rome', '2023-03-15')] },
      { tool_calls: [recall('2020-05-01'), recall('2022-01-01'), recall('2024-07-01')] },
      { text: 'done: {{tool_results}}' },
    ],
  },
  'remember-odd': {
    steps: [
      {
        tool_calls: [
          { name: 'remember', arguments: { fact: { subject: 'Ada Quist', predicate: 'works at', object: 'Acme', valid_from: '05/03/2024' } } },
          { name: 'remember', arguments: { fact: 'Ada prefers tea to coffee' } },
          { name: 'remember', arguments: {} },
          { name: 'recall_facts', arguments: { entity: 'Nobody Known' } },
          { name: 'search_chunks', arguments: { query: 'x', k: 500 } },
        ],
      },
      { text: 'ok' },
    ],
  },
  'note-cat': {
    steps: [{ tool_calls: [{ name: 'remember', arguments: { note: 'The user has a cat called Whiskerton who hates Mondays.' } }] }, { text: 'noted' }],
  },
  'echo-system': { steps: [{ text: 'system: {{system}}' }] },
  'search-all': {
    steps: [
      { tool_calls: [{ name: 'search_chunks', arguments: { query: 'quokka census Rottnest', k: 10 } }] },
      { text: 'found: {{tool_result}}' },
    ],
  },
  // depth 2: the researcher delegates to a reviewer, whose own delegation is refused
  'nest-top': {
    steps: [
      { tool_calls: [{ name: 'delegate_subagent', arguments: { role: 'researcher', task: 'look deeper #scenario:nest-mid' } }] },
      { text: 'top got: {{tool_result}}' },
    ],
  },
  'nest-mid': {
    steps: [
      { tool_calls: [{ name: 'delegate_subagent', arguments: { role: 'researcher', task: 'and deeper still #scenario:nest-leaf' } }] },
      { text: 'mid got: {{tool_result}}' },
    ],
  },
  'nest-leaf': {
    steps: [
      { tool_calls: [{ name: 'delegate_subagent', arguments: { role: 'researcher', task: 'one more #scenario:text' } }] },
      { text: 'leaf says: {{tool_result}}' },
    ],
  },
  'coder-off': {
    steps: [{ tool_calls: [{ name: 'delegate_subagent', arguments: { role: 'coder', task: 'write a script' } }] }, { text: 'tool: {{tool_result}}' }],
  },
};

describe('Utopia tools and memories in turns', () => {
  let ms, stack, base, alice, bob;

  before(async () => {
    ms = await startModels({ scenarios: SCENARIOS });
    stack = await startTusko(ms, { env: { SUBAGENT_MAX_DEPTH: '2' } });
    base = stack.tusko.url;
    alice = makeUser(stack.pg);
    bob = makeUser(stack.pg);
  });
  after(async () => {
    await stopAll();
    await ms.close();
  });

  test('a fact changed twice is answered for three dates by recall_facts', async () => {
    const sid = await newSession(base, alice);
    const t = await turn(base, alice, sid, 'where did Ada live #scenario:facts-twice');
    assert.equal(t.end.state, 'done', JSON.stringify(t.end));
    const ends = t.events.filter((e) => e.event === 'tool_end');
    assert.deepEqual(ends.map((e) => e.json.name), ['remember', 'remember', 'remember', 'recall_facts', 'recall_facts', 'recall_facts']);
    assert.ok(ends.every((e) => e.json.ok && e.json.lane === 'fast'), JSON.stringify(ends.map((e) => e.json.result)));
    assert.match(ends[0].json.result, /Recorded the fact: Ada Quist — lives_in — Paris, from 2019-01-01, still true/);
    assert.match(ends[1].json.result, /Berlin, from 2021-06.*replaces 1 earlier fact/);
    assert.match(ends[2].json.result, /Rome, from 2023-03-15.*replaces 1 earlier fact/);
    const [r2020, r2022, r2024] = ends.slice(3).map((e) => e.json);
    assert.match(r2020.result, /lives_in — Paris, from 2019-01-01 until 2021-06/);
    assert.doesNotMatch(r2020.result, /Berlin|Rome/);
    assert.match(r2022.result, /Berlin/);
    assert.doesNotMatch(r2022.result, /Paris|Rome/);
    assert.match(r2024.result, /Rome, from 2023-03-15, still true/);
    assert.doesNotMatch(r2024.result, /Paris|Berlin/);
    // structured data for the UI, the same answers
    assert.deepEqual([r2020, r2022, r2024].map((r) => r.data.facts.map((f) => f.object)), [['Paris'], ['Berlin'], ['Rome']]);
    // the history is kept (closed, not deleted), each with the chat and turn as its source
    const all = await api(base, `/api/utopia/facts?entity=${encodeURIComponent('Ada Quist')}`, { headers: alice.auth });
    assert.equal(all.status, 200, all.text);
    const byObj = Object.fromEntries(all.json.facts.map((f) => [f.object, f]));
    assert.equal(byObj.Paris.valid_to, '2021-06');
    assert.equal(byObj.Berlin.valid_to, '2023-03-15');
    assert.equal(byObj.Rome.valid_to, null);
    for (const f of all.json.facts) assert.deepEqual(f.source, { chat_id: sid, turn_id: t.turnId });
    // the model was given the results in order
    const last = ms.requests('facts-twice').at(-1);
    assert.equal(last.step, 2);
    // another user knows nothing of it
    const other = await api(base, `/api/utopia/recall?entity=${encodeURIComponent('Ada Quist')}`, { headers: bob.auth });
    assert.equal(other.status, 404);
  });

  test('remember checks what the model gives; odd input is answered clearly', async () => {
    const sid = await newSession(base, alice);
    const t = await turn(base, alice, sid, 'odd #scenario:remember-odd');
    assert.equal(t.end.state, 'done');
    const ends = t.events.filter((e) => e.event === 'tool_end').map((e) => e.json);
    assert.equal(ends[0].ok, false);
    assert.match(ends[0].result, /not remembered: .*YYYY-MM-DD/);
    assert.equal(ends[1].ok, true);
    assert.match(ends[1].result, /Saved to long-term memory as a note/);
    assert.equal(ends[2].ok, false);
    assert.match(ends[2].result, /remember takes \{"fact"/);
    assert.equal(ends[3].ok, true, 'an unknown entity is an answer, not a failure');
    assert.match(ends[3].result, /Nothing is known about "Nobody Known"/);
    assert.equal(ends[4].ok, false);
    assert.match(ends[4].result, /"k" is the number of results, 1 to 50/);
    const mem = await api(base, '/api/utopia/memories', { headers: alice.auth });
    assert.ok(mem.json.memories.some((m) => m.text === 'Ada prefers tea to coffee'));
  });

  test('search_chunks finds a document chunk, a memory and a fact together, cited', async () => {
    const doc = await fetch(`${base}/api/utopia/documents?filename=wildlife.md`, {
      method: 'POST',
      headers: { ...alice.auth, 'content-type': 'text/markdown' },
      body: '# Wildlife survey\n\n## Rottnest\n\nThe quokka census on Rottnest counted 12,000 animals in 2024.\n',
    });
    const docText = await doc.text();
    assert.equal(doc.status, 201, docText);
    const docId = JSON.parse(docText).id;
    assert.equal((await api(base, '/api/utopia/memories', { json: { note: 'Ask about the quokka census next week' }, headers: alice.auth })).status, 201);
    assert.equal((await api(base, '/api/utopia/facts', { json: { fact: { subject: 'Rottnest', predicate: 'known for', object: 'quokka census' } }, headers: alice.auth })).status, 201);
    const sid = await newSession(base, alice);
    const t = await turn(base, alice, sid, 'look #scenario:search-all');
    const end = t.events.find((e) => e.event === 'tool_end').json;
    assert.equal(end.ok, true, end.result);
    assert.equal(end.lane, 'fast');
    const types = end.data.results.map((r) => r.type);
    assert.ok(types.includes('chunk') && types.includes('memory') && types.includes('fact'), types.join(','));
    const chunk = end.data.results.find((r) => r.type === 'chunk');
    assert.equal(chunk.document_id, docId);
    assert.match(end.result, /\[1\] /);
    assert.match(end.result, /Wildlife survey — .*Rottnest, part 1/);
    assert.match(end.result, /\*\*quokka\*\* \*\*census\*\*/);
    assert.equal(end.results, end.data.results.length);
    // the model got the cited text
    assert.match(textOf(t.events), /found: \d+ results for "quokka census Rottnest"/);
    // bob's search of the same words finds nothing of alice's
    const bs = await newSession(base, bob);
    const bt = await turn(base, bob, bs, 'look #scenario:search-all');
    assert.match(bt.events.find((e) => e.event === 'tool_end').json.result, /^Nothing found/);
  });

  test('memories relevant to a turn are offered in its system prompt and shown in its trace', async () => {
    const u = makeUser(stack.pg);
    const s1 = await newSession(base, u);
    const r = await turn(base, u, s1, 'remember my cat #scenario:note-cat');
    const memId = r.events.find((e) => e.event === 'tool_end').json.data.memory.id;
    assert.ok(memId);
    // a later chat, about the cat
    const s2 = await newSession(base, u);
    const t = await turn(base, u, s2, 'what is my cat called and what does Whiskerton hate? #scenario:echo-system');
    const rec = ms.requests('echo-system').at(-1);
    assert.match(rec.system, /## Long-term memory/);
    assert.match(rec.system, /- The user has a cat called Whiskerton who hates Mondays\./);
    assert.ok(rec.system.startsWith('You are Tusko'), 'the configured prompt comes first');
    const tr = await api(base, `/api/turns/${t.turnId}/trace`, { headers: u.auth });
    const span = tr.json.spans.find((s) => s.kind === 'memory');
    assert.ok(span, tr.text);
    assert.equal(span.name, 'memories offered');
    assert.equal(span.attrs.count, 1);
    assert.equal(span.attrs.memories[0].id, memId);
    assert.ok(span.attrs.tokens > 0 && span.attrs.tokens <= span.attrs.budget);
    assert.equal(span.attrs.tokens, span.attrs.memories[0].tokens);
    assert.equal(span.attrs.budget, 600);
    assert.equal(span.attrs.where, 'system prompt');
    const root = tr.json.spans.find((s) => s.kind === 'turn');
    assert.equal(span.parent_id, root.id);
    // a long message (over the search's 2,000-byte query) is looked up by its start
    const long = `Whiskerton again: ${'and then some more words about the garden '.repeat(80)} #scenario:echo-system`;
    assert.ok(long.length > 3000);
    const tl = await turn(base, u, s2, long);
    assert.match(ms.requests('echo-system').at(-1).system, /Whiskerton who hates Mondays/);
    const trl = await api(base, `/api/turns/${tl.turnId}/trace`, { headers: u.auth });
    const sl = trl.json.spans.find((s) => s.kind === 'memory');
    assert.equal(sl.status, 'ok');
    assert.equal(sl.attrs.count, 1);
    // a turn about something else is offered nothing, and says so
    const t2 = await turn(base, u, s2, 'tell me about volcanoes #scenario:echo-system');
    assert.doesNotMatch(ms.requests('echo-system').at(-1).system, /Whiskerton|Long-term memory/);
    const tr2 = await api(base, `/api/turns/${t2.turnId}/trace`, { headers: u.auth });
    assert.equal(tr2.json.spans.find((s) => s.kind === 'memory').attrs.count, 0);
    // another user's turn about the same cat sees none of it
    const b2 = await newSession(base, bob);
    await turn(base, bob, b2, 'what is my cat Whiskerton called? #scenario:echo-system');
    assert.doesNotMatch(ms.requests('echo-system').at(-1).system, /Whiskerton/);
  });

  test('subagents nest down to SUBAGENT_MAX_DEPTH (2 here); the next delegation is refused', async () => {
    const sid = await newSession(base, alice);
    const t = await turn(base, alice, sid, 'go #scenario:nest-top');
    assert.equal(t.end.state, 'done', JSON.stringify(t.end));
    const starts = t.events.filter((e) => e.event === 'subagent_start').map((e) => e.json);
    assert.equal(starts.length, 2);
    const [mid, leaf] = starts;
    const top = t.events.find((e) => e.event === 'tool_start' && !e.json.subagent_id).json;
    assert.equal(mid.depth, 1);
    assert.equal(mid.parent_call_id, top.call_id);
    assert.equal(mid.parent_subagent_id, undefined);
    assert.equal(leaf.depth, 2);
    assert.equal(leaf.parent_subagent_id, mid.subagent_id);
    const midCall = t.events.find((e) => e.event === 'tool_start' && e.json.subagent_id === mid.subagent_id).json;
    assert.equal(leaf.parent_call_id, midCall.call_id);
    // the leaf (depth 2) was not offered delegate_subagent; called anyway it is refused
    const leafReq = ms.requests('nest-leaf')[0];
    assert.ok(!leafReq.tools.includes('delegate_subagent'), leafReq.tools.join(','));
    assert.ok(ms.requests('nest-mid')[0].tools.includes('delegate_subagent'));
    const refused = t.events.find((e) => e.event === 'tool_end' && e.json.subagent_id === leaf.subagent_id).json;
    assert.equal(refused.ok, false);
    assert.match(refused.result, /refused: a subagent cannot delegate further — this researcher subagent runs at depth 2 and SUBAGENT_MAX_DEPTH is 2/);
    // the answers travel back up
    assert.match(textOf(t.events), /top got: Researcher subagent .*mid got: Researcher subagent .*leaf says: refused/s);
    // the trace nests: turn > tool > subagent > tool > subagent
    const tr = await api(base, `/api/turns/${t.turnId}/trace`, { headers: alice.auth });
    const byId = new Map(tr.json.spans.map((s) => [s.id, s]));
    const leafSpan = tr.json.spans.find((s) => s.kind === 'subagent' && s.attrs.subagent_id === leaf.subagent_id);
    const chain = [];
    for (let s = leafSpan; s; s = byId.get(s.parent_id)) chain.push(s.kind);
    assert.deepEqual(chain, ['subagent', 'tool', 'subagent', 'tool', 'turn']);
  });

  test('the coder is refused clearly when execution is off', async () => {
    const sid = await newSession(base, alice);
    const t = await turn(base, alice, sid, 'code #scenario:coder-off');
    const end = t.events.find((e) => e.event === 'tool_end').json;
    assert.equal(end.ok, false);
    assert.match(end.result, /the coder is not available: code execution is off on this server \(OPENSANDBOX_URL,OPENSANDBOX_API_KEY not set\)/);
    assert.ok(!t.events.some((e) => e.event === 'subagent_start'));
    const msgs = await messages(base, alice, sid);
    assert.equal(msgs.filter((m) => m.role === 'tool').length, 1);
  });
});

// Each role's settings through the agent loop: SUBAGENT_<ROLE>_MODEL routes the
// subagent's model requests (and the protocol) to that model, unset it follows
// the chat's model; a role model outside TUSKO_MODELS refuses start-up naming
// the variable; a subagent that never stops ends at SUBAGENT_<ROLE>_STEPS and
// its parent is told so and goes on. The sandbox lane is on here
// (OPENSANDBOX_URL names a loopback port nothing serves) only so that the
// Coder may start: its scripted answer calls no tool, so no sandbox is asked for.
const ROLE_MODELS = 'openai:gpt-4o-mini,anthropic:claude-sonnet-4,openai:gpt-4.1-nano,anthropic:claude-haiku-3';
const delegate = (role, scenario) => ({ name: 'delegate_subagent', arguments: { role, task: `${role} task #scenario:${scenario}` } });
const ROLE_SCENARIOS = {
  'roles-all': {
    steps: [
      { tool_calls: [delegate('researcher', 'as-researcher'), delegate('coder', 'as-coder'), delegate('reviewer', 'as-reviewer')] },
      { text: 'all three: {{tool_results}}' },
    ],
  },
  'as-researcher': { steps: [{ text: 'researcher on {{model}} ({{protocol}})' }] },
  'as-coder': { steps: [{ text: 'coder on {{model}} ({{protocol}})' }] },
  'as-reviewer': { steps: [{ text: 'reviewer on {{model}} ({{protocol}})' }] },
  'budget-top': {
    steps: [
      { tool_calls: [delegate('researcher', 'forever-researcher'), delegate('coder', 'forever-coder'), delegate('reviewer', 'forever-reviewer')] },
      { text: 'the parent goes on after: {{tool_results}}' },
    ],
  },
  // one step, repeated for ever: a tool call every time (one each role has and
  // that needs no sandbox), never a final answer
  ...Object.fromEntries(
    ['researcher', 'coder', 'reviewer'].map((r) => [`forever-${r}`, { steps: [{ text: `${r} still looking`, tool_calls: [{ name: 'search_chunks', arguments: { query: 'nothing to be found' } }] }] }]),
  ),
};

describe("delegate_subagent: each role's model and step budget (settings)", () => {
  let ms, stack, base, u;

  before(async () => {
    ms = await startModels({ scenarios: ROLE_SCENARIOS });
    stack = await startTusko(ms, {
      tag: 'roles',
      env: {
        TUSKO_MODELS: ROLE_MODELS,
        SUBAGENT_RESEARCHER_MODEL: 'anthropic:claude-haiku-3',
        SUBAGENT_CODER_MODEL: 'gpt-4.1-nano', // the bare model name, unambiguous in the allowlist
        // SUBAGENT_REVIEWER_MODEL unset: the chat's model
        SUBAGENT_RESEARCHER_STEPS: '3',
        SUBAGENT_REVIEWER_STEPS: '2', // the Coder keeps its default, 12
        OPENSANDBOX_URL: 'http://127.0.0.1:9',
        OPENSANDBOX_API_KEY: 'never-used-no-sandbox-is-asked-for',
      },
    });
    base = stack.tusko.url;
    u = makeUser(stack.pg);
  });
  after(async () => {
    await stopAll();
    await ms.close();
  });

  const only = (name) => {
    const recs = ms.requests(name);
    assert.equal(recs.length, 1, `${name}: ${recs.length} requests`);
    return recs[0];
  };

  test('SUBAGENT_<ROLE>_MODEL routes each role to its model; unset, the role uses the chat model', async () => {
    // a chat on the default model (openai:gpt-4o-mini)
    const sid = await newSession(base, u);
    const t = await turn(base, u, sid, 'split it #scenario:roles-all');
    assert.equal(t.end.state, 'done', JSON.stringify(t.end));
    const starts = Object.fromEntries(t.events.filter((e) => e.event === 'subagent_start').map((e) => [e.json.role, e.json]));
    assert.deepEqual(Object.keys(starts).sort(), ['coder', 'researcher', 'reviewer']);
    assert.equal(starts.researcher.model, 'anthropic:claude-haiku-3');
    assert.equal(starts.coder.model, 'openai:gpt-4.1-nano');
    assert.equal(starts.reviewer.model, 'openai:gpt-4o-mini');
    assert.deepEqual([starts.researcher.max_steps, starts.coder.max_steps, starts.reviewer.max_steps], [3, 12, 2]);
    // what each subagent's model request carried, as the model server recorded it
    const res = only('as-researcher');
    assert.equal(res.model, 'claude-haiku-3');
    assert.equal(res.protocol, 'anthropic');
    assert.ok(res.system.startsWith('You are the Researcher, a subagent of Tusko.'), res.system);
    assert.doesNotMatch(res.system, /You are Tusko, a helpful agent/, "the role's prompt is its own, not the chat's");
    assert.ok(res.tools.includes('recall_facts') && !res.tools.includes('write_file'), res.tools.join(','));
    const cod = only('as-coder');
    assert.equal(cod.model, 'gpt-4.1-nano');
    assert.equal(cod.protocol, 'openai');
    assert.ok(cod.system.startsWith('You are the Coder, a subagent of Tusko.'), cod.system);
    for (const name of ['write_file', 'read_file', 'execute_command', 'execute_code']) assert.ok(cod.tools.includes(name), cod.tools.join(','));
    const rev = only('as-reviewer');
    assert.equal(rev.model, 'gpt-4o-mini');
    assert.equal(rev.protocol, 'openai');
    assert.ok(rev.system.startsWith('You are the Reviewer, a subagent of Tusko.'), rev.system);
    assert.deepEqual([...rev.tools].sort(), ['list_files', 'preview', 'read_file', 'search_chunks']);
    // the parent's own calls stayed on the chat's model; it got the three answers
    for (const r of ms.requests('roles-all')) assert.equal(r.model, 'gpt-4o-mini');
    const last = ms.requests('roles-all').at(-1);
    assert.match(last.body.messages.filter((m) => m.role === 'tool').map((m) => m.content).join('\n'), /researcher on claude-haiku-3 \(anthropic\)[^]*coder on gpt-4.1-nano \(openai\)[^]*reviewer on gpt-4o-mini \(openai\)/);
    assert.ok(!t.events.some((e) => e.event === 'sandbox_spawn'), 'no sandbox was asked for');

    // a chat on the other provider: the reviewer (unset) follows it, the others keep theirs
    ms.clearRequests();
    const t2 = await turn(base, u, sid, 'again #scenario:roles-all', { model: 'anthropic:claude-sonnet-4' });
    assert.equal(t2.end.state, 'done', JSON.stringify(t2.end));
    assert.equal(only('as-reviewer').model, 'claude-sonnet-4');
    assert.equal(only('as-reviewer').protocol, 'anthropic');
    assert.equal(only('as-researcher').model, 'claude-haiku-3');
    assert.equal(only('as-coder').model, 'gpt-4.1-nano');
    for (const r of ms.requests('roles-all')) assert.equal(r.model, 'claude-sonnet-4');
  });

  test('a subagent that never stops ends at its SUBAGENT_<ROLE>_STEPS; the parent is told and goes on', async () => {
    ms.clearRequests();
    const sid = await newSession(base, u);
    const t = await turn(base, u, sid, 'dig #scenario:budget-top');
    assert.equal(t.end.state, 'done', JSON.stringify(t.end));
    // each role: exactly its budget of model calls (SUBAGENT_RESEARCHER_STEPS=3,
    // SUBAGENT_REVIEWER_STEPS=2, the Coder's default 12), each answered with a
    // tool call that ran
    const budgets = { researcher: ['SUBAGENT_RESEARCHER_STEPS', 3], coder: ['SUBAGENT_CODER_STEPS', 12], reviewer: ['SUBAGENT_REVIEWER_STEPS', 2] };
    const calls = t.events.filter((e) => e.event === 'tool_end' && !e.json.subagent_id).map((e) => e.json);
    assert.equal(calls.length, 3);
    const trace = await api(base, `/api/turns/${t.turnId}/trace`, { headers: u.auth });
    for (const [role, [setting, n]] of Object.entries(budgets)) {
      assert.equal(ms.requests(`forever-${role}`).length, n, role);
      const start = t.events.find((e) => e.event === 'subagent_start' && e.json.role === role).json;
      assert.equal(start.max_steps, n);
      const mine = t.events.filter((e) => e.json.subagent_id === start.subagent_id);
      assert.equal(mine.filter((e) => e.event === 'tool_end').length, n, role);
      const err = mine.find((e) => e.event === 'error').json;
      assert.equal(err.code, 'STEP_BUDGET');
      assert.equal(err.message, `stopped after ${n} model calls: the step budget (${setting}) is used up`);
      const end = mine.find((e) => e.event === 'subagent_end').json;
      assert.equal(end.state, 'failed');
      assert.equal(end.error_code, 'STEP_BUDGET');
      assert.equal(end.steps, n);
      assert.equal(end.tool_calls, n);
      // the delegate call's result: it ran out of steps, with its last words
      const call = calls.find((c) => c.call_id === start.parent_call_id);
      assert.equal(call.name, 'delegate_subagent');
      assert.equal(call.ok, false);
      assert.equal(
        call.result,
        `the ${role} subagent ran out of steps: it used all ${n} model calls of its budget (${setting}) without a final answer; split the task or do the rest yourself. Its last answer:\n${role} still looking`,
      );
      assert.equal(call.data.state, 'failed');
      const span = trace.json.spans.find((s) => s.kind === 'subagent' && s.attrs.subagent_id === start.subagent_id);
      assert.equal(span.status, 'error');
      assert.equal(span.attrs.error_code, 'STEP_BUDGET');
      assert.equal(trace.json.spans.filter((s) => s.kind === 'llm' && s.parent_id === span.id).length, n);
    }
    // the parent turn went on: its model got the three results and answered
    const next = ms.requests('budget-top').at(-1);
    assert.equal(next.step, 1);
    assert.equal(next.body.messages.filter((m) => m.role === 'tool' && /ran out of steps/.test(m.content)).length, 3);
    const parentText = t.events.filter((e) => e.event === 'text' && !e.json.subagent_id).map((e) => e.json.delta).join('');
    assert.match(parentText, /^the parent goes on after: the \w+ subagent ran out of steps/);
    assert.ok(!t.events.some((e) => e.event === 'sandbox_spawn'), 'no sandbox was asked for');
  });

  test('a role model outside TUSKO_MODELS refuses start-up, naming the variable', async () => {
    for (const [name, value] of [
      ['SUBAGENT_RESEARCHER_MODEL', 'openai:gpt-5-unlisted'],
      ['SUBAGENT_CODER_MODEL', 'claude-opus-9'],
      ['SUBAGENT_REVIEWER_MODEL', 'mistral:large'],
    ]) {
      const r = runProgram('tusko', ['serve'], { env: tuskoEnv(stack.pg, ms, { TUSKO_MODELS: ROLE_MODELS, [name]: value }), timeoutMs: 30000 });
      assert.equal(r.code, 2, `${name}: exit ${r.code} ${r.signal || ''}\n${r.stderr}`);
      assert.match(r.stderr, new RegExp(`^tusko: ${name}: "${value}" is not one of TUSKO_MODELS \\(the allowlist\\); name an allowed model or unset it to use the chat's model$`, 'm'));
      assert.doesNotMatch(r.stderr, /msg="listening"/);
    }
    // a bare model name two providers share is ambiguous, and refused the same way
    const amb = runProgram('tusko', ['serve'], {
      env: tuskoEnv(stack.pg, ms, { TUSKO_MODELS: 'openai:same-name,anthropic:same-name', SUBAGENT_REVIEWER_MODEL: 'same-name' }),
      timeoutMs: 30000,
    });
    assert.equal(amb.code, 2, amb.stderr);
    assert.match(amb.stderr, /SUBAGENT_REVIEWER_MODEL: "same-name" is not one of TUSKO_MODELS/);
    // refused before it touches the database: a new database stays empty
    const fresh = await startPostgres('rolemodel');
    const r = runProgram('tusko', ['serve'], { env: tuskoEnv(fresh, ms, { TUSKO_MODELS: ROLE_MODELS, SUBAGENT_CODER_MODEL: 'claude-opus-9' }), timeoutMs: 30000 });
    assert.equal(r.code, 2, r.stderr);
    assert.deepEqual(fresh.rows("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"), [['0']]);
  });
});
