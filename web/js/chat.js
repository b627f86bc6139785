// The conversation of one chat session, drawn from its event stream
// (GET /api/sessions/{id}/events, Server-Sent Events numbered per session).
// Every event is stored by the server before anyone sees it, so opening a
// chat replays its last TURNS_PAGE turns (?turns=) and then follows it live; a
// dropped connection resumes with Last-Event-ID (EventSource does that), and
// a reload in the middle of a turn picks the turn up where it is. The first
// frame ("history") says whether earlier turns exist and where they end;
// "Show earlier messages" fetches them a page at a time (follow=0) and puts
// them above, keeping what the reader was looking at where it was.
import { ApiError, api } from './api.js';
import { PlanCard, SubagentView, ToolCard, errorCard, goneNotice, spawnNotice } from './cards.js';
import { $, clear, fmtDuration, h, icon } from './html.js';
import { MarkdownView, captureViews } from './markdown.js';

const EVENT_TYPES = ['turn_start', 'text', 'plan', 'plan_update', 'tool_start', 'tool_output', 'tool_end', 'sandbox_spawn', 'sandbox_gone', 'error', 'subagent_start', 'subagent_end', 'turn_end'];
const TURNS_PAGE = 30; // turns shown on opening a chat, and per "Show earlier messages"
const FILE_TOOLS = /^(write_file|execute_command|execute_code|run_python|create_|edit_file|delete_file|upload)/;

class Turn {
  constructor(id, view) {
    this.id = id;
    this.view = view;
    this.state = 'running';
    this.content = '';
    this.cards = new Map(); // call_id → card; a subagent's: "<subagent_id>|<call_id>"
    this.subagents = new Map(); // subagent_id → SubagentView
    this.text = null; // the text segment being written
    this.textStep = null;
    this.error = null;
    this.thinking = h('div.thinking', { 'aria-label': 'working' }, h('span'), h('span'), h('span'));
    this.body = h('div.turn-body', {}, this.thinking);
    this.foot = h('div.turn-foot');
    this.el = h('article.turn', { dataset: { turnId: id || '' }, 'aria-busy': 'true' }, h('div.avatar', { 'aria-hidden': 'true' }, icon('tusko')), h('div.turn-main', {}, this.body, this.foot));
    this.renderFoot();
  }

  add(node) {
    this.thinking.remove();
    this.body.append(node);
    this.text = null;
    return node;
  }

  appendText(delta, step) {
    if (!this.text || this.textStep !== step) {
      this.thinking.remove();
      const el = h('div.segment');
      this.body.append(el);
      this.text = new MarkdownView(el);
      this.textStep = step;
    }
    this.text.append(delta);
  }

  end(ev) {
    this.state = ev.state || 'done';
    this.duration = ev.duration_ms;
    this.thinking.remove();
    this.el.removeAttribute('aria-busy');
    this.el.dataset.state = this.state;
    if (this.state === 'failed' && !this.errorShown) {
      this.showError({ code: ev.error_code, message: ev.error || (this.error && this.error.message) });
    }
    for (const card of this.cards.values()) if (card.status.classList.contains('running')) card.end({ ok: false, result: this.state === 'cancelled' ? 'stopped' : 'not finished' });
    for (const sub of this.subagents.values()) sub.end({ state: this.state === 'done' ? 'failed' : this.state });
    this.renderFoot();
  }

  showError(ev) {
    this.errorShown = true;
    const retry = this.content ? () => this.view.retry(this.content) : null;
    this.add(errorCard(ev, retry));
  }

  renderFoot() {
    const parts = [];
    if (this.state === 'running') parts.push(h('span.state', { text: 'working…' }));
    else if (this.state === 'cancelled') parts.push(h('span.state.cancelled', { text: 'stopped' }));
    else if (this.state === 'failed') parts.push(h('span.state.failed', { text: 'failed' }));
    if (this.duration !== undefined && this.state !== 'running') parts.push(h('span.took', { text: fmtDuration(this.duration) }));
    if (this.id) parts.push(h('button.link.trace-btn', { type: 'button', onclick: () => this.view.opts.onTrace(this.id) }, icon('trace'), 'Trace'));
    this.foot.replaceChildren(...parts);
  }
}

export class ChatView {
  constructor(root, opts) {
    this.root = root; // the scrolling element
    this.opts = opts; // { onTrace(turnId), onFilesChanged(), onActive(bool), onRetry(text), onTitle() }
    this.thread = h('div.thread');
    this.empty = null;
    this.jump = h('button.jump', { type: 'button', hidden: true, onclick: () => this.scrollToEnd(true) }, icon('down'), 'Latest');
    this.earlierBtn = h('button.btn.small.earlier-btn', { type: 'button', onclick: () => this.loadEarlier() }, icon('down', 'up'), h('span', { text: 'Show earlier messages' }));
    this.earlierNote = h('span.earlier-note.error', { role: 'alert' });
    this.earlierBar = h('div.earlier', { hidden: true }, this.earlierBtn, this.earlierNote);
    this.sink = this.thread; // where new turns and notices go (a batch of history: its page)
    this.paging = false; // applying a batch of earlier turns: no live side effects
    root.append(this.earlierBar, this.thread);
    root.parentElement.append(this.jump);
    this.stick = true;
    root.addEventListener('scroll', () => {
      this.stick = root.scrollTop + root.clientHeight >= root.scrollHeight - 48;
      if (this.stick) this.jump.hidden = true;
    });
    new ResizeObserver(() => this.follow()).observe(this.thread);
    this.reset(null);
  }

  reset(sessionId) {
    if (this.es) this.es.close();
    this.connection(true);
    this.es = null;
    this.sessionId = sessionId;
    this.lastSeq = 0;
    this.turns = new Map();
    this.active = null;
    this.plan = null;
    this.pendingUser = null;
    if (this.earlierLoad) this.earlierLoad.abort();
    this.earlierLoad = null;
    this.historyKnown = false;
    this.setEarlier(null);
    clear(this.thread);
    this.stick = true;
    this.jump.hidden = true;
    this.setActive(null);
  }

  showEmpty(node) {
    this.setEarlier(null);
    clear(this.thread);
    this.thread.append(node);
  }

  open(sessionId) {
    this.reset(sessionId);
    const es = new EventSource(`/api/sessions/${encodeURIComponent(sessionId)}/events?turns=${TURNS_PAGE}`);
    this.es = es;
    for (const t of EVENT_TYPES) es.addEventListener(t, (e) => this.onMessage(e));
    es.addEventListener('history', (e) => this.onHistory(e));
    es.onmessage = (e) => this.onMessage(e);
    es.onopen = () => this.connection(true);
    es.onerror = () => {
      if (this.es !== es) return;
      // EventSource retries by itself; CLOSED means the server refused (401/404)
      if (es.readyState === EventSource.CLOSED) this.connection(false, 'closed');
      else this.connection(false);
    };
  }

  // A dropped stream reconnects by itself (usually at once): say so only when
  // it takes a while, or when the server refused for good.
  connection(ok, how) {
    const bar = $('#conn');
    if (!bar) return;
    clearTimeout(this.connTimer);
    if (ok) {
      bar.hidden = true;
      return;
    }
    const show = () => {
      bar.textContent = how === 'closed' ? 'This chat cannot be followed any more (signed out, or it was deleted). Reload the page.' : 'Reconnecting…';
      bar.hidden = false;
    };
    if (how === 'closed') show();
    else this.connTimer = setTimeout(show, 2000);
  }

  onMessage(e) {
    const seq = Number(e.lastEventId);
    if (seq && seq <= this.lastSeq) return;
    if (seq) this.lastSeq = seq;
    let data;
    try {
      data = JSON.parse(e.data);
    } catch {
      return;
    }
    this.handle(e.type === 'message' ? data.type : e.type, data);
  }

  // The replay's first frame (no id): are there turns before it, and where do
  // they end. Only a replay from scratch sends one; a resumed stream
  // (Last-Event-ID) does not, and one after events were seen is stale.
  onHistory(e) {
    if (this.historyKnown || this.lastSeq) return;
    let data;
    try {
      data = JSON.parse(e.data);
    } catch {
      return;
    }
    this.historyKnown = true;
    this.setEarlier(data.earlier ? data.before : null);
  }

  // before: the seq the earlier turns end before (null: none).
  setEarlier(before) {
    this.before = Number.isSafeInteger(before) && before > 0 ? before : null;
    this.earlierBar.hidden = this.before === null;
    this.earlierBtn.removeAttribute('aria-disabled');
    this.earlierBtn.lastChild.textContent = 'Show earlier messages';
    this.earlierNote.textContent = '';
  }

  // Fetches the TURNS_PAGE turns before this.before (a replay that ends:
  // follow=0), renders them out of sight, waits for their Markdown, then puts
  // them above the conversation and scrolls by what was added, so the turn on
  // screen stays exactly where it was.
  async loadEarlier() {
    if (this.earlierLoad || this.before === null) return;
    const ac = new AbortController();
    this.earlierLoad = ac;
    const btn = this.earlierBtn;
    btn.setAttribute('aria-disabled', 'true'); // (not disabled: the button keeps the focus)
    btn.lastChild.textContent = 'Loading earlier messages…';
    this.earlierNote.textContent = '';
    const page = h('div', { hidden: true });
    try {
      const res = await api(`/api/sessions/${encodeURIComponent(this.sessionId)}/events?turns=${TURNS_PAGE}&before=${this.before}&follow=0`, {
        headers: { Accept: 'text/event-stream' },
        signal: ac.signal,
        raw: true,
      });
      const frames = parseSSE(await res.text());
      if (this.earlierLoad !== ac) return; // another chat was opened meanwhile
      const head = frames[0] && frames[0].event === 'history' ? JSON.parse(frames[0].data) : null;
      if (!head) throw new Error('the server did not say what came before');
      this.root.prepend(page); // (out of sight, and before the thread in the document's order)
      const views = captureViews(() => this.applyPage(page, frames.slice(1)));
      await Promise.race([Promise.all(views.map((v) => v.rendered())), sleep(10000)]);
      await Promise.all([...page.querySelectorAll('img')].map((img) => img.decode().catch(() => {})));
      if (this.earlierLoad !== ac) return;
      this.earlierLoad = null;
      // (a boundary that does not move back would page for ever)
      this.prepend(page, head.earlier && head.before < this.before ? head.before : null);
    } catch (e) {
      if (this.earlierLoad !== ac) return;
      this.earlierLoad = null;
      btn.removeAttribute('aria-disabled');
      btn.lastChild.textContent = 'Show earlier messages';
      this.earlierNote.textContent = `Could not load earlier messages: ${e.message}`;
    } finally {
      page.remove();
    }
  }

  // Folds a batch of earlier events into page (turns of their own, none of
  // the live side effects: no active turn, no pending message, no plan swap).
  applyPage(page, frames) {
    const live = { turns: this.turns, plan: this.plan };
    this.turns = new Map();
    this.plan = null;
    this.sink = page;
    this.paging = true;
    let last = 0;
    try {
      for (const f of frames) {
        const seq = Number(f.id);
        if (!seq || seq <= last || seq >= this.before) continue;
        last = seq;
        let data;
        try {
          data = JSON.parse(f.data);
        } catch {
          continue;
        }
        this.handle(f.event === 'message' ? data.type : f.event, data);
      }
    } finally {
      // the map stays in the order of the conversation (the trace's latest turn is its last)
      this.turns = new Map([...this.turns, ...live.turns]);
      this.plan = live.plan;
      this.sink = this.thread;
      this.paging = false;
    }
  }

  // Puts a rendered page above the conversation without moving what is on
  // screen: the first element below the insertion keeps its place.
  prepend(page, before) {
    const anchor = this.thread.firstElementChild;
    const top0 = anchor ? anchor.getBoundingClientRect().top : 0;
    const hadFocus = this.earlierBtn === document.activeElement;
    this.stick = false; // the resize that follows is not new output to follow
    this.thread.prepend(...page.childNodes);
    this.setEarlier(before);
    if (anchor) this.root.scrollTop += anchor.getBoundingClientRect().top - top0;
    if (hadFocus && this.before === null) this.root.focus({ preventScroll: true });
    const live = $('#announcer');
    if (live) live.textContent = this.before === null ? 'Earlier messages shown: this is the start of the chat.' : 'Earlier messages shown.';
  }

  turnFor(id) {
    if (!id) return this.paging ? null : this.active;
    let t = this.turns.get(id);
    if (!t) {
      t = new Turn(id, this);
      this.turns.set(id, t);
      this.sink.append(t.el);
    }
    return t;
  }

  // Applies one event (exported for the tests of the rendering, too).
  handle(type, ev) {
    if (type === 'turn_start') return this.onTurnStart(ev);
    if (!ev.turn_id && (type === 'sandbox_spawn' || type === 'sandbox_gone')) {
      // outside any turn (an upload started the sandbox): a notice in the chat
      this.sink.append(h('div.session-notice', {}, type === 'sandbox_spawn' ? spawnNotice(ev) : goneNotice(ev)));
      return;
    }
    const t = this.turnFor(ev.turn_id);
    if (!t) return;
    // a subagent's events go into its view, nested in the card of the call
    // that started it (parent_call_id)
    if (ev.subagent_id) return this.nested(t, type, ev);
    switch (type) {
      case 'text':
        t.appendText(ev.delta || '', ev.step);
        break;
      case 'plan':
        this.plan = new PlanCard();
        this.plan.update(ev);
        t.add(this.plan.el);
        break;
      case 'plan_update':
        if (!this.plan) {
          this.plan = new PlanCard();
          t.add(this.plan.el);
        }
        this.plan.update(ev);
        break;
      case 'tool_start': {
        const card = new ToolCard(ev);
        if (ev.agent) card.el.dataset.agent = ev.agent;
        t.cards.set(ev.call_id, card);
        // the plan card stands for plan_task; its tool card shows only on failure
        if (ev.name !== 'plan_task') t.add(card.el);
        break;
      }
      case 'tool_output': {
        const card = t.cards.get(ev.call_id);
        if (card) card.out(ev);
        break;
      }
      case 'tool_end': {
        const card = t.cards.get(ev.call_id);
        if (card) card.end(ev);
        if (card && ev.ok === false && !card.el.isConnected) t.add(card.el);
        if (ev.ok !== false && FILE_TOOLS.test(ev.name || '') && !this.paging) this.opts.onFilesChanged();
        break;
      }
      case 'sandbox_spawn': {
        // shown above the tool call that needed the sandbox: that is what it waited for
        const card = ev.call_id && t.cards.get(ev.call_id);
        if (card && card.el.isConnected) card.el.before(spawnNotice(ev));
        else t.add(spawnNotice(ev));
        break;
      }
      case 'sandbox_gone':
        t.add(goneNotice(ev));
        break;
      case 'error': {
        if (ev.code !== 'SANDBOX_QUOTA') {
          t.error = ev; // shown with the turn's end (with a retry)
          break;
        }
        // a quota refusal: on the tool call it refused, else on its own
        const card = ev.call_id && t.cards.get(ev.call_id);
        if (card) card.quota = ev;
        else t.add(errorCard(ev, null));
        break;
      }
      case 'turn_end':
        t.end(ev);
        if (this.paging) break;
        if (this.active === t) {
          // screen readers hear that the answer is complete, not every word of it
          const said = { done: 'Tusko answered.', cancelled: 'The answer was stopped.', failed: `The answer failed: ${ev.error || ''}` }[t.state] || '';
          const live = $('#announcer');
          if (live) live.textContent = said;
          this.setActive(null);
        }
        this.opts.onFilesChanged();
        this.opts.onTitle();
        if (this.opts.onTurnEnd) this.opts.onTurnEnd();
        break;
      default:
        break;
    }
  }

  // The events of a subagent (tagged subagent_id, parent_call_id, depth).
  nested(t, type, ev) {
    const key = (sid, callId) => `${sid}|${callId}`;
    let view = t.subagents.get(ev.subagent_id);
    if (!view) {
      view = new SubagentView(ev);
      t.subagents.set(ev.subagent_id, view);
      const parent = t.cards.get(ev.parent_subagent_id ? key(ev.parent_subagent_id, ev.parent_call_id) : ev.parent_call_id);
      if (parent) parent.addSubagent(view);
      else t.add(view.el);
    }
    const card = ev.call_id ? t.cards.get(key(ev.subagent_id, ev.call_id)) : null;
    switch (type) {
      case 'subagent_start':
        view.start(ev);
        break;
      case 'text':
        view.appendText(ev.delta || '', ev.step);
        break;
      case 'tool_start': {
        const c = new ToolCard(ev);
        c.el.dataset.agent = ev.agent || '';
        t.cards.set(key(ev.subagent_id, ev.call_id), c);
        view.add(c.el);
        break;
      }
      case 'tool_output':
        if (card) card.out(ev);
        break;
      case 'tool_end':
        if (card) card.end(ev);
        if (ev.ok !== false && FILE_TOOLS.test(ev.name || '') && !this.paging) this.opts.onFilesChanged();
        break;
      case 'sandbox_spawn':
        if (card) card.el.before(spawnNotice(ev));
        else view.add(spawnNotice(ev));
        break;
      case 'sandbox_gone':
        view.add(goneNotice(ev));
        break;
      case 'error':
        if (ev.code === 'SANDBOX_QUOTA' && card) card.quota = ev;
        else view.add(errorCard(ev, null));
        break;
      case 'subagent_end':
        view.end(ev);
        break;
      default:
        break;
    }
  }

  onTurnStart(ev) {
    let userEl = null;
    if (!this.paging && this.pendingUser && !this.pendingUser.turnId && this.pendingUser.content === ev.content) {
      userEl = this.pendingUser.el;
      this.pendingUser.turnId = ev.turn_id;
      userEl.classList.remove('pending');
    }
    const existing = this.turns.get(ev.turn_id);
    if (existing && existing.userEl) return;
    if (!userEl) {
      userEl = userBubble(ev.content || '');
      if (existing) existing.el.before(userEl);
      else this.sink.append(userEl);
    }
    const t = existing || this.turnFor(ev.turn_id);
    t.userEl = userEl;
    t.content = ev.content || '';
    if (this.paging) return;
    if (t.state === 'running') this.setActive(t);
    if (this.pendingUser && this.pendingUser.turnId === ev.turn_id) this.pendingUser = null;
  }

  // The user's message, shown at once while the POST is on its way.
  addPending(content) {
    const el = userBubble(content);
    el.classList.add('pending');
    this.thread.append(el);
    this.pendingUser = { content, el, turnId: null };
    this.stick = true;
    this.follow();
    return this.pendingUser;
  }

  // The POST failed: the message stays, with the reason and a retry.
  pendingFailed(p, err) {
    p.el.classList.remove('pending');
    p.el.classList.add('unsent');
    const note = errorCard({ code: err instanceof ApiError ? err.code : 'NETWORK', message: err.message }, () => {
      note.remove();
      p.el.remove();
      this.retry(p.content);
    });
    p.el.after(note);
    if (this.pendingUser === p) this.pendingUser = null;
  }

  retry(content) {
    this.opts.onRetry(content);
  }

  setActive(t) {
    this.active = t;
    this.opts.onActive(!!t);
  }

  follow() {
    if (this.stick) this.scrollToEnd(false);
    else if (this.active) this.jump.hidden = false;
  }

  scrollToEnd(smooth) {
    this.root.scrollTo({ top: this.root.scrollHeight, behavior: smooth ? 'smooth' : 'instant' });
    this.stick = true;
    this.jump.hidden = true;
  }
}

// Server-Sent Events text (a whole response) → [{id, event, data}], each
// frame with its own id ('' without one); comments (heartbeats) are skipped.
function parseSSE(text) {
  const out = [];
  let cur = { id: '', event: '', data: [] };
  for (const line of text.split(/\r\n|\n|\r/)) {
    if (line === '') {
      if (cur.data.length) out.push({ id: cur.id, event: cur.event || 'message', data: cur.data.join('\n') });
      cur = { id: '', event: '', data: [] };
      continue;
    }
    if (line.startsWith(':')) continue;
    const c = line.indexOf(':');
    const field = c < 0 ? line : line.slice(0, c);
    let value = c < 0 ? '' : line.slice(c + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') cur.data.push(value);
    else if (field === 'event') cur.event = value;
    else if (field === 'id') cur.id = value;
  }
  return out;
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function userBubble(text) {
  return h('div.msg.user', {}, h('div.bubble', { text }));
}
