// The chat's reducer (web/js/events.js) under node, no DOM: real event
// streams recorded from turns of a real tusko (fixtures/, made by record.mjs:
// text streaming, steps, a plan across turns, two subagents at once with
// their own tools, model errors, cancels, the sandbox lane, a quota refusal,
// an upload's spawn), folded whole, resumed with repeats, replayed from the
// middle, and as a page of history; plus the shapes docs/API.md gives that no
// run here makes (a subagent's subagent).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { HANDLED_TYPES, apply, fold, latestTurnId, newChat } from '../../../web/js/events.js';

const DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures');
const frames = (name) => JSON.parse(fs.readFileSync(path.join(DIR, `${name}.json`), 'utf8')).frames.map((f) => ({ id: f.id, type: f.event, data: f.data }));
// the tools as GET /api/agent declares them (the ones these streams use)
const TOOLS = { write_file: { lane: 'sandbox', changes_files: true }, execute_command: { lane: 'sandbox', changes_files: true }, execute_code: { lane: 'sandbox', changes_files: true }, list_files: { lane: 'fast', changes_files: false } };

function run(fs, opts = { tools: TOOLS }) {
  const chat = newChat(opts);
  const changes = fs.flatMap((f) => fold(chat, f));
  return { chat, changes, turns: [...chat.turns.values()] };
}

// The state as plain data, to compare and to read in a failure.
function plain(x) {
  if (x.kind === 'chat') return { items: x.items.map(plain), plan: x.plan && x.plan.milestones.map((m) => m.status), active: x.active && x.active.id, lastSeq: x.lastSeq };
  if (x.kind === 'turn') return { turn: x.id, content: x.content, started: x.started, state: x.state, items: x.items.map(plain) };
  if (x.kind === 'text') return { text: x.text, step: x.step };
  if (x.kind === 'tool') return { tool: x.name, lane: x.lane, status: x.status, output: x.output.map((o) => `${o.stream}:${o.text}`), subagents: x.subagents.map(plain), quota: x.quota && x.quota.code };
  if (x.kind === 'subagent') return { subagent: x.role, state: x.state, task: x.task, items: x.items.map(plain) };
  if (x.kind === 'plan') return { plan: x.goal, milestones: x.milestones.map((m) => m.status) };
  if (x.kind === 'error') return { error: x.ev.code, message: x.ev.message, retry: x.retry };
  return { [x.kind]: x.ev.trigger || x.ev.reason || '' };
}

const kinds = (run) => run.items.map((i) => i.kind);
// a fast-lane call that ended well, as plain() shows it
const fastOk = (tool, subagents = []) => ({ tool, lane: 'fast', status: 'ok', output: [], subagents, quota: null });
const ops = (changes, op) => changes.filter((c) => c.op === op);

describe('a turn streams its text', () => {
  const fr = frames('text');
  const { chat, changes, turns } = run(fr);
  const deltas = fr.filter((f) => f.type === 'text').map((f) => f.data.delta);

  test('the deltas are one segment holding the whole answer', () => {
    assert.ok(deltas.length > 5, `streamed in ${deltas.length} deltas`);
    assert.equal(turns.length, 1);
    const [t] = turns;
    assert.deepEqual(kinds(t), ['text']);
    assert.equal(t.items[0].text, deltas.join(''));
    assert.equal(t.items[0].text, 'Hello! I am **Tusko**.\n\nI stream my answer a few words at a time, so you can read it while I write.');
    assert.equal(t.content, 'Say hello #scenario:words');
    assert.equal(t.state, 'done');
    assert.equal(t.duration_ms, fr.at(-1).data.duration_ms);
  });

  test('what changed, in order: the turn, its user message, live, the segment, its growth, the end', () => {
    assert.deepEqual(changes.slice(0, 3).map((c) => c.op), ['add', 'start', 'active']);
    assert.equal(changes[0].into, chat);
    assert.equal(changes[2].turn, turns[0]);
    const seg = turns[0].items[0];
    assert.equal(ops(changes, 'add').filter((c) => c.item === seg).length, 1, 'the segment is added once');
    assert.equal(changes.filter((c) => c.op === 'update' && c.item === seg).length, deltas.length, 'and updated by every delta');
    const end = changes.at(-1);
    assert.equal(end.op, 'end');
    assert.equal(end.turn, turns[0]);
    assert.equal(end.wasActive, true);
    assert.equal(end.ev.state, 'done');
    assert.deepEqual(changes.at(-2), { op: 'active', turn: null });
    assert.equal(chat.active, null);
    assert.equal(ops(changes, 'files').length, 0, 'no tool changed files');
  });

  test('latestTurnId is the newest turn', () => {
    assert.equal(latestTurnId(chat), turns[0].id);
    assert.equal(latestTurnId(newChat()), undefined);
  });
});

test('text, a tool call, then the next step: two segments around the card', () => {
  const { turns, changes } = run(frames('steps'));
  const [t] = turns;
  assert.deepEqual(plain(t).items, [
    { text: 'Let me look first.', step: 1 },
    fastOk('list_files'),
    { text: 'Nothing is there yet.', step: 2 },
  ]);
  assert.match(t.items[1].end.result, /^nothing here yet/);
  assert.deepEqual(t.items[1].arguments, { path: '/workspace' });
  assert.equal(ops(changes, 'files').length, 0, 'list_files changes no files');
});

describe('a plan made in one turn and ticked in the next', () => {
  const { chat, turns } = run(frames('plan'));
  const [first, second] = turns;

  test("the plan card stands for plan_task's calls; the next turn's updates tick the same card", () => {
    assert.deepEqual(kinds(first), ['plan', 'text']);
    assert.equal(chat.plan, first.items[0]);
    assert.equal(chat.plan.goal, 'Write the Q3 summary');
    assert.deepEqual(
      chat.plan.milestones.map((m) => [m.title, m.status]),
      [
        ['Collect the numbers', 'done'],
        ['Draft the text', 'done'],
        ['Review it', 'in_progress'],
      ],
    );
    assert.ok(!second.items.some((i) => i.kind === 'plan'), 'no second card');
  });

  test('a plan_task call that fails shows its card (where it ended)', () => {
    assert.deepEqual(kinds(second), ['tool', 'text']);
    const [card] = second.items;
    assert.equal(card.name, 'plan_task');
    assert.equal(card.status, 'failed');
    assert.match(card.end.result, /each update needs "milestone"/);
    const hidden = [...second.cards.values()].filter((c) => c.hidden);
    assert.equal(hidden.length, 1, 'the call that worked stays hidden');
    assert.equal(hidden[0].status, 'ok');
  });

  test('the plan is ticked step by step', () => {
    const chat2 = newChat();
    const seen = [];
    for (const f of frames('plan')) if (fold(chat2, f).some((c) => c.op === 'update' && c.item.kind === 'plan')) seen.push(chat2.plan.milestones.map((m) => m.status).join(','));
    assert.deepEqual(seen, ['in_progress,pending,pending', 'done,in_progress,pending', 'done,done,in_progress']);
  });
});

describe('two subagents at once, each with its own tool calls', () => {
  const fr = frames('parallel');
  const { turns, changes } = run(fr);
  const [t] = turns;

  test('their events interleave in the stream', () => {
    const who = fr.filter((f) => f.data.subagent_id).map((f) => f.data.agent);
    const firstB = who.indexOf('reviewer');
    assert.ok(firstB > 0 && who.lastIndexOf('researcher') > firstB, who.join(' '));
  });

  test('each is nested in the card of its delegate_subagent call, with its text and tools', () => {
    assert.deepEqual(plain(t).items, [
      { text: 'Two researchers at once.', step: 1 },
      fastOk('delegate_subagent', [
        {
          subagent: 'researcher',
          state: 'done',
          task: 'part A #scenario:research-a',
          items: [{ text: 'Looking in memory.', step: 1 }, fastOk('search_chunks'), fastOk('recall_facts'), { text: 'Nothing about **saffron**.', step: 2 }],
        },
      ]),
      fastOk('delegate_subagent', [{ subagent: 'reviewer', state: 'done', task: 'part B #scenario:research-b', items: [fastOk('list_files'), { text: 'findings B: none', step: 2 }] }]),
      { text: 'Both answered.', step: 2 },
    ]);
  });

  test("a subagent's facts and its end; its text is not the answer's", () => {
    const [a, b] = [t.items[1].subagents[0], t.items[2].subagents[0]];
    assert.equal(a.model, 'openai:gpt-4o-mini');
    assert.ok(a.max_steps > 0);
    assert.equal(a.depth, 1);
    assert.equal(a.end.steps, 2);
    assert.equal(a.end.tool_calls, 2);
    assert.equal(b.end.tool_calls, 1);
    assert.equal(a.items[1].agent, 'researcher', 'a nested card knows its agent');
    assert.equal(t.items[1].agent, undefined, "the turn's own do not");
    const answer = t.items.filter((i) => i.kind === 'text').map((i) => i.text);
    assert.deepEqual(answer, ['Two researchers at once.', 'Both answered.']);
    // placed in the cards, not the turn
    const subAdds = ops(changes, 'add').filter((c) => c.item.kind === 'subagent');
    assert.deepEqual(
      subAdds.map((c) => c.into),
      [t.items[1], t.items[2]],
    );
  });
});

describe('errors', () => {
  const { turns, changes } = run(frames('error'));
  const [midway, atOnce] = turns;

  test('a model that fails mid-stream: the text kept, then the error with a retry', () => {
    assert.equal(midway.state, 'failed');
    assert.deepEqual(plain(midway).items, [
      { text: 'Starting the answer,', step: 1 },
      { error: 'MODEL_PROVIDER_ERROR', message: 'the provider reported an error mid-stream: server_error: the model fell over', retry: 'This breaks #scenario:fail' },
    ]);
  });

  test('a model that fails at once: only the error (the reason is the turn_end’s)', () => {
    assert.equal(atOnce.state, 'failed');
    assert.deepEqual(plain(atOnce).items, [{ error: 'MODEL_PROVIDER_ERROR', message: 'the provider answered HTTP 500: server_error: the model fell over', retry: 'Again #scenario:fail-first' }]);
    assert.equal(atOnce.error.code, 'MODEL_PROVIDER_ERROR', 'the error event is kept on the turn');
  });

  test('the error shows once, even if the end repeats', () => {
    const end = frames('error').at(-1);
    const chat = run(frames('error')).chat;
    apply(chat, 'turn_end', end.data);
    assert.equal(chat.turns.get(end.data.turn_id).items.filter((i) => i.kind === 'error').length, 1);
    assert.equal(ops(changes, 'end').length, 2);
  });

  test("an error's message falls back to the error event's when turn_end has none", () => {
    const chat = newChat();
    apply(chat, 'turn_start', { turn_id: 't1', content: 'hi' });
    apply(chat, 'error', { turn_id: 't1', code: 'TURN_TIMEOUT', message: 'the turn took longer than 600 s' });
    assert.equal(chat.turns.get('t1').items.length, 0, 'not shown until the turn ends');
    apply(chat, 'turn_end', { turn_id: 't1', state: 'failed', error_code: 'TURN_TIMEOUT' });
    assert.deepEqual(plain(chat.turns.get('t1')).items, [{ error: 'TURN_TIMEOUT', message: 'the turn took longer than 600 s', retry: 'hi' }]);
  });

  test('an error in a turn that then ends well is not shown', () => {
    const chat = newChat();
    apply(chat, 'turn_start', { turn_id: 't1', content: 'hi' });
    apply(chat, 'error', { turn_id: 't1', code: 'MODEL_RATE_LIMITED', message: 'retrying' });
    apply(chat, 'turn_end', { turn_id: 't1', state: 'done' });
    assert.deepEqual(chat.turns.get('t1').items, []);
  });
});

describe('cancel', () => {
  test('while the text streams: what was streamed stays, the turn is stopped', () => {
    const { turns, changes } = run(frames('cancel'));
    const [t] = turns;
    assert.equal(t.state, 'cancelled');
    assert.deepEqual(plain(t).items, [{ text: 'word1 word2 word3', step: 1 }]);
    assert.equal(ops(changes, 'end')[0].wasActive, true);
  });

  test('while a subagent waits for its model: the subagent and its call are stopped', () => {
    const { turns } = run(frames('cancel-subagent'));
    const [t] = turns;
    assert.equal(t.state, 'cancelled');
    const card = t.items[1];
    assert.equal(card.status, 'failed');
    assert.match(card.end.result, /^stopped: the turn was cancelled \(the researcher subagent was interrupted\)/);
    const [sub] = card.subagents;
    assert.equal(sub.state, 'cancelled');
    assert.deepEqual(plain(sub).items, [
      { text: 'Thinking.', step: 1 },
      fastOk('search_chunks'),
    ]);
  });

  test('calls and subagents still running when a turn ends are ended with it', () => {
    const fr = frames('cancel-subagent').filter((f) => !['subagent_end', 'tool_end'].includes(f.type) || f.data.name === 'search_chunks');
    const { turns } = run(fr);
    const card = turns[0].items[1];
    assert.equal(card.status, 'failed');
    assert.deepEqual(card.end, { ok: false, result: 'stopped' });
    assert.equal(card.subagents[0].state, 'cancelled');
    // a failed turn: "not finished"; a subagent of a turn that ended well: failed
    const chat = newChat();
    apply(chat, 'tool_start', { turn_id: 't', call_id: 'c1', name: 'web_fetch', lane: 'fast' });
    apply(chat, 'subagent_start', { turn_id: 't', subagent_id: 's', parent_call_id: 'nope', agent: 'coder', depth: 1, task: 'x' });
    apply(chat, 'turn_end', { turn_id: 't', state: 'failed' });
    assert.deepEqual(chat.turns.get('t').cards.get('c1').end, { ok: false, result: 'not finished' });
    const chat2 = newChat();
    apply(chat2, 'subagent_start', { turn_id: 't', subagent_id: 's', parent_call_id: 'nope', agent: 'coder', depth: 1, task: 'x' });
    apply(chat2, 'turn_end', { turn_id: 't', state: 'done' });
    assert.equal(chat2.turns.get('t').subagents.get('s').state, 'failed');
  });
});

describe('the sandbox lane', () => {
  test('the spawn notice above the call that waited for it; stdout and stderr apart; three calls changed files', () => {
    const { turns, changes } = run(frames('sandbox'));
    const [t] = turns;
    assert.deepEqual(kinds(t), ['text', 'spawn', 'tool', 'tool', 'tool', 'text']);
    assert.equal(t.items[1].ev.trigger, 'first write to /workspace this session');
    assert.equal(t.items[2].name, 'write_file');
    const spawnAdd = ops(changes, 'add').find((c) => c.item.kind === 'spawn');
    assert.equal(spawnAdd.before, t.items[2], 'inserted before the write_file card');
    // (the order of stdout and stderr lines is the order they were read in)
    const lines = frames('sandbox').filter((f) => f.type === 'tool_output' && f.data.name === 'execute_command');
    assert.deepEqual(lines.map((f) => f.data.text).sort(), ['done\n', 'hello\n', 'to stderr\n']);
    const pieces = lines.reduce((acc, f) => (acc.length && acc.at(-1).stream === f.data.stream ? (acc.at(-1).text += f.data.text) : acc.push({ stream: f.data.stream, text: f.data.text }), acc), []);
    assert.ok(pieces.length >= 2, 'stdout and stderr apart');
    assert.deepEqual(t.items[3].output, pieces, 'a piece per run of lines of one stream');
    assert.equal(t.items[3].end.exit_code, 0);
    assert.deepEqual(t.items[4].output, [{ stream: 'stdout', text: '42\n' }]);
    assert.equal(t.items.at(-1).text, 'It said: ok\n42\n');
    assert.equal(ops(changes, 'files').length, 3, 'write_file, execute_command and execute_code ended well');
    // the text after the spawn notice is still the segment it was (the notice went above a card)
    assert.equal(t.items[0].text, 'I will write a script and run it.');
  });

  test("a piece of output that does not end a line is one (code output as the kernel wrote it)", () => {
    const chat = newChat();
    apply(chat, 'tool_start', { turn_id: 't', call_id: 'c', name: 'execute_code', lane: 'sandbox' });
    apply(chat, 'tool_output', { turn_id: 't', call_id: 'c', stream: 'stdout', text: 'no newline' });
    apply(chat, 'tool_output', { turn_id: 't', call_id: 'c', stream: 'result', text: 'a result' });
    apply(chat, 'tool_output', { turn_id: 't', call_id: 'nope', stream: 'stdout', text: 'lost' });
    assert.deepEqual(chat.turns.get('t').cards.get('c').output, [{ stream: 'stdout', text: 'no newline\na result\n' }]);
  });

  test('which tools change files is what the server declares: none declared, none refresh', () => {
    const { changes } = run(frames('sandbox'), { tools: {} });
    assert.equal(ops(changes, 'files').length, 0);
    const { changes: proto } = run(frames('sandbox'), { tools: Object.create({ write_file: { changes_files: true } }) });
    assert.equal(ops(proto, 'files').length, 0, 'only its own entries count');
  });

  test('a quota refusal is shown on the call it refused, which fails', () => {
    const { turns } = run(frames('quota'));
    const [t] = turns;
    assert.deepEqual(kinds(t), ['tool', 'text']);
    assert.equal(t.items[0].status, 'failed');
    assert.equal(t.items[0].quota.code, 'SANDBOX_QUOTA');
    assert.equal(t.items[0].quota.http_status, 429);
    assert.equal(t.state, 'done');
  });

  test('a quota refusal with no call to show it on is a card of its own', () => {
    const chat = newChat();
    apply(chat, 'turn_start', { turn_id: 't', content: 'x' });
    apply(chat, 'text', { turn_id: 't', step: 1, delta: 'a' });
    apply(chat, 'error', { turn_id: 't', code: 'SANDBOX_QUOTA', message: 'quota' });
    apply(chat, 'text', { turn_id: 't', step: 1, delta: 'b' });
    assert.deepEqual(plain(chat.turns.get('t')).items, [{ text: 'a', step: 1 }, { error: 'SANDBOX_QUOTA', message: 'quota', retry: null }, { text: 'b', step: 1 }]);
  });

  test("the browser's spawn goes above its call, and its quota refusal on the call", () => {
    const chat = newChat();
    apply(chat, 'turn_start', { turn_id: 't', content: 'x' });
    apply(chat, 'tool_start', { turn_id: 't', call_id: 'c1', name: 'browser_navigate', lane: 'browser' });
    apply(chat, 'browser_spawn', { turn_id: 't', call_id: 'c1', tier: 'browser', pool: 'warm', quota: '1 of 2 live per user' });
    apply(chat, 'tool_end', { turn_id: 't', call_id: 'c1', name: 'browser_navigate', lane: 'browser', ok: true });
    apply(chat, 'tool_start', { turn_id: 't', call_id: 'c2', name: 'browser_navigate', lane: 'browser' });
    apply(chat, 'error', { turn_id: 't', call_id: 'c2', code: 'BROWSER_QUOTA', http_status: 429, message: 'quota' });
    apply(chat, 'tool_end', { turn_id: 't', call_id: 'c2', name: 'browser_navigate', lane: 'browser', ok: false });
    const t = chat.turns.get('t');
    assert.deepEqual(kinds(t), ['spawn', 'tool', 'tool']);
    assert.equal(t.items[0].ev.tier, 'browser');
    assert.equal(t.items[2].quota.code, 'BROWSER_QUOTA');
    assert.equal(t.items[2].status, 'failed');
    assert.equal(t.error, null, 'a quota refusal is not the turn failing');
  });

  test("an upload's spawn, outside any turn, is a notice in the chat", () => {
    const { chat, changes } = run(frames('upload'));
    assert.equal(chat.turns.size, 0);
    assert.deepEqual(plain(chat).items, [{ spawn: 'file upload to /workspace' }]);
    assert.equal(changes[0].into, chat);
  });
});

describe('resume and replay', () => {
  const ALL = ['text', 'steps', 'plan', 'parallel', 'error', 'cancel', 'cancel-subagent', 'sandbox', 'quota', 'upload'];

  test('a stream resumed with repeats (Last-Event-ID behind what was seen) ends in the same state', () => {
    for (const name of ALL) {
      const fr = frames(name);
      const whole = run(fr).chat;
      for (const cut of [1, Math.floor(fr.length / 2), fr.length - 1]) {
        const chat = newChat({ tools: TOOLS });
        for (const f of fr.slice(0, cut)) fold(chat, f);
        // the reconnect sends some of them again, then the rest
        const again = fr.slice(Math.max(0, cut - 3)).flatMap((f) => fold(chat, f));
        assert.deepEqual(plain(chat), plain(whole), `${name} cut at ${cut}`);
        assert.ok(!again.some((c) => c.op === 'add' && fr.slice(0, cut).some((f) => f.data === c.item.ev)), `${name}: nothing seen is added again`);
      }
    }
  });

  test('repeated frames change nothing', () => {
    const fr = frames('parallel');
    const chat = newChat();
    for (const f of fr) fold(chat, f);
    for (const f of fr) assert.deepEqual(fold(chat, f), [], `frame ${f.id}`);
  });

  test('a replay that starts in the middle of a turn (no turn_start): the turn from what is there', () => {
    const fr = frames('sandbox');
    const at = fr.findIndex((f) => f.type === 'tool_output');
    const { chat, turns, changes } = run(fr.slice(at));
    const [t] = turns;
    assert.equal(t.started, false, 'its user message is not known');
    assert.equal(t.content, '');
    assert.equal(chat.active, null, 'not made the live turn');
    assert.deepEqual(kinds(t), ['tool', 'text'], 'output of a call not seen starting is dropped; what follows is shown');
    assert.equal(t.state, 'done');
    assert.equal(ops(changes, 'end')[0].wasActive, false);
  });

  test('a turn seen first by its events gets its user message when turn_start comes', () => {
    const chat = newChat();
    apply(chat, 'text', { turn_id: 't', step: 1, delta: 'hi' });
    const c = apply(chat, 'turn_start', { turn_id: 't', content: 'question' });
    assert.deepEqual(
      c.map((x) => x.op),
      ['start', 'active'],
    );
    assert.equal(chat.items.length, 1, 'the same turn');
    assert.deepEqual(apply(chat, 'turn_start', { turn_id: 't', content: 'question' }), [], 'a second turn_start is nothing');
  });

  test('a page of history: the same turns, nothing live (no active turn, no end, no files)', () => {
    const fr = frames('sandbox');
    const live = run(fr).chat;
    const page = run(fr, { tools: TOOLS, history: true });
    assert.deepEqual(plain(page.chat).items, plain(live).items);
    assert.equal(page.chat.active, null);
    assert.deepEqual(
      page.changes.filter((c) => ['active', 'end', 'files'].includes(c.op)),
      [],
    );
    // events with no turn go to the live turn, and in a page nowhere
    const chat = newChat();
    apply(chat, 'turn_start', { turn_id: 't', content: 'x' });
    apply(chat, 'text', { step: 1, delta: 'to the live turn' });
    assert.equal(chat.turns.get('t').items[0].text, 'to the live turn');
    const hist = newChat({ history: true });
    apply(hist, 'turn_start', { turn_id: 't', content: 'x' });
    assert.deepEqual(apply(hist, 'text', { step: 1, delta: 'dropped' }), []);
  });

  test('types it does not know change nothing', () => {
    const chat = newChat();
    apply(chat, 'turn_start', { turn_id: 't', content: 'x' });
    assert.deepEqual(apply(chat, 'browser_frame', { turn_id: 't', jpeg: '…' }), []);
    assert.deepEqual(apply(chat, 'history', { earlier: true, before: 3 }), []);
  });
});

test("a subagent's subagent (docs/API.md: parent_subagent_id) nests in its parent's call; unknown parents go to the turn", () => {
  const chat = newChat();
  const tag = (sid, pcid, extra = {}) => ({ turn_id: 't', agent: 'researcher', subagent_id: sid, parent_call_id: pcid, depth: 1, ...extra });
  apply(chat, 'turn_start', { turn_id: 't', content: 'x' });
  apply(chat, 'tool_start', { turn_id: 't', call_id: 'c1', name: 'delegate_subagent', lane: 'fast' });
  apply(chat, 'subagent_start', tag('s1', 'c1', { task: 'outer', model: 'm', max_steps: 8 }));
  apply(chat, 'tool_start', tag('s1', 'c1', { call_id: 'c1', name: 'delegate_subagent', lane: 'fast' }));
  apply(chat, 'subagent_start', tag('s2', 'c1', { parent_subagent_id: 's1', depth: 2, agent: 'coder', task: 'inner' }));
  apply(chat, 'text', tag('s2', 'c1', { parent_subagent_id: 's1', depth: 2, agent: 'coder', step: 1, delta: 'deep' }));
  apply(chat, 'sandbox_spawn', tag('s2', 'c1', { parent_subagent_id: 's1', depth: 2, call_id: 'zz', trigger: 'first command this session' }));
  apply(chat, 'text', tag('s3', 'nope', { step: 1, delta: 'orphan' }));
  const t = chat.turns.get('t');
  const outer = t.items[0].subagents[0];
  assert.equal(outer.task, 'outer');
  const inner = outer.items[0].subagents[0];
  assert.equal(inner.role, 'coder');
  assert.equal(inner.depth, 2);
  assert.deepEqual(plain(inner).items, [{ text: 'deep', step: 1 }, { spawn: 'first command this session' }]);
  assert.equal(t.items[1].kind, 'subagent', 'a subagent whose call is unknown is shown in the turn');
  assert.equal(t.items[1].items[0].text, 'orphan');
});

test('a subagent that failed: its error and end; a new segment after', () => {
  const chat = newChat();
  const tag = (extra) => ({ turn_id: 't', agent: 'researcher', subagent_id: 's', parent_call_id: 'c', depth: 1, ...extra });
  apply(chat, 'tool_start', { turn_id: 't', call_id: 'c', name: 'delegate_subagent', lane: 'fast' });
  apply(chat, 'text', tag({ step: 1, delta: 'a' }));
  apply(chat, 'error', tag({ code: 'MODEL_TIMEOUT', message: 'slow' }));
  apply(chat, 'subagent_end', tag({ state: 'failed', error: 'the model timed out', steps: 1 }));
  apply(chat, 'subagent_end', tag({ state: 'done' }));
  const sub = chat.turns.get('t').subagents.get('s');
  assert.deepEqual(plain(sub), { subagent: 'researcher', state: 'failed', task: undefined, items: [{ text: 'a', step: 1 }, { error: 'MODEL_TIMEOUT', message: 'slow', retry: null }] });
  assert.equal(sub.end.error, 'the model timed out', 'the first end counts');
});

test('every type HANDLED_TYPES names is read: one event of it changes the state', () => {
  // (the server's declared types are checked against this list: tests/integration/agent/catalog.test.mjs)
  const sub = { turn_id: 't', agent: 'coder', subagent_id: 's', parent_call_id: 'c', depth: 1 };
  const setup = () => {
    const chat = newChat();
    apply(chat, 'tool_start', { turn_id: 't', call_id: 'c', name: 'delegate_subagent', lane: 'fast' });
    return chat;
  };
  const one = {
    turn_start: { turn_id: 't2', content: 'x' },
    text: { turn_id: 't', step: 1, delta: 'a' },
    plan: { turn_id: 't', goal: 'g', milestones: [] },
    plan_update: { turn_id: 't', goal: 'g', milestones: [] },
    tool_start: { turn_id: 't', call_id: 'c2', name: 'list_files', lane: 'fast' },
    tool_output: { turn_id: 't', call_id: 'c', stream: 'stdout', text: 'x' },
    tool_end: { turn_id: 't', call_id: 'c', ok: true },
    sandbox_spawn: { turn_id: 't', call_id: 'c', trigger: 'x' },
    sandbox_gone: { turn_id: 't', reason: 'reaped' },
    browser_spawn: { turn_id: 't', call_id: 'c', tier: 'browser', trigger: 'first browse this session' },
    error: { turn_id: 't', code: 'MODEL_TIMEOUT', message: 'slow' },
    subagent_start: { ...sub, task: 'x' },
    subagent_end: { ...sub, state: 'done' },
    turn_end: { turn_id: 't', state: 'done' },
  };
  const snap = (chat) => JSON.stringify(chat, (k, v) => (v instanceof Map ? [...v] : k === 'tools' ? undefined : v));
  assert.deepEqual(Object.keys(one).sort(), [...HANDLED_TYPES].sort());
  for (const type of HANDLED_TYPES) {
    const chat = setup();
    const before = snap(chat);
    apply(chat, type, one[type]);
    assert.notEqual(snap(chat), before, type);
  }
  const chat = setup();
  const before = snap(chat);
  apply(chat, 'no_such_type', { turn_id: 't' });
  assert.equal(snap(chat), before);
});
