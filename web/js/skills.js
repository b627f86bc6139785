// The Skills section of the settings page: every skill the user has (the
// built-ins and their own, GET /api/skills), each turned on or off for them
// (PATCH), exported as a .skill file, or (their own) deleted; and an upload of
// a SKILL.md, .zip or .skill file (POST /api/skills, the file as the body).
// A skill an admin installed for everyone says so, and only its admin deletes it.
// A change tells the composer to load its "/" menu again (skills-changed).
import { api } from './api.js';
import { h } from './html.js';
import { confirmDialog, toast } from './ui.js';

export class SkillsSection {
  constructor() {
    this.file = h('input', { type: 'file', id: 'skill-upload', accept: '.md,.zip,.skill,text/markdown,application/zip', onchange: () => this.upload() });
    this.status = h('p.skills-status', { role: 'status' });
    this.list = h('ul.skills-list', { 'aria-label': 'Your skills' });
    this.el = h(
      'section.settings-section',
      { 'aria-labelledby': 'settings-skills' },
      h('h2', { id: 'settings-skills', text: 'Skills' }),
      h('p.muted', { text: 'Type / at the start of a message to use one. Add your own as a SKILL.md, or a .zip or .skill file of its folder.' }),
      h('div.settings-row', {}, h('label', { for: 'skill-upload', text: 'Upload a skill' }), this.file),
      this.status,
      this.list,
    );
  }

  async load() {
    try {
      const r = await api('/api/skills');
      this.render((r && r.skills) || []);
    } catch (e) {
      this.status.textContent = `The skills could not be loaded: ${e.message}`;
    }
  }

  render(skills) {
    this.list.replaceChildren(
      ...skills.map((s) => {
        const on = h('input', { type: 'checkbox', checked: !!s.enabled, 'aria-label': `Use ${s.name}`, onchange: (e) => this.setEnabled(s, e.target.checked) });
        return h(
          'li.skill',
          { dataset: { skill: s.name } },
          h('div.skill-head', {}, h('label.skill-toggle', {}, on, h('strong', { text: `/${s.name}` })), s.builtin ? h('span.badge', { text: 'built-in' }) : h('span.badge', { text: `v${s.version}` }), s.shared ? h('span.badge', { text: 'for everyone' }) : null),
          h('p.skill-desc', { text: s.description }),
          h(
            'div.skill-actions',
            {},
            h('a.btn', { href: `/api/skills/${encodeURIComponent(s.name)}/export`, download: `${s.name}.skill`, text: 'Export' }),
            s.builtin || s.mine === false ? null : h('button.btn.danger', { type: 'button', text: 'Delete', onclick: () => this.remove(s) }),
          ),
        );
      }),
    );
  }

  changed(msg) {
    if (msg) this.status.textContent = msg;
    window.dispatchEvent(new Event('skills-changed'));
    return this.load();
  }

  async setEnabled(s, on) {
    try {
      await api(`/api/skills/${encodeURIComponent(s.name)}`, { method: 'PATCH', json: { enabled: on } });
      await this.changed(`/${s.name} is ${on ? 'on' : 'off'}.`);
    } catch (e) {
      toast(e);
      await this.load();
    }
  }

  async remove(s) {
    if (!(await confirmDialog({ title: `Delete /${s.name}?`, text: 'Every version of this skill is deleted. Chats that used it keep what it said.' }))) return;
    try {
      await api(`/api/skills/${encodeURIComponent(s.name)}`, { method: 'DELETE' });
      await this.changed(`/${s.name} deleted.`);
    } catch (e) {
      toast(e);
    }
  }

  async upload() {
    const f = this.file.files && this.file.files[0];
    if (!f) return;
    this.status.textContent = `Uploading ${f.name}…`;
    try {
      const r = await api('/api/skills', { method: 'POST', body: f, headers: { 'Content-Type': f.type || 'application/octet-stream' } });
      const warn = r.warnings && r.warnings.length ? ` Warnings: ${r.warnings.join('; ')}.` : '';
      await this.changed(r.created ? `/${r.name} added (version ${r.version}).${warn}` : `/${r.name} is unchanged (the same as version ${r.version}).`);
    } catch (e) {
      this.status.textContent = `Not added: ${e.message}`;
    }
    this.file.value = '';
  }
}
