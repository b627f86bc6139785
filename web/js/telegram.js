// The Telegram section of the settings page (docs/NOTIFY.md): whether this
// server has a bot (GET /api/notify/telegram), the linked chat and whether it
// is active; "Link a chat" asks for a one-time code (POST …/link) and shows
// the deep link and the code to paste; the status is polled while a code is
// waiting, so the page shows the link once the bot has it; a test message
// (POST …/test) and unlinking (DELETE …/link).
import { api } from './api.js';
import { h } from './html.js';
import { confirmDialog, toast } from './ui.js';

export class TelegramSection {
  constructor() {
    this.state = h('dl.settings-list', { id: 'telegram-state' });
    this.code = h('div.telegram-code', { hidden: true });
    this.actions = h('div.settings-row');
    this.status = h('p.telegram-status', { role: 'status' });
    this.el = h(
      'section.settings-section',
      { 'aria-labelledby': 'settings-telegram' },
      h('h2', { id: 'settings-telegram', text: 'Telegram' }),
      h('p.muted', { text: 'Scheduled tasks report their runs to a Telegram chat you link here; the agent may send you a message there when you ask it to.' }),
      this.state,
      this.code,
      this.actions,
      this.status,
    );
    this.timer = null;
  }

  async load() {
    try {
      this.render(await api('/api/notify/telegram'));
    } catch (e) {
      this.status.textContent = `Telegram's state could not be loaded: ${e.message}`;
    }
  }

  render(st) {
    this.st = st;
    if (!st.enabled) {
      this.stopPolling();
      this.state.replaceChildren(h('dt', { text: 'Status' }), h('dd', {}, 'off: this server has no Telegram bot configured (', h('code', { text: 'TELEGRAM_BOT_TOKEN' }), ')'));
      this.code.hidden = true;
      this.actions.replaceChildren();
      return;
    }
    const l = st.link;
    const rows = [h('dt', { text: 'Bot' }), h('dd', { text: st.bot ? `@${st.bot}` : 'not known yet (the Bot API has not answered)' })];
    if (!l) rows.push(h('dt', { text: 'Chat' }), h('dd', { text: 'not linked' }));
    else {
      rows.push(h('dt', { text: 'Chat' }), h('dd', { text: `${l.username ? '@' + l.username : 'a private chat'}, linked ${new Date(l.linked_at).toLocaleString()}` }));
      rows.push(h('dt', { text: 'Status' }), h('dd', { text: l.active ? 'active' : `inactive: ${l.inactive_reason || 'unknown'} — link it again` }));
    }
    this.state.replaceChildren(...rows);
    if (l && l.active) {
      this.stopPolling();
      this.code.hidden = true;
    }
    this.actions.replaceChildren(
      h('button.btn', { type: 'button', text: l ? 'Link again' : 'Link a chat', onclick: () => this.link() }),
      l && l.active ? h('button.btn', { type: 'button', text: 'Send a test message', onclick: () => this.test() }) : null,
      l ? h('button.btn.danger', { type: 'button', text: 'Unlink', onclick: () => this.unlink() }) : null,
    );
  }

  async link() {
    try {
      const r = await api('/api/notify/telegram/link', { method: 'POST' });
      const until = new Date(r.expires_at);
      this.code.replaceChildren(
        h('p', {}, 'Open ', h('a', { href: r.link, target: '_blank', rel: 'noopener', text: r.link }), ' and press Start, or send the bot this code in a private chat:'),
        h('p', {}, h('code.telegram-code-text', { text: r.code })),
        h('p.muted', { text: `The code works once, until ${until.toLocaleTimeString()}.` }),
      );
      this.code.hidden = false;
      this.status.textContent = 'Waiting for the bot to receive the code…';
      this.poll(until.getTime());
    } catch (e) {
      toast(`No link code: ${e.message}`);
    }
  }

  poll(deadline) {
    this.stopPolling();
    const since = this.st && this.st.link ? this.st.link.linked_at : null;
    this.timer = setInterval(async () => {
      if (Date.now() > deadline) {
        this.stopPolling();
        this.code.hidden = true;
        this.status.textContent = 'The code expired; ask for a new one.';
        return;
      }
      try {
        const st = await api('/api/notify/telegram');
        if (st.link && st.link.active && st.link.linked_at !== since) {
          this.status.textContent = 'Linked.';
          this.render(st);
        }
      } catch {
        /* the next tick tries again */
      }
    }, 2000);
  }

  stopPolling() {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  async test() {
    try {
      await api('/api/notify/telegram/test', { method: 'POST' });
      this.status.textContent = 'A test message is on its way.';
    } catch (e) {
      toast(`No test message: ${e.message}`);
      this.load();
    }
  }

  async unlink() {
    if (!(await confirmDialog({ title: 'Unlink Telegram?', text: 'Schedules and the agent will send nothing to Telegram until you link a chat again.', action: 'Unlink' }))) return;
    try {
      await api('/api/notify/telegram/link', { method: 'DELETE' });
      this.status.textContent = 'Unlinked.';
    } catch (e) {
      toast(`Not unlinked: ${e.message}`);
    }
    this.load();
  }
}
