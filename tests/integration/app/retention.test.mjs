// CHAT_RETENTION: chats not touched for that long are deleted (with their
// messages and events, as DELETE /api/sessions/{id} deletes them); a fresh
// chat stays, and so does an old one while its turn runs — until it ends.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { stopAll } from '../../lib/harness.mjs';
import { api, makeUser, newSession, post, startModels, startTusko, turn, until, untilTurnEnd } from '../agent/lib.mjs';

const SCENARIOS = {
  quick: { steps: [{ text: 'a short answer' }] },
  slow: { steps: [{ text: Array.from({ length: 80 }, (_, i) => `w${i}`).join(' '), chunk_delay_ms: 500 }] },
};

describe('CHAT_RETENTION', () => {
  let ms;
  before(async () => {
    ms = await startModels({ scenarios: SCENARIOS });
  });
  after(async () => {
    await stopAll();
    await ms.close();
  });

  test('an untouched chat goes, a fresh one and one with a running turn stay', async () => {
    const { tusko, pg } = await startTusko(ms, { env: { CHAT_RETENTION: '30m' }, tag: 'retention' });
    const base = tusko.url;
    const u = makeUser(pg);
    const [old, fresh, busy] = [await newSession(base, u), await newSession(base, u), await newSession(base, u)];
    for (const sid of [old, fresh]) assert.equal((await turn(base, u, sid, 'hello #scenario:quick')).end.state, 'done');
    const p = await post(base, u, busy, 'go on #scenario:slow');
    assert.equal(p.status, 202, p.text);
    // an hour without a message, for two of them
    pg.query(`UPDATE chat_sessions SET updated_at = now() - interval '1 hour' WHERE id IN ('${old}', '${busy}')`);
    assert.ok(Number(pg.rows(`SELECT count(*) FROM events WHERE session_id = '${old}'`)[0][0]) >= 3);

    await until(async () => (await api(base, `/api/sessions/${old}`, { headers: u.auth })).status === 404, {
      timeoutMs: 30000,
      what: 'the untouched chat to be deleted',
    });
    for (const t of ['messages', 'events', 'turns']) assert.deepEqual(pg.rows(`SELECT count(*) FROM ${t} WHERE session_id = '${old}'`), [['0']], t);
    assert.match(tusko.log(), new RegExp(`chat session deleted: not touched within CHAT_RETENTION" session=${old}`));
    // the fresh one is there with its messages; the old one with a running turn too
    assert.equal((await api(base, `/api/sessions/${fresh}/messages`, { headers: u.auth })).json.messages.length, 2);
    assert.equal((await api(base, `/api/sessions/${busy}`, { headers: u.auth })).status, 200);
    assert.equal((await api(base, `/api/turns/${p.json.turn_id}/trace`, { headers: u.auth })).json.turn.state, 'running');

    // once its turn has ended, the old chat goes as well
    assert.equal((await api(base, `/api/sessions/${busy}/cancel`, { method: 'POST', headers: u.auth })).status, 202);
    await untilTurnEnd(base, u, busy, p.json.turn_id);
    pg.query(`UPDATE chat_sessions SET updated_at = now() - interval '1 hour' WHERE id = '${busy}'`);
    await until(async () => (await api(base, `/api/sessions/${busy}`, { headers: u.auth })).status === 404, {
      timeoutMs: 30000,
      what: 'the old chat to be deleted once its turn ended',
    });
    assert.equal((await api(base, `/api/sessions/${fresh}`, { headers: u.auth })).status, 200);
  });
});
