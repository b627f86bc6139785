// The sidebar: the user's chats (newest activity first; those scheduled runs
// made grouped apart under "Scheduled"), new chat, rename in
// place, delete with a confirmation, search by title. The list holds the 200
// most recent chats; when there are more, a search also asks the server
// (GET /api/sessions?q=) so older chats are found too.
import { api } from './api.js';
import { $, h, icon } from './html.js';
import { confirmDialog, toast } from './ui.js';

export class Sidebar {
  constructor(root, { onOpen, onNew, onDeleted }) {
    this.root = root;
    this.onOpen = onOpen;
    this.onNew = onNew;
    this.onDeleted = onDeleted;
    this.sessions = [];
    this.more = false; // the server has chats beyond this.sessions
    this.found = null; // {q, sessions}: the server's answer to the current search
    this.current = null;
    this.list = $('#chats', root);
    this.search = $('#search', root);
    this.search.addEventListener('input', () => this.onSearch());
    this.search.addEventListener('keydown', (e) => {
      if (e.key === 'Escape') {
        this.search.value = '';
        this.onSearch();
      }
    });
    $('#new-chat', root).addEventListener('click', () => this.onNew());
  }

  async load() {
    const r = await api('/api/sessions?limit=200');
    this.sessions = r.sessions || [];
    this.more = !!r.has_more;
    this.render();
  }

  onSearch() {
    this.render();
    clearTimeout(this.searchTimer);
    const q = this.search.value.trim();
    if (!q || !this.more) return;
    this.searchTimer = setTimeout(async () => {
      try {
        const r = await api(`/api/sessions?limit=200&q=${encodeURIComponent(q)}`);
        if (this.search.value.trim() !== q) return; // typed on meanwhile
        this.found = { q: q.toLowerCase(), sessions: r.sessions || [] };
        this.render();
      } catch (e) {
        toast(e);
      }
    }, 200);
  }

  upsert(s) {
    const i = this.sessions.findIndex((x) => x.id === s.id);
    if (i >= 0) this.sessions[i] = { ...this.sessions[i], ...s };
    else this.sessions.unshift(s);
    if (this.found) this.found.sessions = this.found.sessions.filter((x) => x.id !== s.id);
    this.render();
  }

  select(id) {
    this.current = id;
    for (const li of this.list.children) li.classList.toggle('current', li.dataset.id === id);
    for (const a of this.list.querySelectorAll('a')) {
      if (a.closest('li').dataset.id === id) a.setAttribute('aria-current', 'page');
      else a.removeAttribute('aria-current');
    }
  }

  render() {
    const q = this.search.value.trim().toLowerCase();
    let shown = this.sessions.filter((s) => !q || (s.title || '').toLowerCase().includes(q));
    if (q && this.found && this.found.q === q) {
      const ids = new Set(shown.map((s) => s.id));
      shown = shown.concat(this.found.sessions.filter((s) => !ids.has(s.id)));
    }
    if (!shown.length) {
      this.list.replaceChildren(h('li.none', { text: q ? 'No chat has that in its title.' : 'No chats yet.' }));
      return;
    }
    // the chats scheduled runs made are grouped apart, after the user's own
    const own = shown.filter((s) => s.origin !== 'scheduled');
    const scheduled = shown.filter((s) => s.origin === 'scheduled');
    this.list.replaceChildren(...own.map((s) => this.item(s)), ...(scheduled.length ? [h('li.group', { id: 'chats-scheduled', text: 'Scheduled' }), ...scheduled.map((s) => this.item(s, true))] : []));
    this.select(this.current);
  }

  item(s, scheduled = false) {
    const a = h('a.chat-link', { href: `/c/${s.id}`, text: s.title || 'New chat', title: s.title || 'New chat' });
    a.addEventListener('click', (e) => {
      if (e.metaKey || e.ctrlKey || e.shiftKey || e.button !== 0) return;
      e.preventDefault();
      this.onOpen(s.id);
    });
    const rename = h('button.icon-btn', { type: 'button', title: 'Rename', 'aria-label': `Rename “${s.title}”`, onclick: () => this.rename(s, li) }, icon('edit'));
    const del = h('button.icon-btn', { type: 'button', title: 'Delete', 'aria-label': `Delete “${s.title}”`, onclick: () => this.confirmDelete(s) }, icon('trash'));
    const li = h('li', { dataset: { id: s.id, origin: scheduled ? 'scheduled' : 'user' } }, a, h('span.actions', {}, rename, del));
    return li;
  }

  rename(s, li) {
    const input = h('input.rename', { type: 'text', value: s.title || '', maxlength: '200', 'aria-label': 'Chat title' });
    let done = false;
    const finish = async (save) => {
      if (done) return;
      done = true;
      const title = input.value.trim();
      if (save && title && title !== s.title) {
        try {
          const r = await api(`/api/sessions/${s.id}`, { method: 'PATCH', json: { title } });
          this.upsert(r);
        } catch (e) {
          toast(e);
          this.render();
        }
      } else this.render();
    };
    input.addEventListener('keydown', (e) => {
      if (e.key === 'Enter') finish(true);
      else if (e.key === 'Escape') finish(false);
    });
    input.addEventListener('blur', () => finish(true));
    li.replaceChildren(input);
    input.focus();
    input.select();
  }

  async confirmDelete(s) {
    if (!(await confirmDialog({ title: 'Delete this chat?', text: `“${s.title}” and its messages will be deleted. Files you downloaded are kept.` }))) return;
    try {
      await api(`/api/sessions/${s.id}`, { method: 'DELETE' });
      this.sessions = this.sessions.filter((x) => x.id !== s.id);
      if (this.found) this.found.sessions = this.found.sessions.filter((x) => x.id !== s.id);
      this.render();
      this.onDeleted(s.id);
    } catch (e) {
      toast(e);
    }
  }
}
