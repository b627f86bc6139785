// The chat as data: one reducer for a session's event stream (docs/AGENT.md,
// "Events"; a subagent's events: docs/API.md, "Subagent events"). Plain data
// in, state out: no DOM here, so it runs (and is tested) under node too
// (tests/unit/web/events.test.mjs).
//
//   const chat = newChat({ tools });        // tools: GET /api/agent's, by name
//   const changes = fold(chat, { id: '42', type: 'text', data: {...} });
//
// fold() skips an event already seen (by its seq: a resumed stream may repeat
// one) and applies the others with apply(), which updates the state and says
// what changed, for the views (chat.js) to draw:
//
//   { op: 'add', into, item, before? }  item is new in container into (the chat,
//                                       a turn, a subagent, or a tool call for the
//                                       subagents it started), before the item
//                                       `before` when given, else at the end
//   { op: 'update', item }              item changed (text grew, a tool ended…)
//   { op: 'start', turn }               the turn's user message is known
//   { op: 'active', turn }              the turn running live now (null: none)
//   { op: 'files' }                     a tool that changes files ended well
//   { op: 'end', turn, ev }             the turn ended (ev: its turn_end)
//
// The state: chat {turns: Map id → turn, items (session notices and turns, in
// order), plan, active, lastSeq}. A turn and a subagent are runs: {items, …}
// whose items are, in the order they are shown:
//   text      {step, text}                          a segment of the run's text
//   plan      {goal, milestones}                    the chat's current plan
//   tool      {call_id, name, lane, arguments, agent, output [{stream, text}],
//              status running|ok|failed, end (its tool_end), quota, subagents}
//   subagent  {id, role, depth, model, max_steps, task, items, state, end}
//   spawn, gone  {ev}                               sandbox and browser notices
//   error     {ev, retry}                           retry: the text to send again
// A turn: {id, content, started, state running|done|cancelled|failed,
// duration_ms, error (the last error event, shown if the turn fails)}.

// The event types apply() reads (the server declares the types it sends: GET
// /api/agent; a test checks each one is read here, or is "history" or
// "stream_closed", which the stream's reader takes itself).
export const HANDLED_TYPES = ['turn_start', 'text', 'plan', 'plan_update', 'tool_start', 'tool_output', 'tool_end', 'sandbox_spawn', 'sandbox_gone', 'browser_spawn', 'error', 'subagent_start', 'subagent_end', 'turn_end'];

// A chat's state. tools: {name: {lane, changes_files}} as the server declares
// them; history: a page of earlier turns (nothing in it is live: no active
// turn, events without a turn are dropped).
export function newChat({ tools = {}, history = false } = {}) {
  return { kind: 'chat', turns: new Map(), items: [], plan: null, active: null, lastSeq: 0, tools, history };
}

// Applies one frame of the stream ({id: seq as text or number, type, data}) unless
// its seq was seen; frames without an id (none are stored) always apply.
export function fold(chat, { id, type, data }) {
  const seq = Number(id);
  if (seq && seq <= chat.lastSeq) return [];
  if (seq) chat.lastSeq = seq;
  return apply(chat, type || (data && data.type), data || {});
}

// The id of the newest turn shown (the trace opens it first), or undefined.
export function latestTurnId(chat) {
  return [...chat.turns.keys()].pop();
}

function newTurn(id) {
  return { kind: 'turn', id, content: '', started: false, state: 'running', duration_ms: undefined, items: [], seg: null, error: null, errorShown: false, cards: new Map(), subagents: new Map() };
}

// The turn an event belongs to (made when first seen: a stream resumed in the
// middle of a turn has no turn_start for it); without a turn id, the live one.
function turnFor(chat, id, out) {
  if (!id) return chat.history ? null : chat.active;
  let t = chat.turns.get(id);
  if (!t) {
    t = newTurn(id);
    chat.turns.set(id, t);
    chat.items.push(t);
    out.push({ op: 'add', into: chat, item: t });
  }
  return t;
}

// An item at the end of a run; the run's next text starts a new segment.
function add(run, item, out) {
  run.items.push(item);
  run.seg = null;
  out.push({ op: 'add', into: run, item });
  return item;
}

// A notice shown above the tool call it belongs to (the call waited for it),
// or at the end of the run when that call is not shown.
function addAbove(run, card, item, out) {
  const i = card ? run.items.indexOf(card) : -1;
  if (i < 0) return add(run, item, out);
  run.items.splice(i, 0, item);
  out.push({ op: 'add', into: run, item, before: card });
  return item;
}

function appendText(run, delta, step, out) {
  if (!run.seg || run.seg.step !== step) {
    const seg = { kind: 'text', step, text: '' };
    run.items.push(seg);
    run.seg = seg;
    out.push({ op: 'add', into: run, item: seg });
  }
  run.seg.text += delta;
  out.push({ op: 'update', item: run.seg });
}

function newTool(ev, agent) {
  return { kind: 'tool', call_id: ev.call_id, name: ev.name || 'tool', lane: ev.lane, arguments: ev.arguments, agent, output: [], status: 'running', end: null, quota: null, subagents: [], hidden: false };
}

// a command's output arrives a line at a time with its newline; code output
// as the kernel wrote it (which may not end a line): each piece is a line
function toolOutput(card, ev, out) {
  const stream = ev.stream === 'stderr' ? 'stderr' : 'stdout';
  let text = ev.text || '';
  if (!text.endsWith('\n')) text += '\n';
  const last = card.output[card.output.length - 1];
  if (last && last.stream === stream) last.text += text;
  else card.output.push({ stream, text });
  out.push({ op: 'update', item: card });
}

// A tool call's end (the first one counts).
function toolEnd(card, ev, out) {
  if (card.end) return;
  card.end = ev;
  card.status = ev.ok !== false ? 'ok' : 'failed';
  out.push({ op: 'update', item: card });
}

function changesFiles(chat, ev) {
  const t = Object.hasOwn(chat.tools, ev.name || '') ? chat.tools[ev.name] : null;
  return ev.ok !== false && !!(t && t.changes_files) && !chat.history;
}

function subagentStart(sub, ev) {
  sub.model = ev.model;
  sub.max_steps = ev.max_steps;
  if (ev.task) sub.task = ev.task;
}

function subagentEnd(sub, ev, out) {
  if (sub.end) return;
  sub.end = ev;
  sub.state = ev.state || 'done';
  if (sub.state !== 'done' && ev.error) sub.seg = null; // (its view shows the error last)
  out.push({ op: 'update', item: sub });
}

// Applies one event (its type, its data) and returns what changed.
export function apply(chat, type, ev) {
  const out = [];
  if (type === 'turn_start') {
    turnStart(chat, ev, out);
    return out;
  }
  if (!ev.turn_id && (type === 'sandbox_spawn' || type === 'sandbox_gone')) {
    // outside any turn (an upload started the sandbox): a notice in the chat
    const item = { kind: type === 'sandbox_spawn' ? 'spawn' : 'gone', ev };
    chat.items.push(item);
    out.push({ op: 'add', into: chat, item });
    return out;
  }
  const t = turnFor(chat, ev.turn_id, out);
  if (!t) return out;
  // a subagent's events go into its run, nested in the card of the call that
  // started it (parent_call_id)
  if (ev.subagent_id) {
    nested(chat, t, type, ev, out);
    return out;
  }
  switch (type) {
    case 'text':
      appendText(t, ev.delta || '', ev.step, out);
      break;
    case 'plan':
      chat.plan = add(t, { kind: 'plan', goal: ev.goal, milestones: ev.milestones || [] }, out);
      out.push({ op: 'update', item: chat.plan });
      break;
    case 'plan_update':
      // the chat's plan lives across turns: an update ticks the card it is on
      if (!chat.plan) chat.plan = add(t, { kind: 'plan', goal: undefined, milestones: [] }, out);
      chat.plan.goal = ev.goal;
      chat.plan.milestones = ev.milestones || [];
      out.push({ op: 'update', item: chat.plan });
      break;
    case 'tool_start': {
      const card = newTool(ev, ev.agent || undefined);
      t.cards.set(ev.call_id, card);
      // the plan card stands for plan_task; its tool card shows only on failure
      if (ev.name === 'plan_task') card.hidden = true;
      else add(t, card, out);
      break;
    }
    case 'tool_output': {
      const card = t.cards.get(ev.call_id);
      if (card) toolOutput(card, ev, out);
      break;
    }
    case 'tool_end': {
      const card = t.cards.get(ev.call_id);
      if (card) toolEnd(card, ev, out);
      if (card && card.hidden && card.status === 'failed') {
        card.hidden = false;
        add(t, card, out);
      }
      if (changesFiles(chat, ev)) out.push({ op: 'files' });
      break;
    }
    case 'sandbox_spawn':
    case 'browser_spawn': {
      const card = ev.call_id ? t.cards.get(ev.call_id) : null;
      addAbove(t, card, { kind: 'spawn', ev }, out);
      break;
    }
    case 'sandbox_gone':
      add(t, { kind: 'gone', ev }, out);
      break;
    case 'error': {
      if (ev.code !== 'SANDBOX_QUOTA' && ev.code !== 'BROWSER_QUOTA') {
        t.error = ev; // shown with the turn's end (with a retry)
        break;
      }
      // a quota refusal: on the tool call it refused, else on its own
      const card = ev.call_id ? t.cards.get(ev.call_id) : null;
      if (card) card.quota = ev;
      else add(t, { kind: 'error', ev, retry: null }, out);
      break;
    }
    case 'turn_end':
      turnEnd(chat, t, ev, out);
      break;
    default:
      break;
  }
  return out;
}

function turnStart(chat, ev, out) {
  const existing = chat.turns.get(ev.turn_id);
  if (existing && existing.started) return;
  const t = existing || turnFor(chat, ev.turn_id, out);
  if (!t) return;
  t.started = true;
  t.content = ev.content || '';
  out.push({ op: 'start', turn: t });
  if (!chat.history && t.state === 'running') {
    chat.active = t;
    out.push({ op: 'active', turn: t });
  }
}

function turnEnd(chat, t, ev, out) {
  t.state = ev.state || 'done';
  t.duration_ms = ev.duration_ms;
  if (t.state === 'failed' && !t.errorShown) {
    t.errorShown = true;
    add(t, { kind: 'error', ev: { code: ev.error_code, message: ev.error || (t.error && t.error.message) }, retry: t.content || null }, out);
  }
  // what was still running when the turn ended did not finish
  for (const card of t.cards.values()) if (card.status === 'running') toolEnd(card, { ok: false, result: t.state === 'cancelled' ? 'stopped' : 'not finished' }, out);
  for (const sub of t.subagents.values()) subagentEnd(sub, { state: t.state === 'done' ? 'failed' : t.state }, out);
  out.push({ op: 'update', item: t });
  if (chat.history) return;
  const wasActive = chat.active === t;
  if (wasActive) {
    chat.active = null;
    out.push({ op: 'active', turn: null });
  }
  out.push({ op: 'end', turn: t, ev, wasActive });
}

// The events of a subagent (tagged subagent_id, parent_call_id, depth; its
// own tool calls are keyed "<subagent_id>|<call_id>" in the turn's cards).
function nested(chat, t, type, ev, out) {
  const key = (sid, callId) => `${sid}|${callId}`;
  let sub = t.subagents.get(ev.subagent_id);
  if (!sub) {
    sub = { kind: 'subagent', id: ev.subagent_id, role: ev.agent || ev.role || 'subagent', depth: ev.depth || 1, model: undefined, max_steps: undefined, task: undefined, items: [], seg: null, state: 'running', end: null };
    if (ev.task) subagentStart(sub, ev);
    t.subagents.set(ev.subagent_id, sub);
    const parent = t.cards.get(ev.parent_subagent_id ? key(ev.parent_subagent_id, ev.parent_call_id) : ev.parent_call_id);
    if (parent) {
      parent.subagents.push(sub);
      out.push({ op: 'add', into: parent, item: sub });
    } else add(t, sub, out);
  }
  const card = ev.call_id ? t.cards.get(key(ev.subagent_id, ev.call_id)) : null;
  switch (type) {
    case 'subagent_start':
      subagentStart(sub, ev);
      out.push({ op: 'update', item: sub });
      break;
    case 'text':
      appendText(sub, ev.delta || '', ev.step, out);
      break;
    case 'tool_start': {
      const c = newTool(ev, ev.agent || '');
      t.cards.set(key(ev.subagent_id, ev.call_id), c);
      add(sub, c, out);
      break;
    }
    case 'tool_output':
      if (card) toolOutput(card, ev, out);
      break;
    case 'tool_end':
      if (card) toolEnd(card, ev, out);
      if (changesFiles(chat, ev)) out.push({ op: 'files' });
      break;
    case 'sandbox_spawn':
    case 'browser_spawn':
      addAbove(sub, card, { kind: 'spawn', ev }, out);
      break;
    case 'sandbox_gone':
      add(sub, { kind: 'gone', ev }, out);
      break;
    case 'error':
      if ((ev.code === 'SANDBOX_QUOTA' || ev.code === 'BROWSER_QUOTA') && card) card.quota = ev;
      else add(sub, { kind: 'error', ev, retry: null }, out);
      break;
    case 'subagent_end':
      subagentEnd(sub, ev, out);
      break;
    default:
      break;
  }
}
