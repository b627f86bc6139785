// Records the event streams that tests/unit/web/events.test.mjs replays
// through the chat's reducer (web/js/events.js): real turns of a real tusko
// (TUSKO_BUILD's), answered by the scripted model server, stored in a fresh
// Postgres database, and for the sandbox ones run in a real tusko-sandboxd
// (SANDBOX_IMAGE_DIR must name the sandbox image). Each stream is the chat's
// stored events as GET /api/sessions/{id}/events?follow=0 replays them, one
// JSON file per chat in fixtures/ ({about, frames: [{id, event, data}]}).
//
//   make SAN=1 && SANDBOX_IMAGE_DIR=... node tests/unit/web/record.mjs
//
// Run it again when the events change (docs/AGENT.md, "Events") and check the
// unit tests still say what the streams hold.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { api, stopAll } from '../../lib/harness.mjs';
import { events, makeUser, newSession, post, startModels, startTusko, turn, until, untilTurnEnd } from '../../integration/agent/lib.mjs';
import { KEY, startSandboxd } from '../../integration/sandboxd/sbx.mjs';

const OUT = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures');
const delegate = (role, task) => ({ name: 'delegate_subagent', arguments: { role, task } });

const SCENARIOS = {
  words: { steps: [{ text: 'Hello! I am **Tusko**.\n\nI stream my answer a few words at a time, so you can read it while I write.', split: 'words', chunk_delay_ms: 40 }] },
  steps: {
    steps: [
      { text: 'Let me look first.', tool_calls: [{ name: 'list_files', arguments: { path: '/workspace' } }] },
      { text: 'Nothing is there yet.' },
    ],
  },
  plan: {
    steps: [
      { tool_calls: [{ name: 'plan_task', arguments: { goal: 'Write the Q3 summary', milestones: ['Collect the numbers', 'Draft the text', 'Review it'] } }] },
      { tool_calls: [{ name: 'plan_task', arguments: { update: [{ milestone: 1, status: 'done' }] } }] },
      { text: 'One of three is done.' },
    ],
  },
  'plan-next': {
    steps: [
      { tool_calls: [{ name: 'plan_task', arguments: { update: [{ milestone: 2, status: 'done' }] } }] },
      { tool_calls: [{ name: 'plan_task', arguments: { update: [{ milestone: 9, status: 'done' }] } }] },
      { text: 'Two of three are done.' },
    ],
  },
  parallel: {
    steps: [
      { text: 'Two researchers at once.', tool_calls: [delegate('researcher', 'part A #scenario:research-a'), delegate('reviewer', 'part B #scenario:research-b')] },
      { text: 'Both answered.' },
    ],
  },
  'research-a': {
    steps: [
      { text: 'Looking in memory.', tool_calls: [{ name: 'search_chunks', arguments: { query: 'saffron harvest' } }, { name: 'recall_facts', arguments: { entity: 'Saffron' } }], delay_ms: 300 },
      { text: 'Nothing about **saffron**.' },
    ],
  },
  'research-b': {
    steps: [
      { tool_calls: [{ name: 'list_files', arguments: {} }], delay_ms: 300 },
      { text: 'findings B: none' },
    ],
  },
  fail: { steps: [{ text: 'Starting the answer, then', split: 'words', chunk_delay_ms: 30, stream_error: { after: 3, message: 'the model fell over' } }] },
  'fail-first': { steps: [{ error: { status: 500, message: 'the model fell over' } }] },
  slow: { steps: [{ text: Array.from({ length: 40 }, (_, i) => `word${i + 1}`).join(' '), split: 'words', chunk_delay_ms: 120 }] },
  'hang-top': { steps: [{ text: 'Asking a researcher.', tool_calls: [delegate('researcher', 'wait #scenario:hang-child')] }, { text: 'not reached' }] },
  'hang-child': { steps: [{ text: 'Thinking.', tool_calls: [{ name: 'search_chunks', arguments: { query: 'the answer' } }] }, { hang: true }] },
  // sandbox
  'write-run': {
    steps: [
      { text: 'I will write a script and run it.', tool_calls: [{ name: 'write_file', arguments: { path: 'hello.py', content: "import sys\nprint('hello')\nprint('to stderr', file=sys.stderr)\n" } }] },
      { tool_calls: [{ name: 'execute_command', arguments: { command: 'python3 hello.py && echo done' } }] },
      { tool_calls: [{ name: 'execute_code', arguments: { code: 'x = 6 * 7\nprint(x)' } }] },
      { text: 'It said: {{tool_result}}' },
    ],
  },
  'quota-write': {
    steps: [{ tool_calls: [{ name: 'write_file', arguments: { path: 'a.txt', content: 'a' } }] }, { text: 'The write was refused.' }],
  },
};

function save(name, about, frames) {
  fs.mkdirSync(OUT, { recursive: true });
  const data = { about, frames: frames.map((e) => ({ id: e.id, event: e.event, data: e.json })) };
  fs.writeFileSync(path.join(OUT, `${name}.json`), JSON.stringify(data, null, 1) + '\n');
  console.log(`${name}.json: ${frames.length} frames (${[...new Set(frames.map((e) => e.event))].join(', ')})`);
}

const ms = await startModels({ scenarios: SCENARIOS });
try {
  const sandbox = !!process.env.SANDBOX_IMAGE_DIR;
  const sbx = sandbox ? await startSandboxd({ env: { SANDBOX_WARM_POOL_SIZE: '1' } }) : null;
  const env = sbx ? { OPENSANDBOX_URL: sbx.url, OPENSANDBOX_API_KEY: KEY, MAX_SANDBOXES_PER_USER: '2', TUSKO_TOOL_WORKERS: '8' } : {};
  const stack = await startTusko(ms, { env });
  const base = stack.tusko.url;
  const u = makeUser(stack.pg);
  const chat = async (name, about, messages) => {
    const sid = await newSession(base, u);
    for (const m of messages) await turn(base, u, sid, m, {}, { timeoutMs: 60000 });
    save(name, about, await events(base, u, sid));
    return sid;
  };

  await chat('text', 'one answer streamed a few words at a time', ['Say hello #scenario:words']);
  await chat('steps', 'text, a tool call, then text of the next step', ['Look around #scenario:steps']);
  await chat('plan', 'a plan made in one turn and ticked in the next (one update refused: plan_task fails)', ['Plan it #scenario:plan', 'Go on #scenario:plan-next']);
  await chat('parallel', 'two delegate_subagent calls of one answer: two subagents at once, each with its own tool calls', ['Split it #scenario:parallel']);
  await chat('error', 'a turn whose model fails after some text, then one that fails at once', ['This breaks #scenario:fail', 'Again #scenario:fail-first']);

  // cancelled while the text streams
  {
    const sid = await newSession(base, u);
    const r = await post(base, u, sid, 'Take your time #scenario:slow');
    await until(async () => (await events(base, u, sid)).filter((e) => e.event === 'text').length >= 3, { what: 'some text' });
    await api(base, `/api/sessions/${sid}/cancel`, { method: 'POST', headers: u.auth });
    await untilTurnEnd(base, u, sid, r.json.turn_id);
    save('cancel', 'a turn cancelled while its text streams', await events(base, u, sid));
  }
  // cancelled while a subagent runs
  {
    const sid = await newSession(base, u);
    const r = await post(base, u, sid, 'Wait for it #scenario:hang-top');
    await until(() => ms.requests('hang-child').length >= 2, { what: "the subagent's second model call" });
    await api(base, `/api/sessions/${sid}/cancel`, { method: 'POST', headers: u.auth });
    await untilTurnEnd(base, u, sid, r.json.turn_id);
    save('cancel-subagent', 'a turn cancelled while its subagent waits for its model', await events(base, u, sid));
  }

  if (sbx) {
    await chat('sandbox', 'a write, a command with stdout and stderr, Python code: the sandbox started by the first write', ['Write and run it #scenario:write-run']);
    // an upload starts the second chat's sandbox (outside any turn); the third chat is over the quota
    const sid = await newSession(base, u);
    const up = await api(base, `/api/sessions/${sid}/files/upload?path=${encodeURIComponent('/workspace/up.txt')}`, { method: 'PUT', body: 'uploaded\n', headers: { ...u.auth, 'content-type': 'application/octet-stream' } });
    if (up.status !== 200 && up.status !== 201) throw new Error(`upload: ${up.status} ${up.text}`);
    save('upload', 'an upload started the chat’s sandbox: a spawn outside any turn', await until(async () => { const e = await events(base, u, sid); return e.length ? e : null; }, { what: 'the spawn event' }));
    await chat('quota', 'a write over the per-user sandbox quota (MAX_SANDBOXES_PER_USER=2, both taken)', ['Write it #scenario:quota-write']);
    const r = await sbx.api.list('?pageSize=200');
    for (const s of r.json.items || []) await sbx.api.del(s.id);
  }
} finally {
  await stopAll();
  await ms.close();
}
