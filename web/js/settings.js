// The settings page (/settings): the theme, the account (who is signed in,
// how; sign out), the skills (skills.js), Telegram (telegram.js), and what this server offers (whether the agent may write
// and run code, and the settings it lacks when not; the models; the tools by
// lane, as the server declares them). Everything but the theme is the server's: shown, not changed here.
import { h, icon } from './html.js';
import { initTheme } from './theme.js';
import { SkillsSection } from './skills.js';
import { TelegramSection } from './telegram.js';
import { laneBadge } from './ui.js';

export class SettingsView {
  constructor(root, { onSignOut }) {
    this.theme = h('select', { id: 'settings-theme' }, h('option', { value: 'system', text: 'System' }), h('option', { value: 'light', text: 'Light' }), h('option', { value: 'dark', text: 'Dark' }));
    initTheme(this.theme);
    this.account = h('dl.settings-list');
    this.server = h('dl.settings-list');
    this.tools = h('div.table-wrap');
    this.signOut = h('button.btn', { type: 'button', onclick: onSignOut }, icon('signout'), 'Sign out');
    this.skills = new SkillsSection();
    this.telegram = new TelegramSection();
    root.append(
      section('Appearance', 'settings-appearance', h('div.settings-row', {}, h('label', { for: 'settings-theme', text: 'Theme' }), this.theme)),
      section('Account', 'settings-account', this.account, this.signOut),
      this.skills.el,
      this.telegram.el,
      section('This server', 'settings-server', this.server, this.tools),
    );
  }

  // me: GET /api/me; models: GET /api/models's list; agent: GET /api/agent.
  render(me, models, agent) {
    this.skills.load();
    this.telegram.load();
    this.account.replaceChildren(...pair('Email', me.email || 'API token'), ...pair('Signed in with', me.auth === 'token' ? 'an API token' : 'a session in this browser'));
    const ex = me.execution || {};
    const br = me.browser || {};
    this.server.replaceChildren(
      ...pair(
        'Code execution',
        ex.enabled ? h('span', { text: 'on: the agent may write files and run code in a sandbox of each chat' }) : h('span', {}, 'off: this server has no sandbox service configured', ex.missing && ex.missing.length ? [' (missing: ', ...ex.missing.flatMap((m, i) => [i ? ', ' : '', h('code', { text: m })]), ')'] : ''),
      ),
      ...pair(
        'Browser',
        br.enabled ? h('span', { text: `on: the agent may browse the web in a browser of each chat (at most ${br.max_per_user} at once per user)` }) : h('span', {}, 'off: this server has no browser service configured', br.missing && br.missing.length ? [' (missing: ', ...br.missing.flatMap((m, i) => [i ? ', ' : '', h('code', { text: m })]), ')'] : ''),
      ),
      ...pair('Models', models.length ? h('ul.settings-models', {}, models.map((m) => h('li', {}, h('code', { text: m.id }), m.id === me.default_model ? ' (default)' : ''))) : 'none allowed'),
    );
    const tools = (agent && agent.tools) || [];
    this.tools.replaceChildren(
      h(
        'table.settings-tools',
        { 'aria-label': 'The agent’s tools' },
        h('thead', {}, h('tr', {}, h('th', { text: 'Tool' }), h('th', { text: 'Lane' }), h('th', { text: 'Now' }))),
        h(
          'tbody',
          {},
          tools.map((t) =>
            h(
              'tr',
              { dataset: { tool: t.name } },
              h('td', {}, h('code', { text: t.name }), t.changes_files ? h('span.muted', { text: ' · changes files' }) : null),
              h('td', {}, laneBadge(t.lane)),
              h('td', { text: t.offered ? 'offered' : 'off' }),
            ),
          ),
        ),
      ),
    );
  }
}

function section(title, id, ...body) {
  return h('section.settings-section', { 'aria-labelledby': id }, h('h2', { id, text: title }), ...body);
}

function pair(term, value) {
  return [h('dt', { text: term }), value instanceof Node ? h('dd', {}, value) : h('dd', { text: value })];
}
