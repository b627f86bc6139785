// The pieces of an answer besides its text: the plan card, tool-call cards,
// subagents nested in their delegate_subagent card, the sandbox spawn notice,
// errors. Each view draws an item of the chat's state (events.js): sync()
// shows what the item holds now.
import { fmtBytes, fmtDuration, h, icon } from './html.js';
import { compareView } from './office.js';
import { laneBadge, renderPreview } from './ui.js';

// ---------- plan ----------

const STATUS_LABEL = { pending: 'to do', in_progress: 'in progress', done: 'done', skipped: 'skipped', blocked: 'blocked' };

export class PlanCard {
  constructor(item) {
    this.item = item;
    this.el = h('section.card.plan', { 'aria-label': 'Plan' });
  }

  sync() {
    const { goal, milestones = [] } = this.item;
    const items = milestones.map((m, i) => {
      const title = typeof m === 'string' ? m : m.title || m.name || `Milestone ${i + 1}`;
      const status = (typeof m === 'object' && m.status) || 'pending';
      return h(
        `li.milestone.status-${status}`,
        { dataset: { status } },
        h('span.tick', { 'aria-hidden': 'true' }, status === 'done' ? icon('check') : status === 'in_progress' ? h('span.spinner') : null),
        h('span.title', { text: title }),
        h('span.sr-only', { text: ` (${STATUS_LABEL[status] || status})` }),
        typeof m === 'object' && m.note ? h('span.note', { text: m.note }) : null,
      );
    });
    const done = milestones.filter((m) => m && m.status === 'done').length;
    this.el.replaceChildren(
      h('header', {}, icon('plan'), h('span.kicker', { text: 'Plan' }), laneBadge('fast'), h('span.count', { text: `${done} of ${milestones.length} done` })),
      h('h3.goal', { text: goal || 'Plan' }),
      h('ol.milestones', {}, items),
    );
  }
}

// ---------- tool calls ----------

function argsPreview(args) {
  if (args === undefined || args === null) return '';
  if (typeof args === 'string') return args;
  return JSON.stringify(args, null, 2);
}

// A one-line summary of the arguments for the card's header.
function argsSummary(name, args) {
  if (!args || typeof args !== 'object') return typeof args === 'string' ? args.slice(0, 80) : '';
  if (name === 'remember' && args.fact && typeof args.fact === 'object') {
    const f = args.fact;
    const dates = [f.valid_from && `from ${f.valid_from}`, f.valid_to && `until ${f.valid_to}`].filter(Boolean).join(' ');
    return [f.subject, f.predicate, f.object].join(' · ') + (dates ? ` (${dates})` : '');
  }
  if (name === 'recall_facts' && args.entity) return args.at ? `${args.entity} on ${args.at}` : String(args.entity);
  if (name === 'save_document' && args.title) return String(args.title);
  if (name === 'delegate_subagent' && args.role) {
    const line = `${args.role}: ${String(args.task || '').split('\n')[0]}`;
    return line.length > 90 ? `${line.slice(0, 90)}…` : line;
  }
  const v = args.command ?? args.path ?? args.code ?? args.query ?? args.url ?? args.goal ?? Object.values(args)[0];
  if (v === undefined) return '';
  const s = typeof v === 'string' ? v : JSON.stringify(v);
  const line = s.split('\n')[0];
  return line.length > 90 ? `${line.slice(0, 90)}…` : line;
}

export class ToolCard {
  constructor(item) {
    const ev = item; // (call_id, name, lane, arguments: as tool_start said)
    this.item = item;
    this.name = ev.name || 'tool';
    this.shown = []; // how much of each piece of output is on screen
    this.ended = false;
    this.status = h('span.status.running', { title: 'running' }, h('span.spinner'), h('span.sr-only', { text: 'running' }));
    this.duration = h('span.duration');
    this.output = null;
    this.details = h('details.tool-details');
    const summary = h(
      'summary',
      {},
      this.status,
      h('span.tool-name', { text: this.name }),
      laneBadge(ev.lane),
      h('span.args-summary', { text: argsSummary(this.name, ev.arguments) }),
      this.duration,
      icon('chevron', 'chev'),
    );
    this.body = h('div.tool-body', {}, h('div.label', { text: 'Arguments' }), h('pre.args', { text: argsPreview(ev.arguments) }));
    this.details.append(summary, this.body);
    this.message = h('div.tool-message', { hidden: true });
    this.el = h('section.card.tool', { dataset: { callId: ev.call_id || '', tool: this.name, lane: ev.lane || 'fast' } }, this.details, this.message);
    if (item.agent !== undefined) this.el.dataset.agent = item.agent;
  }

  sync() {
    this.item.output.forEach((piece, i) => this.out(piece, i));
    if (this.item.end && !this.ended) {
      this.ended = true;
      this.end(this.item.end);
    }
  }

  // A subagent this call started: shown inside the card, outside the fold.
  addSubagent(view) {
    if (!this.subs) {
      this.subs = h('div.subagents');
      this.details.after(this.subs);
    }
    this.subs.append(view.el);
  }

  // The i-th piece of output ({stream, text}: the lines of one stream in a
  // row), appended to what is shown of it.
  out({ stream, text }, i) {
    const shown = this.shown[i] || 0;
    if (shown === text.length) return;
    if (!this.output) {
      this.output = h('pre.output', { 'aria-live': 'off' });
      this.body.append(h('div.label', { text: 'Output' }), this.output);
      this.details.open = true; // commands show their output as it streams
    }
    if (i < this.output.childNodes.length) this.output.childNodes[i].append(text.slice(shown));
    else this.output.append(h(`span.${stream}`, { dataset: { stream }, text }));
    this.shown[i] = text.length;
    this.output.scrollTop = this.output.scrollHeight;
  }

  end(ev) {
    const ok = ev.ok !== false;
    this.status.className = `status ${ok ? 'ok' : 'failed'}`;
    this.status.replaceChildren(icon(ok ? 'check' : 'x'), h('span.sr-only', { text: ok ? 'done' : 'failed' }));
    this.status.title = ok ? 'done' : 'failed';
    this.el.classList.add(ok ? 'ok' : 'failed');
    if (ev.duration_ms !== undefined) this.duration.textContent = fmtDuration(ev.duration_ms);
    if (ev.exit_code !== undefined) this.el.dataset.exitCode = String(ev.exit_code);
    const result = ev.result || '';
    if (result && !this.output) {
      this.body.append(h('div.label', { text: ok ? 'Result' : 'Error' }), h('pre.result', { text: result }));
    } else if (ev.exit_code !== undefined && ev.exit_code !== 0) {
      this.body.append(h('div.label', { text: `exit code ${ev.exit_code}` }));
    }
    if (!ok) this.showMessage(ev);
    const d = ev.data;
    if (ok && d && Array.isArray(d.changes) && d.summary) {
      // compare_files: side by side
      this.el.append(h('div.tool-preview', {}, compareView(d)));
    } else if (ok && d && d.kind && (d.text !== undefined || d.base64 || d.pages || d.sheets)) {
      // preview: the file itself, shown in the chat
      this.el.append(h('div.tool-preview', {}, renderPreview(d, String(d.path || '').split('/').pop())));
    }
    if (ok && d && Array.isArray(d.results)) {
      for (const r of d.results) {
        const png = r && (r['image/png'] || (r.data && r.data['image/png']));
        if (png) this.el.append(h('div.tool-preview', {}, h('img.preview-image', { src: `data:image/png;base64,${png}`, alt: 'output of the code' })));
      }
    }
    if (d && Array.isArray(d.screenshots)) {
      // browser screenshots: stored as the user's downloads
      for (const s of d.screenshots) {
        if (typeof s.url === 'string' && s.url.startsWith('/api/downloads/'))
          this.el.append(h('div.tool-preview', {}, h('img.preview-image.screenshot', { src: s.url, alt: `screenshot of ${s.title || s.page || 'the page'}` })));
      }
    }
    if (d && d.path && d.size !== undefined && !d.kind) {
      this.body.append(h('div.label', { text: `${ev.data.path} · ${fmtBytes(ev.data.size)}` }));
    }
  }

  // Quota refusals and fail-closed answers are shown outside the fold.
  showMessage(ev) {
    const r = ev.result || '';
    let kind = 'error';
    const browser = ev.lane === 'browser';
    if (this.item.quota || ev.quota_refused || /quota|MAX_SANDBOXES_PER_USER|MAX_BROWSERS_PER_USER/i.test(r)) kind = 'quota';
    else if (/OPENSANDBOX_(URL|API_KEY)|execution is off|fail-closed/i.test(r)) kind = 'fail-closed';
    this.message.hidden = false;
    this.message.className = `tool-message ${kind}`;
    const title = { quota: browser ? 'Browser quota reached' : 'Sandbox quota reached', 'fail-closed': 'Execution is off' }[kind];
    this.message.replaceChildren(icon(kind === 'quota' ? 'gauge' : kind === 'fail-closed' ? 'lock' : 'alert'), h('span', {}, title ? h('strong', { text: `${title}: ` }) : null, r || 'the tool failed'));
  }
}

// ---------- subagents ----------

const ROLE_TITLE = { researcher: 'Researcher', coder: 'Coder', reviewer: 'Reviewer' };

// One subagent's run, nested in its delegate_subagent card: its task, its
// text as it streams, its own tool cards, and how it ended.
export class SubagentView {
  constructor(item) {
    this.item = item;
    this.role = item.role;
    this.ended = false;
    this.state = h('span.sub-state.running', {}, h('span.spinner'), h('span', { text: 'working' }));
    this.meta = h('span.sub-meta');
    this.task = h('p.sub-task', { hidden: true });
    this.body = h('div.sub-body');
    this.el = h(
      'section.subagent',
      { dataset: { subagentId: item.id || '', role: this.role, depth: String(item.depth || 1) }, 'aria-label': `${ROLE_TITLE[this.role] || this.role} subagent` },
      h('header.sub-head', {}, h('span.sub-role', { text: ROLE_TITLE[this.role] || this.role }), h('span.chip', { text: 'subagent' }), this.meta, this.state),
      this.task,
      this.body,
    );
  }

  insert(node, before) {
    if (before) before.before(node);
    else this.body.append(node);
  }

  sync() {
    const it = this.item;
    this.meta.textContent = [it.model, it.max_steps ? `≤ ${it.max_steps} steps` : ''].filter(Boolean).join(' · ');
    if (it.task) {
      this.task.textContent = it.task;
      this.task.hidden = false;
    }
    if (it.end && !this.ended) {
      this.ended = true;
      this.end(it.end);
    }
  }

  end(ev) {
    const state = ev.state || 'done';
    this.el.dataset.state = state;
    const parts = [state === 'done' ? 'done' : state === 'cancelled' ? 'stopped' : 'failed'];
    if (ev.steps !== undefined) parts.push(`${ev.steps} step${ev.steps === 1 ? '' : 's'}`);
    if (ev.tool_calls !== undefined) parts.push(`${ev.tool_calls} tool call${ev.tool_calls === 1 ? '' : 's'}`);
    if (ev.duration_ms !== undefined) parts.push(fmtDuration(ev.duration_ms));
    this.state.className = `sub-state ${state}`;
    this.state.replaceChildren(icon(state === 'done' ? 'check' : 'x'), h('span', { text: parts.join(' · ') }));
    if (state !== 'done' && ev.error) this.body.append(h('p.sub-error', { text: ev.error }));
  }
}

// ---------- notices ----------

// "sandbox started · warm pool · 1 of 5 live"
export function spawnNotice(ev) {
  const pool = String(ev.pool || '');
  const poolText = pool.startsWith('warm') ? 'warm pool' : pool.startsWith('cold') ? 'cold start' : pool || 'started';
  const m = /(\d+)\s*of\s*(\d+)/.exec(ev.quota || '');
  const live = m ? `${m[1]} of ${m[2]} live` : ev.live !== undefined && ev.max !== undefined ? `${ev.live} of ${ev.max} live` : '';
  const browser = ev.tier === 'browser';
  const parts = [browser ? 'browser started' : 'sandbox started', poolText, live, ev.duration_ms !== undefined ? fmtDuration(ev.duration_ms) : ''].filter(Boolean);
  return h(
    'div.notice.spawn',
    { role: 'status', title: [ev.trigger && `trigger: ${ev.trigger}`, ev.pool && `pool: ${ev.pool}`, ev.quota && `quota: ${ev.quota}`, ev.idle_ttl && `idle_ttl: ${ev.idle_ttl}`].filter(Boolean).join('\n') },
    icon(browser ? 'globe' : 'box'),
    h('span.text', { text: parts.join(' · ') }),
  );
}

export function goneNotice(ev) {
  return h('div.notice.gone', { role: 'status' }, icon('alert'), h('span.text', { text: ev.message || `the sandbox is gone (${ev.reason || 'reaped'})` }));
}

export function errorCard(ev, onRetry) {
  const quota = ev.code === 'SANDBOX_QUOTA' || ev.code === 'BROWSER_QUOTA';
  return h(
    `div.turn-error${quota ? '.quota' : ''}`,
    { role: 'alert' },
    icon(quota ? 'gauge' : 'alert'),
    h('div.what', {}, h('strong', { text: errorTitle(ev.code) }), h('span', { text: ev.message || ev.error || '' })),
    onRetry ? h('button.btn.small', { type: 'button', onclick: onRetry }, icon('retry'), 'Retry') : null,
  );
}

function errorTitle(code) {
  const t = {
    SANDBOX_QUOTA: 'Sandbox quota reached',
    BROWSER_QUOTA: 'Browser quota reached',
    RATE_LIMITED: 'Too many messages',
    TURN_TIMEOUT: 'The turn took too long',
    STEP_BUDGET: 'The step budget ran out',
    PROVIDER_NOT_CONFIGURED: 'The model provider is not configured',
    INTERRUPTED: 'The turn was interrupted',
    NETWORK: 'No connection',
  }[code];
  return t || 'The answer failed';
}
