// The admin page (/admin), for admins only (the server answers 403 to anyone
// else; the side-nav shows the entry only when GET /api/me says role admin):
// the accounts (role, disable, delete) and the audit log (filtered by action,
// paged, exported as JSON lines). docs/ADMIN.md.
import { api } from './api.js';
import { h } from './html.js';
import { confirmDialog, toast } from './ui.js';

export class AdminView {
  constructor(root) {
    this.users = h('div.table-wrap');
    this.auditFilter = h('input', { id: 'admin-audit-action', type: 'search', placeholder: 'action, e.g. auth.', 'aria-label': 'Filter by action' });
    this.auditFilter.addEventListener('change', () => this.loadAudit());
    this.audit = h('div.table-wrap');
    this.more = h('button.btn', { type: 'button', text: 'Older entries', hidden: true, onclick: () => this.loadAudit(this.next) });
    this.exportLink = h('a.btn', { href: '/api/admin/audit?format=jsonl', download: 'tusko-audit.jsonl', text: 'Export JSON lines' });
    root.append(
      section('Users', 'admin-users', this.users),
      section('Audit log', 'admin-audit', h('div.settings-row', {}, this.auditFilter, this.exportLink), this.audit, this.more),
    );
  }

  shown(me) {
    this.me = me;
    this.loadUsers().catch(toast);
    this.loadAudit().catch(toast);
  }

  async loadUsers() {
    const { users } = await api('/api/admin/users');
    const row = (u) => {
      const role = h('select', { 'aria-label': `Role of ${u.email || u.id}` }, h('option', { value: 'user', text: 'user' }), h('option', { value: 'admin', text: 'admin' }));
      role.value = u.role;
      role.addEventListener('change', () => this.patch(u, { role: role.value }));
      const dis = h('button.btn', { type: 'button', text: u.disabled ? 'Enable' : 'Disable', onclick: () => this.patch(u, { disabled: !u.disabled }) });
      const del = h('button.btn.danger', {
        type: 'button',
        text: 'Delete',
        disabled: u.id === this.me.id,
        onclick: async () => {
          if (!(await confirmDialog({ title: `Delete ${u.email || u.id}?`, text: 'The account and everything it owns (chats, files, memories, schedules) are removed for good.' }))) return;
          await api(`/api/admin/users/${u.id}`, { method: 'DELETE' }).catch(toast);
          this.loadUsers().catch(toast);
        },
      });
      return h(
        'tr',
        { dataset: { user: u.id } },
        h('td', { text: u.email || u.name || u.id }),
        h('td', {}, role),
        h('td', { text: u.disabled ? 'disabled' : 'active' }),
        h('td', { text: u.last_seen_at ? new Date(u.last_seen_at).toLocaleString() : 'never' }),
        h('td', {}, dis, ' ', del),
      );
    };
    this.users.replaceChildren(
      h(
        'table.settings-tools',
        { 'aria-label': 'Users' },
        h('thead', {}, h('tr', {}, ['Account', 'Role', 'State', 'Last seen', ''].map((t) => h('th', { text: t })))),
        h('tbody', {}, users.map(row)),
      ),
    );
  }

  async patch(u, change) {
    try {
      await api(`/api/admin/users/${u.id}`, { method: 'PATCH', json: change });
    } catch (e) {
      toast(e);
    }
    await this.loadUsers().catch(toast);
    this.loadAudit().catch(toast);
  }

  async loadAudit(before) {
    const q = new URLSearchParams({ limit: '50' });
    const action = this.auditFilter.value.trim();
    if (action) q.set('action', action);
    if (before) q.set('before', before);
    this.exportLink.href = `/api/admin/audit?format=jsonl${action ? `&action=${encodeURIComponent(action)}` : ''}`;
    const { entries, next_before } = await api(`/api/admin/audit?${q}`);
    this.next = next_before;
    this.more.hidden = !next_before;
    const rows = entries.map((e) =>
      h(
        'tr',
        { dataset: { action: e.action } },
        h('td', { text: new Date(e.at).toLocaleString() }),
        h('td', {}, h('code', { text: e.action })),
        h('td', { text: e.actor_email || e.actor_id || e.actor }),
        h('td', { text: e.ip || '' }),
        h('td', {}, h('code', { text: [e.account_id, e.target].filter(Boolean).join(' ') })),
        h('td', {}, h('code', { text: JSON.stringify(e.detail) })),
      ),
    );
    let tbody = before && this.audit.querySelector('tbody');
    if (tbody) return tbody.append(...rows);
    tbody = h('tbody', {}, rows);
    this.audit.replaceChildren(h('table.settings-tools', { 'aria-label': 'Audit log' }, h('thead', {}, h('tr', {}, ['When', 'Action', 'Who', 'From', 'On', 'Detail'].map((t) => h('th', { text: t })))), tbody));
  }
}

function section(title, id, ...body) {
  return h('section.settings-section', { 'aria-labelledby': id }, h('h2', { id, text: title }), ...body);
}
