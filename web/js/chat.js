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
import { fold, latestTurnId, newChat } from './events.js';
import { $, clear, fmtDuration, h, icon } from './html.js';
import { MarkdownView, captureViews } from './markdown.js';

const TURNS_PAGE = 30; // turns shown on opening a chat, and per "Show earlier messages"

// One turn's answer (the reducer's turn, events.js): the working dots until
// something is shown, its items in order, and the foot (state, time, Trace).
class TurnView {
  constructor(turn, chat) {
    this.turn = turn;
    this.chat = chat;
    this.thinking = h('div.thinking', { 'aria-label': 'working' }, h('span'), h('span'), h('span'));
    this.body = h('div.turn-body', {}, this.thinking);
    this.foot = h('div.turn-foot');
    this.el = h('article.turn', { dataset: { turnId: turn.id || '' }, 'aria-busy': 'true' }, h('div.avatar', { 'aria-hidden': 'true' }, icon('tusko')), h('div.turn-main', {}, this.body, this.foot));
    this.footState = null;
  }

  insert(node, before) {
    this.thinking.remove();
    if (before) before.before(node);
    else this.body.append(node);
  }

  sync() {
    const t = this.turn;
    if (t.state !== 'running') this.thinking.remove();
    if (t.state !== 'running') {
      this.el.removeAttribute('aria-busy');
      this.el.dataset.state = t.state;
    }
    const foot = `${t.state}|${t.duration_ms}`;
    if (foot === this.footState) return;
    this.footState = foot;
    const parts = [];
    if (t.state === 'running') parts.push(h('span.state', { text: 'working…' }));
    else if (t.state === 'cancelled') parts.push(h('span.state.cancelled', { text: 'stopped' }));
    else if (t.state === 'failed') parts.push(h('span.state.failed', { text: 'failed' }));
    if (t.duration_ms !== undefined && t.state !== 'running') parts.push(h('span.took', { text: fmtDuration(t.duration_ms) }));
    if (t.id) parts.push(h('button.link.trace-btn', { type: 'button', onclick: () => this.chat.opts.onTrace(t.id) }, icon('trace'), 'Trace'));
    this.foot.replaceChildren(...parts);
  }
}

// A segment of text (a turn's or a subagent's), as Markdown.
class TextView {
  constructor(item, cls) {
    this.item = item;
    this.el = h(cls);
    this.md = new MarkdownView(this.el);
  }

  sync() {
    this.md.set(this.item.text);
  }
}

export class ChatView {
  constructor(root, opts) {
    this.root = root; // the scrolling element
    this.opts = opts; // { onTrace(turnId), onFilesChanged(), onActive(bool), onRetry(text), onTitle() }
    // what the server declares (GET /api/agent, see configure)
    this.eventTypes = [];
    this.tools = {};
    this.thread = h('div.thread');
    this.empty = null;
    this.jump = h('button.jump', { type: 'button', hidden: true, onclick: () => this.scrollToEnd(true) }, icon('down'), 'Latest');
    this.earlierBtn = h('button.btn.small.earlier-btn', { type: 'button', onclick: () => this.loadEarlier() }, icon('down', 'up'), h('span', { text: 'Show earlier messages' }));
    this.earlierNote = h('span.earlier-note.error', { role: 'alert' });
    this.earlierBar = h('div.earlier', { hidden: true }, this.earlierBtn, this.earlierNote);
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

  // The server's declaration (GET /api/agent): the types of its event stream
  // (EventSource hears only the types it listens to, by name) and its tools
  // ({name, lane, changes_files}).
  configure({ events = [], tools = [] }) {
    this.eventTypes = events.filter((t) => t !== 'history' && t !== 'stream_closed');
    this.tools = Object.fromEntries(tools.map((t) => [t.name, t]));
  }

  reset(sessionId) {
    if (this.es) this.es.close();
    this.connection(true);
    this.es = null;
    this.sessionId = sessionId;
    this.state = newChat({ tools: this.tools }); // the conversation as data (events.js)
    this.views = new WeakMap(); // an item of the state → what shows it
    this.active = null;
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

  // Opens a chat's stream. pending: the user's first message of a chat that
  // was just created for it (addPending), kept on screen.
  open(sessionId, { pending } = {}) {
    this.reset(sessionId);
    if (pending) {
      this.thread.append(pending.el);
      this.pendingUser = pending;
    }
    const es = new EventSource(`/api/sessions/${encodeURIComponent(sessionId)}/events?turns=${TURNS_PAGE}`);
    this.es = es;
    for (const t of this.eventTypes) es.addEventListener(t, (e) => this.onMessage(e));
    es.addEventListener('history', (e) => this.onHistory(e));
    // the account's limit of open streams closed this one (another tab opened
    // one more): stop here instead of taking a stream back from that tab, and
    // offer to reconnect
    es.addEventListener('stream_closed', () => {
      if (this.es !== es) return;
      es.close();
      this.connection(false, 'evicted');
    });
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
      clear(bar);
      if (how === 'evicted') {
        const again = document.createElement('button');
        again.type = 'button';
        again.textContent = 'Reconnect';
        again.addEventListener('click', () => this.open(this.sessionId));
        bar.append('This chat stopped updating: your account has too many chats open (tabs or devices). ', again);
      } else {
        bar.textContent = how === 'closed' ? 'This chat cannot be followed any more (signed out, or it was deleted). Reload the page.' : 'Reconnecting…';
      }
      bar.hidden = false;
    };
    if (how === 'closed' || how === 'evicted') show();
    else this.connTimer = setTimeout(show, 2000);
  }

  onMessage(e) {
    let data;
    try {
      data = JSON.parse(e.data);
    } catch {
      return;
    }
    this.draw(fold(this.state, { id: e.lastEventId, type: e.type === 'message' ? data.type : e.type, data }), this.thread, true);
  }

  // The newest turn shown (the trace opens it when asked for none).
  latestTurn() {
    return latestTurnId(this.state);
  }

  // The replay's first frame (no id): are there turns before it, and where do
  // they end. Only a replay from scratch sends one; a resumed stream
  // (Last-Event-ID) does not, and one after events were seen is stale.
  onHistory(e) {
    if (this.historyKnown || this.state.lastSeq) return;
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

  // Folds a batch of earlier events into page: a state of its own (a
  // history: no active turn, no pending message, no file or memory refresh),
  // drawn into page, whose turns then join the conversation's, before them.
  applyPage(page, frames) {
    const st = newChat({ tools: this.tools, history: true });
    for (const f of frames) {
      const seq = Number(f.id);
      if (!seq || seq <= st.lastSeq || seq >= this.before) continue;
      let data;
      try {
        data = JSON.parse(f.data);
      } catch {
        continue;
      }
      this.draw(fold(st, { id: seq, type: f.event === 'message' ? data.type : f.event, data }), page, false);
    }
    // the map stays in the order of the conversation (the trace's latest turn is its last)
    this.state.turns = new Map([...st.turns, ...this.state.turns]);
    this.state.items = [...st.items, ...this.state.items];
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

  // Draws what the reducer says changed (events.js) into sink (the thread,
  // or a page of earlier turns); live: the events are the chat's own, not a
  // page of history.
  draw(changes, sink, live) {
    for (const c of changes) {
      switch (c.op) {
        case 'add':
          this.place(c, sink);
          break;
        case 'update': {
          const v = this.views.get(c.item);
          if (v && v.sync) v.sync();
          break;
        }
        case 'start':
          this.userMessage(c.turn, live);
          break;
        case 'active':
          this.setActive(c.turn);
          break;
        case 'files':
          this.opts.onFilesChanged();
          break;
        case 'end': {
          if (c.wasActive) {
            // screen readers hear that the answer is complete, not every word of it
            const said = { done: 'Tusko answered.', cancelled: 'The answer was stopped.', failed: `The answer failed: ${c.ev.error || ''}` }[c.turn.state] || '';
            const announcer = $('#announcer');
            if (announcer) announcer.textContent = said;
          }
          this.opts.onFilesChanged();
          this.opts.onTitle();
          if (this.opts.onTurnEnd) this.opts.onTurnEnd();
          break;
        }
        default:
          break;
      }
    }
  }

  // A new item: its view, placed in its container's.
  place({ into, item, before }, sink) {
    const v = this.view(item, into);
    this.views.set(item, v);
    if (into.kind === 'chat') sink.append(v.el);
    else if (into.kind === 'tool') this.views.get(into).addSubagent(v);
    else this.views.get(into).insert(v.el, before ? this.views.get(before).el : null);
    if (v.sync) v.sync();
  }

  view(item, into) {
    switch (item.kind) {
      case 'turn':
        return new TurnView(item, this);
      case 'text':
        return new TextView(item, into.kind === 'subagent' ? 'div.segment.sub-text' : 'div.segment');
      case 'plan':
        return new PlanCard(item);
      case 'tool':
        return new ToolCard(item);
      case 'subagent':
        return new SubagentView(item);
      case 'error':
        return { el: errorCard(item.ev, item.retry ? () => this.retry(item.retry) : null) };
      default: {
        const el = item.kind === 'spawn' ? spawnNotice(item.ev) : goneNotice(item.ev);
        // outside any turn (an upload started the sandbox): a notice in the chat
        return { el: into.kind === 'chat' ? h('div.session-notice', {}, el) : el };
      }
    }
  }

  // The user's message above its answer: the one shown while it was sent
  // (addPending), else its text from turn_start.
  userMessage(turn, live) {
    const p = this.pendingUser;
    let el = null;
    if (live && p && !p.turnId && p.content === turn.content) {
      el = p.el;
      p.turnId = turn.id;
      el.classList.remove('pending');
      this.pendingUser = null;
    }
    this.views.get(turn).el.before(el || userBubble(turn.content));
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
