// GET /api/agent, what a client needs to know of the agent, checked against
// what the server does: the tools it declares are the tools registered (each
// offered one is what a turn's model request is offered, with execution on
// and off), with the lanes docs/AGENT.md gives and changes_files exactly for
// the tools that write or run; the event types it declares are every type
// real streams carry (the history frame too) and what docs/API.md lists, and
// the web UI's reducer (web/js/events.js) reads each of them.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { HANDLED_TYPES, fold, newChat } from '../../../web/js/events.js';
import { ROOT, stopAll } from '../../lib/harness.mjs';
import { api, events, makeUser, newSession, sse, startModels, startTusko, turn } from './lib.mjs';

const delegate = (role, task) => ({ name: 'delegate_subagent', arguments: { role, task } });
const SCENARIOS = {
  talk: { steps: [{ text: 'Just talking.' }] },
  busy: {
    steps: [
      { text: 'Planning.', tool_calls: [{ name: 'plan_task', arguments: { goal: 'Check', milestones: ['one', 'two', 'three'] } }] },
      { tool_calls: [{ name: 'plan_task', arguments: { update: [{ milestone: 1, status: 'done' }] } }, { name: 'list_files', arguments: {} }] },
      { tool_calls: [delegate('researcher', 'look #scenario:look')] },
      { text: 'Done.' },
    ],
  },
  look: { steps: [{ text: 'Looking.', tool_calls: [{ name: 'search_chunks', arguments: { query: 'x' } }] }, { text: 'Nothing.' }] },
  broken: { steps: [{ error: { status: 500, message: 'down' } }] },
};

// docs/AGENT.md's lane table: tool → lane
function documentedLanes() {
  const md = fs.readFileSync(path.join(ROOT, 'docs/AGENT.md'), 'utf8');
  const lanes = {};
  for (const m of md.matchAll(/^\| (fast|sandbox|browser) \|[^|]*\|[^|]*\| (.*) \|$/gm)) for (const t of m[2].matchAll(/`([a-z_]+)`/g)) lanes[t[1]] = m[1];
  return lanes;
}

// docs/API.md's list of the stream's types
function documentedTypes() {
  const md = fs.readFileSync(path.join(ROOT, 'docs/API.md'), 'utf8');
  const m = /Types: (.*?) — shapes in/s.exec(md);
  assert.ok(m, 'docs/API.md lists the types');
  return [...m[1].matchAll(/`([a-z_]+)`/g)].map((x) => x[1]);
}

describe('GET /api/agent', () => {
  let ms, on, off, u, uOff;

  before(async () => {
    ms = await startModels({ scenarios: SCENARIOS });
    // execution on: the sandbox lane is offered (a talking turn contacts no sandbox service)
    on = await startTusko(ms, { env: { OPENSANDBOX_URL: 'http://127.0.0.1:9', OPENSANDBOX_API_KEY: 'k-never-used' }, tag: 'catalog_on' });
    off = await startTusko(ms, { tag: 'catalog_off' });
    u = makeUser(on.pg);
    uOff = makeUser(off.pg);
  });
  after(async () => {
    await stopAll();
    await ms.close();
  });

  const catalog = async (stack, user) => {
    const r = await api(stack.tusko.url, '/api/agent', { headers: user.auth });
    assert.equal(r.status, 200, r.text);
    return r.json;
  };
  const offeredToModel = async (stack, user, tag) => {
    const sid = await newSession(stack.tusko.url, user);
    await fetch(`${ms.url}/_stats`, { method: 'DELETE' });
    const t = await turn(stack.tusko.url, user, sid, `hello ${tag} #scenario:talk`);
    assert.equal(t.end.state, 'done');
    const req = ms.requests('talk').find((r) => r.last_user.includes(tag));
    assert.ok(req, 'the model was asked');
    return [...req.tools].sort();
  };

  test('needs a signed-in caller', async () => {
    const r = await api(on.tusko.url, '/api/agent');
    assert.equal(r.status, 401);
  });

  test('the tools: the offered ones are what a turn offers the model, with execution on and off', async () => {
    const withExec = await catalog(on, u);
    const without = await catalog(off, uOff);
    for (const c of [withExec, without]) for (const t of c.tools) assert.deepEqual(Object.keys(t).sort(), ['changes_files', 'lane', 'name', 'offered'], JSON.stringify(t));
    // the same tools registered either way
    assert.deepEqual(
      without.tools.map((t) => t.name),
      withExec.tools.map((t) => t.name),
    );
    const names = (c) =>
      c.tools
        .filter((t) => t.offered)
        .map((t) => t.name)
        .sort();
    assert.deepEqual(names(withExec), await offeredToModel(on, u, 'on'));
    assert.deepEqual(names(without), await offeredToModel(off, uOff, 'off'));
    // without Telegram (neither stack has TELEGRAM_BOT_TOKEN) notify_user is offered to no one
    for (const c of [withExec, without]) assert.equal(c.tools.find((t) => t.name === 'notify_user')?.offered, false);
    // nor snapshot_workspace without S3_ENDPOINT
    for (const c of [withExec, without]) assert.equal(c.tools.find((t) => t.name === 'snapshot_workspace')?.offered, false);
    // with execution off, exactly the sandbox lane is not offered (besides those two,
    // and the browser lane, off in both: no STEEL_URL here)
    const notOffered = without.tools.filter((t) => !t.offered && t.name !== 'notify_user' && t.name !== 'snapshot_workspace' && t.lane !== 'browser');
    assert.deepEqual(
      notOffered.map((t) => t.lane),
      without.tools.filter((t) => t.lane === 'sandbox').map(() => 'sandbox'),
    );
    for (const c of [without, withExec]) assert.ok(c.tools.filter((t) => t.lane === 'browser').every((t) => !t.offered));
    assert.ok(without.tools.some((t) => t.lane === 'sandbox'), 'the sandbox tools are declared, not offered');
  });

  test('the tool table to the letter, in the order the tools are registered', async () => {
    const row = (name, lane, changes_files, offered = true) => ({ name, lane, changes_files, offered });
    const expected = (exec) => [
      row('plan_task', 'fast', false),
      row('list_files', 'fast', false),
      row('preview', 'fast', false),
      row('write_file', 'sandbox', true, exec),
      row('read_file', 'sandbox', false, exec),
      row('execute_command', 'sandbox', true, exec),
      row('execute_code', 'sandbox', true, exec),
      row('parse_pdf', 'sandbox', false, exec),
      row('compare_files', 'sandbox', false, exec),
      row('web_fetch', 'fast', false),
      row('browser_navigate', 'browser', false, false),
      row('browser_read', 'browser', false, false),
      row('browser_click', 'browser', false, false),
      row('browser_type', 'browser', false, false),
      row('browser_scroll', 'browser', false, false),
      row('browser_screenshot', 'browser', false, false),
      row('browser_actions', 'browser', false, false),
      row('search_chunks', 'fast', false),
      row('remember', 'fast', false),
      row('recall_facts', 'fast', false),
      row('save_document', 'fast', false),
      row('delegate_subagent', 'fast', false),
      row('list_skills', 'fast', false),
      row('activate_skill', 'fast', false),
      row('read_skill_file', 'fast', false),
      row('run_skill_script', 'sandbox', true, exec),
      row('schedule_task', 'fast', false),
      row('list_schedules', 'fast', false),
      row('cancel_schedule', 'fast', false),
      row('notify_user', 'fast', false, false),
      row('snapshot_workspace', 'fast', false, false),
    ];
    assert.deepEqual((await catalog(on, u)).tools, expected(true));
    assert.deepEqual((await catalog(off, uOff)).tools, expected(false));
  });

  test('each tool has the lane docs/AGENT.md gives it; changes_files is for the tools that write or run', async () => {
    const { tools } = await catalog(on, u);
    const lanes = documentedLanes();
    assert.deepEqual(Object.fromEntries(tools.map((t) => [t.name, t.lane])), lanes);
    assert.deepEqual(
      tools
        .filter((t) => t.changes_files)
        .map((t) => t.name)
        .sort(),
      ['execute_code', 'execute_command', 'run_skill_script', 'write_file'],
    );
  });

  test('the event types: every type real streams carry, what docs/API.md lists, and each read by the web UI', async () => {
    const { events: declared } = await catalog(off, uOff);
    // the last two are frames without an id that the stream's reader (chat.js) takes itself
    const own = ['stream_closed', 'history'];
    assert.deepEqual(declared.slice(-2), own);
    assert.deepEqual(declared.slice(0, -2), documentedTypes());
    for (const t of declared) assert.ok(own.includes(t) || HANDLED_TYPES.includes(t), `the web UI's reducer reads ${t}`);
    const chatJs = fs.readFileSync(path.join(ROOT, 'web/js/chat.js'), 'utf8');
    for (const t of own) assert.ok(chatJs.includes(`es.addEventListener('${t}'`), `chat.js listens to ${t} itself`);
    // real streams: text, a plan and its update, tools, a subagent with its tool, an error
    const base = off.tusko.url;
    const sid = await newSession(base, uOff);
    const busy = await turn(base, uOff, sid, 'do things #scenario:busy');
    assert.equal(busy.end.state, 'done', JSON.stringify(busy.end));
    const failed = await turn(base, uOff, sid, 'break #scenario:broken');
    assert.equal(failed.end.state, 'failed');
    const replay = await sse(base, `/api/sessions/${sid}/events?turns=5&follow=0`, { headers: uOff.auth, timeoutMs: 10000 });
    assert.equal(replay.status, 200);
    const seen = new Set(replay.events.map((e) => e.event));
    for (const t of ['history', 'turn_start', 'text', 'plan', 'plan_update', 'tool_start', 'tool_end', 'subagent_start', 'subagent_end', 'error', 'turn_end']) assert.ok(seen.has(t), `the streams carry ${t}`);
    for (const t of seen) assert.ok(declared.includes(t), `${t} is declared`);
    // and the reducer folds them into the turns as they ended
    const chat = newChat({ tools: {} });
    for (const e of await events(base, uOff, sid)) fold(chat, { id: e.id, type: e.event, data: e.json });
    assert.deepEqual(
      [...chat.turns.values()].map((t) => t.state),
      ['done', 'failed'],
    );
    const [first] = chat.turns.values();
    assert.deepEqual(
      first.items.map((i) => i.kind),
      ['text', 'plan', 'tool', 'tool', 'text'],
    );
    assert.equal(first.items[3].subagents[0].items[1].name, 'search_chunks');
  });
});
