// The Files tab: the chat's /workspace through the read-only API (reads use
// getExistingOpenSandbox on the server: looking never starts a container),
// previews of text, code, images and CSV (as a table), and downloads (the
// server keeps a copy, then the browser saves it); below, the workspace's
// snapshots (snapshots.js).
import { api, ApiError } from './api.js';
import { clear, fmtBytes, h, icon } from './html.js';
import { SnapshotsView } from './snapshots.js';
import { renderPreview } from './ui.js';

export class FilesView {
  constructor() {
    this.sessionId = null;
    this.tree = h('ul.tree', { role: 'tree', 'aria-label': 'Workspace files' });
    this.status = h('p.files-status');
    this.preview = h('div.preview', { hidden: true });
    this.refreshBtn = h('button.icon-btn', { type: 'button', title: 'Refresh', 'aria-label': 'Refresh files', onclick: () => this.load() }, icon('retry'));
    this.snapshots = new SnapshotsView({ onRestored: () => this.load() });
    this.el = h('div.files', {}, h('div.pane-head', {}, h('span.path', { text: '/workspace' }), this.refreshBtn), this.status, this.tree, this.preview, this.snapshots.el);
    this.timer = null;
    this.loaded = false;
  }

  setSession(id) {
    this.sessionId = id;
    this.loaded = false;
    clear(this.tree);
    this.preview.hidden = true;
    this.snapshots.setSession(id);
    this.status.textContent = id ? '' : 'Files the agent writes in this chat appear here.';
    if (id && this.isVisible()) this.load();
  }

  isVisible() {
    return this.el.offsetParent !== null;
  }

  shown() {
    if (!this.loaded && this.sessionId) this.load();
  }

  // Called when a turn may have changed files: reload soon (once).
  changed() {
    this.loaded = false;
    if (!this.isVisible()) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.load(), 150);
  }

  async load() {
    const sid = this.sessionId;
    if (!sid) return;
    this.loaded = true;
    this.snapshots.load();
    try {
      const r = await api(`/api/sessions/${sid}/files?path=${encodeURIComponent('/workspace')}&depth=5`);
      if (sid !== this.sessionId) return;
      if (r.sandbox === false) {
        // no live sandbox: the server did not start one to look (and says why)
        clear(this.tree);
        const m = r.message || 'nothing here yet';
        this.status.textContent = m.charAt(0).toUpperCase() + m.slice(1) + (/[.!]$/.test(m) ? '' : '.');
        return;
      }
      this.renderTree(r.entries || []);
    } catch (e) {
      if (sid !== this.sessionId) return;
      clear(this.tree);
      if (e instanceof ApiError && e.code === 'NOTHING_HERE_YET') this.status.textContent = 'Nothing here yet: this chat has no sandbox. Files appear once the agent writes one.';
      else this.status.textContent = `The files could not be listed: ${e.message}`;
    }
  }

  renderTree(entries) {
    this.status.textContent = entries.length ? '' : '/workspace is empty.';
    // entries carry full paths; build the tree from them
    const root = { children: new Map() };
    const sorted = [...entries].sort((a, b) => a.path.localeCompare(b.path));
    for (const e of sorted) {
      const rel = e.path.replace(/^\/workspace\/?/, '');
      if (!rel) continue;
      let node = root;
      const parts = rel.split('/');
      parts.forEach((p, i) => {
        if (!node.children.has(p)) node.children.set(p, { name: p, children: new Map(), entry: null });
        node = node.children.get(p);
        if (i === parts.length - 1) node.entry = e;
      });
    }
    const build = (node, depth) =>
      [...node.children.values()]
        .sort((a, b) => isDir(b) - isDir(a) || a.name.localeCompare(b.name))
        .map((c) => {
          const dir = isDir(c);
          const path = c.entry ? c.entry.path : null;
          const btn = h(
            'button.file',
            { type: 'button', role: 'treeitem', dataset: { path: path || '' }, 'aria-expanded': dir ? 'true' : undefined },
            icon(dir ? 'folder' : 'file'),
            h('span.name', { text: c.name }),
            !dir && c.entry && c.entry.size !== undefined ? h('span.size', { text: fmtBytes(c.entry.size) }) : null,
          );
          btn.style.paddingInlineStart = `${0.5 + depth * 1}rem`;
          const li = h('li', {}, btn);
          if (dir) {
            const sub = h('ul', { role: 'group' }, build(c, depth + 1));
            li.append(sub);
            btn.addEventListener('click', () => {
              sub.hidden = !sub.hidden;
              btn.setAttribute('aria-expanded', sub.hidden ? 'false' : 'true');
            });
          } else if (path) btn.addEventListener('click', () => this.open(c.entry));
          return li;
        });
    this.tree.replaceChildren(...build(root, 0));
  }

  async open(entry) {
    for (const b of this.tree.querySelectorAll('.file')) b.classList.toggle('selected', b.dataset.path === entry.path);
    const name = entry.path.split('/').pop();
    const dl = h('button.btn.small', { type: 'button', onclick: () => this.download(entry.path, dl) }, icon('download'), 'Download');
    const body = h('div.preview-body', {}, h('p.muted', { text: 'Loading…' }));
    this.preview.replaceChildren(h('div.preview-head', {}, h('span.name', { text: name, title: entry.path }), h('span.size', { text: fmtBytes(entry.size) }), dl), body);
    this.preview.hidden = false;
    try {
      const p = await api(`/api/sessions/${this.sessionId}/files/preview?path=${encodeURIComponent(entry.path)}`);
      body.replaceChildren(...renderPreview(p, name));
    } catch (e) {
      body.replaceChildren(h('p.error', { text: `No preview: ${e.message}` }));
    }
  }

  async download(path, btn) {
    btn.disabled = true;
    try {
      const d = await api(`/api/sessions/${this.sessionId}/files/download`, { method: 'POST', json: { path } });
      const a = h('a', { href: d.url, download: d.name || '' });
      document.body.append(a);
      a.click();
      a.remove();
    } catch (e) {
      btn.after(h('span.error', { text: ` ${e.message}` }));
    } finally {
      btn.disabled = false;
    }
  }
}

function isDir(node) {
  if (node.entry) return /^dir/.test(node.entry.type || '') ? 1 : 0;
  return node.children.size ? 1 : 0;
}
