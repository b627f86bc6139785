// The Files panel's snapshots (docs/SNAPSHOTS.md): the chat's workspace
// snapshots in the S3 store, newest first, with size and time; "Snapshot
// now"; restore into this chat (after the user confirms: it overwrites the
// workspace's files) and delete. Errors are said in the section itself.
import { api, ApiError } from './api.js';
import { fmtBytes, h, icon } from './html.js';
import { confirmDialog } from './ui.js';

export class SnapshotsView {
  constructor({ onRestored = () => {} } = {}) {
    this.sessionId = null;
    this.onRestored = onRestored;
    this.takeBtn = h('button.btn.small', { type: 'button', onclick: () => this.take() }, icon('upload'), 'Snapshot now');
    this.status = h('p.snap-status', { role: 'status' });
    this.list = h('ul.snap-list', { 'aria-label': 'Workspace snapshots' });
    this.el = h('section.snapshots', { 'aria-label': 'Snapshots' }, h('div.pane-head', {}, h('span', { text: 'Snapshots' }), this.takeBtn), this.status, this.list);
    this.el.hidden = true;
    this.busy = false;
  }

  setSession(id) {
    this.sessionId = id;
    this.list.replaceChildren();
    this.say('');
    this.el.hidden = !id;
  }

  say(text, error = false) {
    this.status.textContent = text;
    this.status.classList.toggle('error', error);
  }

  async load() {
    const sid = this.sessionId;
    if (!sid) return;
    try {
      const r = await api(`/api/sessions/${sid}/snapshots`);
      if (sid !== this.sessionId) return;
      this.takeBtn.hidden = false;
      this.render(r.snapshots || []);
    } catch (e) {
      if (sid !== this.sessionId) return;
      this.list.replaceChildren();
      if (e instanceof ApiError && e.code === 'SNAPSHOTS_OFF') {
        this.takeBtn.hidden = true;
        this.say('Snapshots are off on this server (no object store is configured, or it did not answer).');
      } else this.say(`The snapshots could not be listed: ${e.message}`, true);
    }
  }

  render(snaps) {
    if (!snaps.length) {
      this.list.replaceChildren(h('li.snap-empty', { text: 'No snapshots of this workspace yet.' }));
      return;
    }
    this.list.replaceChildren(
      ...snaps.map((s) => {
        const when = new Date(s.created_at);
        const ok = s.status === 'ready';
        const restore = h('button.btn.small', { type: 'button', disabled: !ok, title: 'Restore into this chat', onclick: () => this.restore(s, restore) }, icon('retry'), 'Restore');
        const del = h('button.icon-btn', { type: 'button', title: 'Delete', 'aria-label': `Delete the snapshot of ${when.toLocaleString()}`, onclick: () => this.remove(s, del) }, icon('trash'));
        return h(
          'li.snap',
          { dataset: { id: s.id, status: s.status } },
          h('div.snap-what', {}, h('time', { datetime: s.created_at, text: when.toLocaleString() }), ok ? h('span.size', { text: `${fmtBytes(s.bytes)} · ${s.files} ${s.files === 1 ? 'file' : 'files'}` }) : h('span.error', { text: `failed: ${s.error || 'unknown error'}` })),
          h('div.snap-actions', {}, restore, del),
        );
      }),
    );
  }

  // Runs one action at a time; a failure is shown in the section.
  async act(btn, what) {
    if (this.busy) return;
    this.busy = true;
    btn.disabled = true;
    this.takeBtn.disabled = true;
    try {
      await what();
    } catch (e) {
      this.say(e.message, true);
    } finally {
      this.busy = false;
      btn.disabled = false;
      this.takeBtn.disabled = false;
    }
  }

  take() {
    const sid = this.sessionId;
    return this.act(this.takeBtn, async () => {
      this.say('Taking a snapshot of /workspace…');
      let r;
      try {
        r = await api(`/api/sessions/${sid}/snapshots`, { method: 'POST' });
      } catch (e) {
        if (sid !== this.sessionId) return;
        // a failed snapshot is recorded (502 with its row): list it too
        if (e instanceof ApiError && e.body && e.body.status === 'failed') {
          await this.load();
          throw new Error(`The snapshot failed: ${e.body.error}`);
        }
        if (e instanceof ApiError && e.code === 'NOTHING_TO_SNAPSHOT') throw new Error('Nothing to snapshot: this chat has no workspace yet.');
        throw new Error(`The snapshot failed: ${e.message}`);
      }
      if (sid !== this.sessionId) return;
      if (r && r.status === 'unchanged') this.say('Nothing changed since the last snapshot: nothing was stored.');
      else this.say(`Snapshot stored: ${r.files} ${r.files === 1 ? 'file' : 'files'}, ${fmtBytes(r.bytes)}.`);
      await this.load();
    });
  }

  async restore(s, btn) {
    const when = new Date(s.created_at).toLocaleString();
    if (!(await confirmDialog({ title: 'Restore this snapshot?', text: `The files of the snapshot of ${when} overwrite the same files in /workspace. Files it does not hold are kept.`, action: 'Restore' }))) return;
    const sid = this.sessionId;
    await this.act(btn, async () => {
      this.say('Restoring…');
      const r = await api(`/api/sessions/${sid}/snapshots/${s.id}/restore`, { method: 'POST', json: { confirm: true } });
      const d = r.differs || [];
      this.say(`Restored ${r.restored} ${r.restored === 1 ? 'file' : 'files'} (${fmtBytes(r.bytes)})` + (d.length ? `; differs from its manifest: ${d.map((x) => `${x.path} (${x.why})`).join(', ')}.` : '.'), d.length > 0);
      this.onRestored();
    });
  }

  async remove(s, btn) {
    const when = new Date(s.created_at).toLocaleString();
    if (!(await confirmDialog({ title: 'Delete this snapshot?', text: `The snapshot of ${when} is deleted from the object store.` }))) return;
    const sid = this.sessionId;
    await this.act(btn, async () => {
      await api(`/api/sessions/${sid}/snapshots/${s.id}`, { method: 'DELETE' });
      this.say('Snapshot deleted.');
      await this.load();
    });
  }
}
