// The Trace tab: the spans of one turn (GET /api/turns/{id}/trace) as a
// waterfall — model calls, tool calls with their lane, sandbox and browser
// spawns, subagents (their spans nested under the delegate_subagent call),
// the memories offered at the start — and the attributes of the chosen span.
// The sandbox spawn span is chosen first: its tier, trigger, call, pool,
// quota, credentials and idle_ttl say why and how a container started.
import { api } from './api.js';
import { clear, fmtDuration, h } from './html.js';
import { laneBadge } from './ui.js';

const SPAWN_KEYS = ['tier', 'trigger', 'call', 'pool', 'quota', 'credentials', 'idle_ttl'];

export class TraceView {
  constructor({ latestTurn }) {
    this.latestTurn = latestTurn;
    this.turnId = null;
    this.head = h('div.trace-head');
    this.rows = h('div.waterfall', { role: 'list', 'aria-label': 'Spans' });
    this.attrs = h('div.span-attrs');
    this.el = h('div.trace', {}, this.head, this.rows, this.attrs);
    this.empty();
  }

  empty() {
    this.head.replaceChildren(h('p.muted', { text: 'Each answer has a trace: open it with the Trace button under the answer.' }));
    clear(this.rows);
    clear(this.attrs);
  }

  shown() {
    if (!this.turnId) {
      const t = this.latestTurn();
      if (t) this.show(t);
    }
  }

  reset() {
    this.turnId = null;
    this.empty();
  }

  async show(turnId) {
    this.turnId = turnId;
    this.head.replaceChildren(h('p.muted', { text: 'Loading the trace…' }));
    clear(this.rows);
    clear(this.attrs);
    let r;
    try {
      r = await api(`/api/turns/${encodeURIComponent(turnId)}/trace`);
    } catch (e) {
      if (this.turnId === turnId) this.head.replaceChildren(h('p.error', { text: `The trace could not be loaded: ${e.message}` }));
      return;
    }
    if (this.turnId !== turnId) return;
    this.render(r.turn || {}, r.spans || []);
  }

  render(turn, spans) {
    const t0 = Math.min(...spans.map((s) => Date.parse(s.started_at)).filter((x) => !Number.isNaN(x)));
    const end = Math.max(...spans.map((s) => Date.parse(s.started_at) + Number(s.duration_ms || 0)));
    const total = Math.max(end - t0, 1);
    const spawns = spans.filter((s) => s.kind === 'sandbox_spawn').length;
    const mem = spans.find((s) => s.kind === 'memory');
    const subs = spans.filter((s) => s.kind === 'subagent').length;
    this.head.replaceChildren(
      h('div.kicker', { text: 'trace · one chat turn' }),
      turn.model ? h('span.chip', { text: turn.model }) : null,
      h('span.chip', { text: turn.state || '' }),
      h('span.chip', { text: `${spans.length} spans` }),
      h('span.chip.sandboxes', { text: `sandboxes ${spawns}` }),
      mem ? h('span.chip.memories', { title: 'long-term memories offered to the model at the start of the turn', text: `memories ${mem.attrs.count || 0} · ${mem.attrs.tokens || 0} tokens` }) : null,
      subs ? h('span.chip.subagents', { text: `subagents ${subs}` }) : null,
    );
    // parents before children, siblings by start
    const byParent = new Map();
    for (const s of spans) {
      const p = s.parent_id && spans.some((x) => x.id === s.parent_id) ? s.parent_id : null;
      if (!byParent.has(p)) byParent.set(p, []);
      byParent.get(p).push(s);
    }
    const ordered = [];
    const walk = (pid, depth) => {
      for (const s of (byParent.get(pid) || []).sort((a, b) => Date.parse(a.started_at) - Date.parse(b.started_at))) {
        ordered.push([s, depth]);
        walk(s.id, depth + 1);
      }
    };
    walk(null, 0);
    const rows = ordered.map(([s, depth]) => this.row(s, depth, t0, total));
    this.rows.replaceChildren(...rows);
    const first = ordered.find(([s]) => s.kind === 'sandbox_spawn') || ordered[0];
    if (first) this.select(first[0], rows[ordered.indexOf(first)]);
  }

  row(s, depth, t0, total) {
    const start = Date.parse(s.started_at) - t0;
    const bar = h(`span.bar.kind-${s.kind}.status-${s.status}`);
    bar.style.left = `${(start / total) * 100}%`;
    bar.style.width = `max(2px, ${(Number(s.duration_ms || 0) / total) * 100}%)`;
    const label = h('span.span-label', {}, h('span.span-name', { text: s.name }), h(`span.kind.kind-${s.kind}`, { text: s.kind.replace('_', ' ') }), s.attrs && s.attrs.lane ? laneBadge(s.attrs.lane) : null);
    label.style.paddingInlineStart = `${depth * 0.9}rem`;
    const row = h('button.span-row', { type: 'button', role: 'listitem', dataset: { kind: s.kind, spanId: s.id } }, label, h('span.track', {}, bar), h('span.dur', { text: fmtDuration(s.duration_ms) }));
    row.addEventListener('click', () => this.select(s, row));
    return row;
  }

  select(s, row) {
    for (const r of this.rows.children) r.classList.toggle('selected', r === row);
    const a = s.attrs || {};
    const keys = s.kind === 'sandbox_spawn' ? [...SPAWN_KEYS.filter((k) => k in a), ...Object.keys(a).filter((k) => !SPAWN_KEYS.includes(k))] : Object.keys(a);
    const val = (v) => (typeof v === 'string' ? v : JSON.stringify(v));
    // the memories offered: one line each, with what they cost
    const dd = (k) =>
      s.kind === 'memory' && k === 'memories' && Array.isArray(a[k])
        ? h('dd', {}, a[k].length ? h('ol.offered', {}, a[k].map((m) => h('li', { dataset: { memoryId: m.id || '' } }, h('span', { text: m.text || '' }), h('span.muted', { text: ` · ${m.tokens} tokens` })))) : 'none')
        : h('dd', { text: val(a[k]) });
    this.attrs.replaceChildren(
      h('div.attrs-title', {}, h('strong', { text: s.kind === 'sandbox_spawn' ? 'sandbox spawn' : s.kind === 'subagent' ? `${s.name} subagent` : s.name }), h('span.muted', { text: ` · ${fmtDuration(s.duration_ms)} · ${s.status}` })),
      h('dl.attrs', { dataset: { kind: s.kind } }, keys.flatMap((k) => [h('dt', { text: k }), dd(k)])),
    );
  }
}
