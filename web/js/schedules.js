// The Schedules page (/schedules): the user's scheduled tasks through
// /api/schedules (docs/API.md, docs/SCHEDULES.md). Create one with a readable
// preview of the expression ("every weekday at 09:00, Europe/Berlin") and its
// next fire times (GET /api/schedules/preview, the server's own checks), the
// zone defaulting to the browser's; each schedule's next fire times, its run
// history (newest first, a link to each run's chat), pause / resume, run now,
// delete.
import { api } from './api.js';
import { h, icon } from './html.js';
import { describeCron } from './cron_words.js';
import { confirmDialog, toast } from './ui.js';

function fmtTime(s) {
  if (!s) return '—';
  const d = new Date(s);
  return Number.isNaN(d.getTime()) ? String(s) : d.toLocaleString(undefined, { year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' });
}

// "2026-12-03T09:00:00+01:00" as it reads in the zone: "2026-12-03 09:00 (+01:00)".
function fmtLocal(s) {
  const m = /^(\d{4}-\d\d-\d\d)T(\d\d:\d\d):\d\d([+-]\d\d:\d\d)$/.exec(s || '');
  return m ? `${m[1]} ${m[2]} (${m[3]})` : s;
}

function field(label, input, hint) {
  return h('label.sched-field', {}, h('span.sched-label', { text: label }), input, hint ? h('span.muted.sched-hint', { text: hint }) : null);
}

export class SchedulesView {
  constructor({ onOpenChat, onRunsChanged }) {
    this.onOpenChat = onOpenChat;
    this.onRunsChanged = onRunsChanged; // a run made a chat: the sidebar lists it
    this.zone = Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC';
    this.name = h('input', { id: 'sched-name', type: 'text', maxlength: '200', placeholder: 'Morning report' });
    this.prompt = h('textarea', { id: 'sched-prompt', rows: '3', placeholder: 'What the agent should do at each run' });
    this.cron = h('input', { id: 'sched-cron', type: 'text', value: '0 9 * * mon-fri', spellcheck: 'false', autocomplete: 'off' });
    this.tz = h('input', { id: 'sched-tz', type: 'text', value: this.zone, spellcheck: 'false', autocomplete: 'off' });
    this.missed = h('select', { id: 'sched-missed' }, h('option', { value: 'skip', text: 'skip them (record them as missed)' }), h('option', { value: 'run_once', text: 'run the newest once' }));
    this.notify = h('select', { id: 'sched-notify' }, h('option', { value: 'failure', text: 'when a run fails' }), h('option', { value: 'always', text: 'after every run' }), h('option', { value: 'never', text: 'never' }));
    this.pauseAfter = h('input', { id: 'sched-pause-after', type: 'checkbox' });
    this.preview = h('div.sched-preview', { id: 'sched-preview', 'aria-live': 'polite' });
    this.createBtn = h('button.btn.primary', { type: 'submit' }, icon('plus'), 'Create schedule');
    this.form = h(
      'form.sched-form.settings-section',
      { 'aria-labelledby': 'sched-new-title', onsubmit: (e) => this.create(e) },
      h('h2', { id: 'sched-new-title', text: 'New schedule' }),
      field('Name', this.name),
      field('Prompt', this.prompt),
      h('div.sched-row', {}, field('When (cron)', this.cron, 'minute hour day month weekday, @daily, or a time like 2026-12-24T09:00:00+01:00'), field('Time zone', this.tz)),
      field('Missed while the server was down', this.missed),
      h('div.sched-row', {}, field('Tell me on Telegram', this.notify), h('label.sched-check', {}, this.pauseAfter, ' Pause it after 3 failed runs in a row (an alert goes to Telegram either way)')),
      this.preview,
      this.createBtn,
    );
    for (const el of [this.cron, this.tz]) el.addEventListener('input', () => this.schedulePreview());
    this.list = h('ul.sched-list', { id: 'sched-list', 'aria-label': 'Your schedules' });
    this.el = h('div.schedules', {}, this.form, this.list);
  }

  async shown() {
    this.updatePreview();
    await this.load();
  }

  schedulePreview() {
    clearTimeout(this.previewTimer);
    this.previewTimer = setTimeout(() => this.updatePreview(), 250);
  }

  async updatePreview() {
    const cron = this.cron.value.trim();
    const tz = this.tz.value.trim();
    const seq = (this.previewSeq = (this.previewSeq || 0) + 1);
    if (!cron) {
      this.preview.replaceChildren();
      return;
    }
    try {
      const r = await api(`/api/schedules/preview?cron=${encodeURIComponent(cron)}&timezone=${encodeURIComponent(tz)}`);
      if (seq !== this.previewSeq) return;
      const words = describeCron(cron, tz);
      this.preview.classList.remove('error');
      this.preview.replaceChildren(words ? h('p.sched-words', { text: words }) : null, this.firesList(r.next_fires, tz));
    } catch (e) {
      if (seq !== this.previewSeq) return;
      this.preview.classList.add('error');
      this.preview.replaceChildren(h('p', { role: 'alert', text: e.message }));
    }
  }

  firesList(fires, tz) {
    if (!fires.length) return h('p.muted', { text: 'It fires no more.' });
    return h(
      'ol.sched-fires',
      { 'aria-label': 'Next fire times' },
      fires.map((f) => h('li', {}, h('span', { text: fmtLocal(f.local) }), h('span.muted', { text: ` ${tz} · ${f.utc.replace('T', ' ').replace(/:00Z$/, ' UTC')}` }))),
    );
  }

  async create(e) {
    e.preventDefault();
    this.createBtn.disabled = true;
    try {
      await api('/api/schedules', {
        method: 'POST',
        json: { name: this.name.value.trim() || undefined, prompt: this.prompt.value, cron: this.cron.value.trim(), timezone: this.tz.value.trim(), missed_policy: this.missed.value, notify: this.notify.value, pause_after_alert: this.pauseAfter.checked },
      });
      this.name.value = '';
      this.prompt.value = '';
      toast('Schedule created.');
      await this.load();
    } catch (ex) {
      toast(ex);
    } finally {
      this.createBtn.disabled = false;
    }
  }

  async load() {
    let r;
    try {
      r = await api('/api/schedules');
    } catch (e) {
      return toast(e);
    }
    const items = r.schedules || [];
    if (!items.length) {
      this.list.replaceChildren(h('li.none', { text: 'No schedules yet.' }));
      return;
    }
    this.list.replaceChildren(...items.map((s) => this.item(s)));
  }

  item(s) {
    const runs = h('div.sched-runs', { hidden: true });
    const pause = h('button.btn.small', { type: 'button', text: s.paused ? 'Resume' : 'Pause', onclick: () => this.patch(s, { paused: !s.paused }) });
    const runNow = h('button.btn.small', { type: 'button', text: 'Run now', onclick: () => this.runNow(s, runs) });
    const hist = h('button.btn.small', { type: 'button', text: 'History', 'aria-expanded': 'false', onclick: () => this.toggleRuns(s, runs, hist) });
    const del = h('button.icon-btn', { type: 'button', title: 'Delete', 'aria-label': `Delete “${s.name || s.prompt}”`, onclick: () => this.remove(s) }, icon('trash'));
    const words = describeCron(s.cron, s.timezone);
    return h(
      'li.sched-item',
      { dataset: { id: s.id, paused: String(s.paused) } },
      h(
        'div.sched-head',
        {},
        h('strong.sched-title', { text: s.name || s.prompt.slice(0, 60) }),
        s.paused ? h('span.sched-badge', { text: 'paused' }) : null,
        h('span.sched-actions', {}, pause, runNow, hist, del),
      ),
      h('p.sched-expr', {}, h('code', { text: s.cron }), ' · ', words || s.timezone),
      h('p.muted.sched-prompt', { text: s.prompt }),
      s.paused ? h('p.muted.sched-paused', { text: `${s.paused_reason ? `Paused: ${s.paused_reason}.` : 'Paused:'} Nothing fires until it is resumed (the slots it was paused over are not run).` }) : this.firesList(s.next_fires || [], s.timezone),
      runs,
    );
  }

  async patch(s, body) {
    try {
      await api(`/api/schedules/${s.id}`, { method: 'PATCH', json: body });
      await this.load();
    } catch (e) {
      toast(e);
    }
  }

  async runNow(s, runs) {
    try {
      await api(`/api/schedules/${s.id}/run`, { method: 'POST' });
      toast('Run queued.');
      runs.hidden = false;
      const btn = runs.closest('li').querySelector('[aria-expanded]');
      if (btn) btn.setAttribute('aria-expanded', 'true');
      this.followRuns(s, runs);
    } catch (e) {
      toast(e);
    }
  }

  async toggleRuns(s, runs, btn) {
    runs.hidden = !runs.hidden;
    btn.setAttribute('aria-expanded', String(!runs.hidden));
    if (!runs.hidden) await this.loadRuns(s, runs);
  }

  // Reloads the history while a run is queued or running (a few minutes at most).
  async followRuns(s, runs) {
    for (let i = 0; i < 300; i++) {
      const list = await this.loadRuns(s, runs);
      if (list && list.some((r) => r.session_id) && this.onRunsChanged) this.onRunsChanged();
      if (!list || !list.some((r) => r.status === 'queued' || r.status === 'running') || runs.hidden || !runs.isConnected) return;
      await new Promise((ok) => setTimeout(ok, 1000));
    }
  }

  async loadRuns(s, runs, before) {
    let r;
    try {
      r = await api(`/api/schedules/${s.id}/runs?limit=20${before ? `&before=${encodeURIComponent(before)}` : ''}`);
    } catch (e) {
      toast(e);
      return null;
    }
    const rows = (r.runs || []).map((x) =>
      h(
        'tr',
        { dataset: { status: x.status, run: x.id } },
        h('td', { text: fmtTime(x.scheduled_for) }),
        h('td', {}, h('span.run-status', { dataset: { status: x.status }, text: x.status.replace('_', ' ') }), x.trigger !== 'schedule' ? h('span.muted', { text: ` (${x.trigger.replace('_', '-')})` }) : null),
        h(
          'td',
          {},
          x.session_id
            ? h('a', {
                href: `/c/${x.session_id}`,
                text: 'open chat',
                onclick: (e) => {
                  if (e.metaKey || e.ctrlKey || e.shiftKey || e.button !== 0) return;
                  e.preventDefault();
                  this.onOpenChat(x.session_id);
                },
              })
            : null,
        ),
        h('td.run-detail', { text: x.error || x.summary || '' }),
      ),
    );
    const table = h(
      'table.sched-runs-table',
      { 'aria-label': 'Run history' },
      h('thead', {}, h('tr', {}, h('th', { text: 'Scheduled for' }), h('th', { text: 'Status' }), h('th', { text: 'Chat' }), h('th', { text: 'Summary or error' }))),
      h('tbody', {}, rows.length ? rows : h('tr', {}, h('td', { colspan: '4', class: 'muted', text: 'No runs yet.' }))),
    );
    const more = r.has_more ? h('button.btn.small', { type: 'button', text: 'Older runs', onclick: () => this.loadRuns(s, runs, r.next_before) }) : null;
    runs.replaceChildren(h('div.table-wrap', {}, table), more);
    return r.runs || [];
  }

  async remove(s) {
    if (!(await confirmDialog({ title: 'Delete this schedule?', text: `“${s.name || s.prompt.slice(0, 60)}” will fire no more. Its run history and chats are kept.` }))) return;
    try {
      await api(`/api/schedules/${s.id}`, { method: 'DELETE' });
      await this.load();
    } catch (e) {
      toast(e);
    }
  }
}
