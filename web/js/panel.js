// The side panel: tabs for the chat's workspace (Files) and the trace of a
// turn (Trace). A feature adds its own tab with addTab() (the browser's live
// view will).
import { $, h } from './html.js';

export class Panel {
  constructor(root) {
    this.root = root;
    this.tabs = new Map();
    this.tablist = $('[role="tablist"]', root);
    this.body = $('.panel-body', root);
    this.current = null;
    this.tablist.addEventListener('keydown', (e) => {
      const keys = [...this.tabs.keys()];
      const i = keys.indexOf(this.current);
      if (e.key === 'ArrowRight' || e.key === 'ArrowLeft') {
        e.preventDefault();
        const next = keys[(i + (e.key === 'ArrowRight' ? 1 : keys.length - 1)) % keys.length];
        this.show(next);
        this.tabs.get(next).button.focus();
      }
    });
    $('#panel-close', root).addEventListener('click', () => this.close());
  }

  // tab: { id, label, view: {el, shown?()} }
  addTab(id, label, view) {
    const button = h('button.tab', { type: 'button', role: 'tab', id: `tab-${id}`, 'aria-controls': `pane-${id}`, 'aria-selected': 'false', tabindex: '-1', text: label, onclick: () => this.show(id) });
    const pane = h('div.pane', { role: 'tabpanel', id: `pane-${id}`, 'aria-labelledby': `tab-${id}`, hidden: true }, view.el);
    this.tablist.append(button);
    this.body.append(pane);
    this.tabs.set(id, { button, pane, view });
    if (!this.current) this.show(id, false);
  }

  show(id, open = true) {
    for (const [k, t] of this.tabs) {
      const on = k === id;
      t.button.setAttribute('aria-selected', on ? 'true' : 'false');
      t.button.tabIndex = on ? 0 : -1;
      t.pane.hidden = !on;
    }
    this.current = id;
    if (open) this.open();
    const v = this.tabs.get(id).view;
    if (v.shown) v.shown();
  }

  isOpen() {
    return document.body.classList.contains('panel-open');
  }

  open() {
    document.body.classList.add('panel-open');
    $('#panel-toggle').setAttribute('aria-expanded', 'true');
  }

  close() {
    document.body.classList.remove('panel-open');
    $('#panel-toggle').setAttribute('aria-expanded', 'false');
  }

  toggle() {
    if (this.isOpen()) this.close();
    else this.show(this.current || [...this.tabs.keys()][0]);
  }
}
