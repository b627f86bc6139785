// The Memory tab: what Utopia keeps for the user, through /api/utopia/...
// (docs/API.md): documents (list, upload, view, delete), long-term memories
// (list, search, delete) and facts of the knowledge graph (list, search by
// entity, delete), each entity's facts drawn as a timeline of when each was
// true (valid_from → valid_to; an open one runs to today).
import { api } from './api.js';
import { fmtBytes, h, icon } from './html.js';
import { confirmDialog } from './ui.js';

const ACCEPT = '.txt,.md,.markdown,.html,.htm,.csv,.json,.pdf,.docx,text/plain,text/markdown,text/html,text/csv,application/json,application/pdf,application/vnd.openxmlformats-officedocument.wordprocessingml.document';
const SECTIONS = [
  ['documents', 'Documents'],
  ['memories', 'Memories'],
  ['facts', 'Facts'],
];

function fmtDate(s) {
  if (!s) return '';
  const d = new Date(s);
  if (Number.isNaN(d.getTime())) return String(s);
  return d.toLocaleString(undefined, { year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' });
}

// A fact's date as it was given ("2024", "2024-03", "2024-03-05", or a time).
function fmtFactDate(s) {
  if (!s) return '';
  if (/^-?infinity$/.test(s)) return 'always';
  return /T/.test(s) ? s.slice(0, 10) : s;
}

// The instant a fact's date text stands for (its first moment), or NaN.
function instant(s) {
  if (!s || /infinity/.test(s)) return NaN;
  if (/^\d{4}$/.test(s)) return Date.UTC(Number(s), 0, 1);
  if (/^\d{4}-\d{2}$/.test(s)) return Date.UTC(Number(s.slice(0, 4)), Number(s.slice(5, 7)) - 1, 1);
  return Date.parse(s);
}

export class MemoryView {
  constructor() {
    this.section = 'documents';
    this.loaded = {};
    this.switch = h('div.mem-switch', { role: 'group', 'aria-label': 'What to show' });
    this.buttons = new Map();
    for (const [id, label] of SECTIONS) {
      const b = h('button.seg', { type: 'button', 'aria-pressed': id === this.section ? 'true' : 'false', dataset: { section: id }, text: label, onclick: () => this.show(id) });
      this.buttons.set(id, b);
      this.switch.append(b);
    }
    this.status = h('p.mem-status', { role: 'status' });
    this.views = {
      documents: this.documentsView(),
      memories: this.memoriesView(),
      facts: this.factsView(),
    };
    this.el = h('div.memory', {}, this.switch, this.status, this.views.documents.el, this.views.memories.el, this.views.facts.el);
    this.show(this.section, false);
  }

  isVisible() {
    return this.el.offsetParent !== null;
  }

  shown() {
    if (!this.loaded[this.section]) this.load(this.section);
  }

  // A turn ended (it may have remembered something): reload what is shown.
  changed() {
    this.loaded = {};
    if (this.isVisible()) this.load(this.section);
  }

  show(id, load = true) {
    this.section = id;
    for (const [k, b] of this.buttons) b.setAttribute('aria-pressed', k === id ? 'true' : 'false');
    for (const [k, v] of Object.entries(this.views)) v.el.hidden = k !== id;
    this.say('');
    if (load && !this.loaded[id]) this.load(id);
  }

  say(text, error = false) {
    this.status.textContent = text;
    this.status.classList.toggle('error', error);
  }

  async load(id) {
    this.loaded[id] = true;
    try {
      await this.views[id].load();
    } catch (e) {
      this.loaded[id] = false;
      this.say(`Could not load ${id}: ${e.message}`, true);
    }
  }

  async confirmDelete(title, text, path, after) {
    if (!(await confirmDialog({ title, text }))) return;
    try {
      await api(path, { method: 'DELETE' });
      await after();
    } catch (e) {
      this.say(`Not deleted: ${e.message}`, true);
    }
  }

  // ---------------------------------------------------------------- documents

  documentsView() {
    const input = h('input', { type: 'file', multiple: true, accept: ACCEPT, hidden: true, 'aria-label': 'Upload documents' });
    const upload = h('button.btn.small', { type: 'button', onclick: () => input.click() }, icon('upload'), 'Upload');
    const list = h('ul.mem-list.docs', { 'aria-label': 'Documents' });
    const doc = h('div.doc-view', { hidden: true });
    const v = { el: h('section.mem-section', { 'aria-label': 'Documents' }, h('div.mem-head', {}, h('p.muted', { text: 'Text, Markdown, HTML, CSV, JSON, PDF and Word files the agent can search.' }), upload, input), list, doc) };
    input.addEventListener('change', async () => {
      const files = [...input.files];
      input.value = '';
      for (const f of files) {
        this.say(`Uploading ${f.name}…`);
        try {
          const r = await api(`/api/utopia/documents?filename=${encodeURIComponent(f.name)}`, { method: 'POST', body: f, headers: { 'Content-Type': f.type || 'application/octet-stream' } });
          this.say(`${r.title || f.name}: ${r.chunks} chunk${r.chunks === 1 ? '' : 's'} indexed.`);
        } catch (e) {
          this.say(`${f.name} was not added: ${e.message}`, true);
        }
      }
      await v.load();
    });
    v.load = async () => {
      const r = await api('/api/utopia/documents?limit=200');
      const docs = r.documents || [];
      doc.hidden = true;
      list.hidden = false;
      if (!docs.length) {
        list.replaceChildren(h('li.none', { text: 'No documents yet. Upload one, or ask the agent to save a finding.' }));
        return;
      }
      list.replaceChildren(
        ...docs.map((d) =>
          h(
            'li.mem-item.doc',
            { dataset: { id: d.id } },
            h(
              'button.doc-open',
              { type: 'button', onclick: () => v.open(d), title: 'View the document' },
              icon('file'),
              h('span.doc-title', { text: d.title || 'Untitled' }),
              h('span.meta', { text: [d.format || d.mime, fmtBytes(d.bytes), `${d.chunks} chunk${d.chunks === 1 ? '' : 's'}`, d.chat_id ? 'this chat' : null].filter(Boolean).join(' · ') }),
            ),
            h('button.icon-btn', { type: 'button', title: 'Delete', 'aria-label': `Delete “${d.title}”`, onclick: () => this.confirmDelete('Delete this document?', `“${d.title}” and its chunks will be deleted. Facts and memories learned in chats stay.`, `/api/utopia/documents/${d.id}`, () => v.load()) }, icon('trash')),
          ),
        ),
      );
    };
    v.open = async (d) => {
      list.hidden = true;
      doc.hidden = false;
      const back = h('button.btn.small', { type: 'button', onclick: () => v.load() }, 'Back');
      doc.replaceChildren(h('div.doc-head', {}, back, h('strong', { text: d.title || 'Untitled' })), h('p.muted', { text: 'Loading…' }));
      try {
        const full = await api(`/api/utopia/documents/${d.id}`);
        doc.replaceChildren(
          h('div.doc-head', {}, back, h('strong', { text: full.title || 'Untitled' })),
          h('p.meta', { text: [full.format || full.mime, fmtBytes(full.bytes), `${(full.chunks || []).length} chunks`, fmtDate(full.created_at), full.source].filter(Boolean).join(' · ') }),
          h(
            'ol.chunks',
            {},
            (full.chunks || []).map((c) => h('li.chunk', { dataset: { position: String(c.position) } }, c.heading ? h('div.chunk-heading', { text: c.heading }) : null, h('div.chunk-text', { text: c.text }))),
          ),
        );
      } catch (e) {
        doc.replaceChildren(h('div.doc-head', {}, back), h('p.error', { text: `The document could not be opened: ${e.message}` }));
      }
    };
    return v;
  }

  // A section with a search box above its list: typing reloads it (v.load,
  // set by the caller) after a 250 ms pause.
  searchSection(label, placeholder, searchLabel, list) {
    const q = h('input', { type: 'search', placeholder, 'aria-label': searchLabel, autocomplete: 'off' });
    const v = { q, el: h('section.mem-section', { 'aria-label': label }, h('div.mem-search', {}, icon('search'), q), list) };
    let timer = null;
    q.addEventListener('input', () => {
      clearTimeout(timer);
      timer = setTimeout(() => v.load().catch((e) => this.say(e.message, true)), 250);
    });
    return v;
  }

  // ---------------------------------------------------------------- memories

  memoriesView() {
    const list = h('ul.mem-list.memories', { 'aria-label': 'Memories' });
    const v = this.searchSection('Memories', 'Search memories', 'Search memories', list);
    const q = v.q;
    v.load = async () => {
      const term = q.value.trim();
      let items;
      if (term) {
        const r = await api(`/api/utopia/search?kinds=memories&k=50&q=${encodeURIComponent(term)}`);
        items = (r.results || []).filter((x) => x.type === 'memory');
      } else {
        items = (await api('/api/utopia/memories?limit=200')).memories || [];
      }
      if (q.value.trim() !== term) return;
      if (!items.length) {
        list.replaceChildren(h('li.none', { text: term ? 'No memory matches.' : 'No memories yet. The agent saves notes with remember.' }));
        return;
      }
      list.replaceChildren(
        ...items.map((m) =>
          h(
            'li.mem-item.memory',
            { dataset: { id: m.id } },
            h('div.mem-text', {}, h('p', { text: m.text }), h('span.meta', { text: [fmtDate(m.created_at), m.chat_id ? 'from a chat' : null].filter(Boolean).join(' · ') })),
            h('button.icon-btn', { type: 'button', title: 'Delete', 'aria-label': 'Delete this memory', onclick: () => this.confirmDelete('Delete this memory?', `“${m.text.length > 140 ? `${m.text.slice(0, 140)}…` : m.text}” will be forgotten.`, `/api/utopia/memories/${m.id}`, () => v.load()) }, icon('trash')),
          ),
        ),
      );
    };
    return v;
  }

  // ---------------------------------------------------------------- facts

  factsView() {
    const list = h('div.entities', { 'aria-label': 'Facts by entity' });
    const v = this.searchSection('Facts', 'Search facts by entity or words', 'Search facts', list);
    const q = v.q;
    v.load = async () => {
      const term = q.value.trim();
      let facts = [];
      if (!term) {
        facts = (await api('/api/utopia/facts?limit=500')).facts || [];
      } else {
        try {
          // an entity by name or alias: its whole history
          facts = (await api(`/api/utopia/facts?entity=${encodeURIComponent(term)}&limit=500`)).facts || [];
        } catch (e) {
          if (e.status !== 404) throw e;
        }
        if (!facts.length) {
          // else words: the matching facts, with their subjects' histories
          const r = await api(`/api/utopia/search?kinds=facts&k=50&q=${encodeURIComponent(term)}`);
          const subjects = [...new Set((r.results || []).filter((x) => x.type === 'fact').map((x) => x.subject))];
          for (const s of subjects.slice(0, 10)) {
            const f = await api(`/api/utopia/facts?entity=${encodeURIComponent(s)}&limit=500`).catch(() => ({ facts: [] }));
            facts.push(...(f.facts || []));
          }
        }
      }
      if (q.value.trim() !== term) return;
      const seen = new Set();
      facts = facts.filter((f) => !seen.has(f.id) && seen.add(f.id));
      if (!facts.length) {
        list.replaceChildren(h('p.none', { text: term ? 'No fact matches.' : 'No facts yet. The agent records them with remember.' }));
        return;
      }
      const bySubject = new Map();
      for (const f of facts) {
        const k = f.subject_id || f.subject;
        if (!bySubject.has(k)) bySubject.set(k, { name: f.subject, facts: [] });
        bySubject.get(k).facts.push(f);
      }
      list.replaceChildren(...[...bySubject.values()].map((e) => this.entity(e, () => v.load())));
    };
    return v;
  }

  // One entity: a timeline (a row per predicate, a bar per fact) and the list.
  entity({ name, facts }, reload) {
    const now = Date.now();
    const starts = facts.map((f) => instant(f.valid_from)).filter((x) => !Number.isNaN(x));
    const ends = facts.map((f) => (f.valid_to ? instant(f.valid_to) : now)).filter((x) => !Number.isNaN(x));
    let t0 = Math.min(...starts, now);
    const t1 = Math.max(...ends, now);
    if (t1 - t0 < 86400000) t0 = t1 - 86400000;
    const span = t1 - t0;
    const byPred = new Map();
    for (const f of [...facts].sort((a, b) => (instant(a.valid_from) || 0) - (instant(b.valid_from) || 0))) {
      if (!byPred.has(f.predicate)) byPred.set(f.predicate, []);
      byPred.get(f.predicate).push(f);
    }
    const rows = [...byPred.entries()].map(([pred, fs]) => {
      const track = h('div.tl-track');
      for (const f of fs) {
        const a = Number.isNaN(instant(f.valid_from)) ? t0 : instant(f.valid_from);
        const b = f.valid_to ? instant(f.valid_to) : now;
        const bar = h(`span.tl-bar${f.valid_to ? '' : '.open'}`, { title: `${f.object}: ${fmtFactDate(f.valid_from)} → ${f.valid_to ? fmtFactDate(f.valid_to) : 'now'}`, dataset: { factId: f.id } }, h('span.tl-label', { text: f.object }));
        bar.style.left = `${((a - t0) / span) * 100}%`;
        bar.style.width = `max(3px, ${((Math.max(b, a) - a) / span) * 100}%)`;
        track.append(bar);
      }
      return h('div.tl-row', {}, h('span.tl-pred', { text: pred }), track);
    });
    const axis = h('div.tl-axis', {}, h('span', { text: new Date(t0).getUTCFullYear().toString() }), h('span', { text: 'now' }));
    const items = facts.map((f) =>
      h(
        `li.fact${f.valid_to ? '.past' : '.current'}`,
        { dataset: { id: f.id } },
        h('span.fact-text', {}, h('span.pred', { text: f.predicate }), ' ', h('strong', { text: f.object })),
        h('span.fact-dates', { text: `${fmtFactDate(f.valid_from) || '?'} → ${f.valid_to ? fmtFactDate(f.valid_to) : 'now'}` }),
        h('button.icon-btn', { type: 'button', title: 'Delete', 'aria-label': `Delete the fact ${f.subject} ${f.predicate} ${f.object}`, onclick: () => this.confirmDelete('Delete this fact?', `“${f.subject} ${f.predicate} ${f.object}” will be deleted. A fact it had replaced is true again until this one’s end.`, `/api/utopia/facts/${f.id}`, reload) }, icon('trash')),
      ),
    );
    return h('section.entity', { dataset: { entity: name } }, h('h3', { text: name }), h('div.timeline', { role: 'img', 'aria-label': `Timeline of what was true about ${name}` }, rows, axis), h('ul.facts', {}, items));
  }
}
