// The composer: a growing textarea (Enter sends, Shift+Enter is a new line),
// the model picker, the "/" skills menu, the send/stop button, and file
// uploads by drag and drop or the attach button.
import { api } from './api.js';
import { $, h, icon } from './html.js';

export class Composer {
  constructor(root, { onSend, onStop, onUpload, onModel }) {
    this.root = root;
    this.onSend = onSend;
    this.onStop = onStop;
    this.onUpload = onUpload;
    this.onModel = onModel;
    this.busy = false;
    this.skills = null;
    window.addEventListener('skills-changed', () => (this.skills = null)); // loaded again on the next "/"
    this.input = $('#prompt', root);
    this.send = $('#send', root);
    this.model = $('#model', root);
    this.menu = $('#skills', root);
    this.file = $('#file-input', root);
    this.input.addEventListener('keydown', (e) => this.keydown(e));
    this.input.addEventListener('input', () => this.changed());
    this.send.addEventListener('click', () => (this.busy ? this.onStop() : this.submit()));
    this.model.addEventListener('change', () => this.onModel(this.model.value));
    $('#attach', root).addEventListener('click', () => this.file.click());
    this.file.addEventListener('change', () => {
      if (this.file.files.length) this.onUpload([...this.file.files]);
      this.file.value = '';
    });
    this.changed();
  }

  setModels(models, current) {
    this.model.replaceChildren(...models.map((m) => h('option', { value: m.id, text: m.id })));
    if (current) this.model.value = current;
    this.model.disabled = models.length === 0;
  }

  setModel(id) {
    if (id && [...this.model.options].some((o) => o.value === id)) this.model.value = id;
  }

  setBusy(busy) {
    this.busy = busy;
    this.send.classList.toggle('stop', busy);
    this.send.setAttribute('aria-label', busy ? 'Stop' : 'Send');
    this.send.title = busy ? 'Stop the answer' : 'Send (Enter)';
    this.send.replaceChildren(icon(busy ? 'stop' : 'send'));
    this.changed();
  }

  focus() {
    this.input.focus();
  }

  changed() {
    // grow with the text, up to the CSS max-height
    this.input.style.height = 'auto';
    this.input.style.height = `${this.input.scrollHeight}px`;
    this.send.disabled = !this.busy && this.input.value.trim() === '';
    const v = this.input.value;
    if (v.startsWith('/') && !/\s/.test(v)) this.openSkills(v.slice(1));
    else this.closeSkills();
  }

  keydown(e) {
    if (!this.menu.hidden && this.menuKey(e)) return;
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      if (!this.busy) this.submit();
    } else if (e.key === 'Escape' && this.busy) {
      e.preventDefault();
      this.onStop();
    }
  }

  submit() {
    const text = this.input.value.trim();
    if (!text || this.busy) return;
    this.input.value = '';
    this.changed();
    this.onSend(text, this.model.value || null);
  }

  // ---------- skills ----------

  async loadSkills() {
    if (this.skills) return this.skills;
    try {
      const r = await api('/api/skills');
      this.skills = ((r && r.skills) || []).filter((s) => s.enabled !== false); // the disabled ones are not offered
    } catch {
      this.skills = []; // the server offers none
    }
    return this.skills;
  }

  async openSkills(q) {
    const skills = await this.loadSkills();
    if (!this.input.value.startsWith('/')) return;
    const list = skills.filter((s) => s.name.toLowerCase().includes(q.toLowerCase()));
    this.sel = 0;
    const items = list.map((s, i) =>
      h('li', { role: 'option', id: `skill-${i}`, 'aria-selected': i === 0 ? 'true' : 'false', onmousedown: (e) => (e.preventDefault(), this.pick(s)) }, h('strong', { text: `/${s.name}` }), h('span', { text: s.description || '' })),
    );
    this.menu.replaceChildren(h('div.menu-title', { text: 'Skills' }), items.length ? h('ul', { role: 'listbox', 'aria-label': 'Skills' }, items) : h('p.none', { text: skills.length ? 'No skill matches.' : 'No skills yet. Skills you add will be listed here.' }));
    this.menuItems = list;
    this.menu.hidden = false;
    this.input.setAttribute('aria-expanded', 'true');
  }

  closeSkills() {
    if (this.menu.hidden) return;
    this.menu.hidden = true;
    this.input.setAttribute('aria-expanded', 'false');
  }

  menuKey(e) {
    const n = (this.menuItems || []).length;
    if (e.key === 'Escape') {
      e.preventDefault();
      this.closeSkills();
      return true;
    }
    if (!n) return false;
    if (e.key === 'ArrowDown' || e.key === 'ArrowUp') {
      e.preventDefault();
      this.sel = (this.sel + (e.key === 'ArrowDown' ? 1 : n - 1)) % n;
      [...this.menu.querySelectorAll('li')].forEach((li, i) => li.setAttribute('aria-selected', i === this.sel ? 'true' : 'false'));
      return true;
    }
    if (e.key === 'Enter' || e.key === 'Tab') {
      e.preventDefault();
      this.pick(this.menuItems[this.sel]);
      return true;
    }
    return false;
  }

  pick(skill) {
    this.input.value = `/${skill.name} `;
    this.closeSkills();
    this.changed();
    this.input.focus();
  }
}
