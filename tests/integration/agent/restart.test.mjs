// kill -9 of tusko in the middle of a turn, then a restart on the same
// database: the conversation and its events are intact, the interrupted turn
// is marked failed (what was streamed kept once), nothing is duplicated, and the
// chat takes new messages. Also: a second instance sees the first one's events
// (LISTEN/NOTIFY) and cancels its turn.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { startProgram, stopAll } from '../../lib/harness.mjs';
import { api, events, makeUser, messages, newSession, post, sse, startModels, startTusko, textOf, turn, until, untilTurnEnd, tuskoEnv } from './lib.mjs';

const SCENARIOS = {
  long: { steps: [{ text: Array.from({ length: 60 }, (_, i) => `word${i}`).join(' '), chunk_delay_ms: 100 }] },
};

describe('restart and many instances', () => {
  let ms;
  before(async () => {
    ms = await startModels({ scenarios: SCENARIOS });
  });
  after(async () => {
    await stopAll();
    await ms.close();
  });

  test('kill -9 mid-turn, restart: intact, failed, nothing duplicated', async () => {
    const first = await startTusko(ms);
    const { pg } = first;
    const u = makeUser(pg);
    const sid = await newSession(first.tusko.url, u);
    const done = await turn(first.tusko.url, u, sid, 'before #scenario:text');
    assert.equal(done.end.state, 'done');
    const r = await post(first.tusko.url, u, sid, 'long one #scenario:long');
    assert.equal(r.status, 202);
    const turnId = r.json.turn_id;
    // wait until some of the answer streamed (and was stored: events are stored first)
    await sse(first.tusko.url, `/api/sessions/${sid}/events`, {
      headers: u.auth,
      timeoutMs: 15000,
      until: (e, all) => all.filter((x) => x.event === 'text' && x.json.turn_id === turnId).length >= 3,
    });
    const seen = await events(first.tusko.url, u, sid);
    await first.tusko.kill9();

    const second = await startProgram('tusko', { env: tuskoEnv(pg, ms) });
    const base = second.url;
    // the interrupted turn is failed by the new instance (the old one's lock is gone)
    await until(async () => {
      const t = await api(base, `/api/turns/${turnId}/trace`, { headers: u.auth });
      return t.json && t.json.turn.state === 'failed';
    }, { timeoutMs: 30000, what: 'the interrupted turn to be marked failed' });
    const tr = await api(base, `/api/turns/${turnId}/trace`, { headers: u.auth });
    assert.equal(tr.json.turn.error_code, 'INTERRUPTED');
    const all = await events(base, u, sid);
    // everything seen before the kill is still there, unchanged, in order
    assert.deepEqual(all.slice(0, seen.length).map((e) => [e.id, e.data]), seen.map((e) => [e.id, e.data]));
    const ids = all.map((e) => Number(e.id));
    assert.equal(new Set(ids).size, ids.length, 'no event id twice');
    assert.deepEqual([...ids].sort((a, b) => a - b), ids, 'ids increase');
    const mine = all.filter((e) => e.json.turn_id === turnId);
    const ends = mine.filter((e) => e.event === 'turn_end');
    assert.equal(ends.length, 1);
    assert.equal(ends[0].json.state, 'failed');
    assert.equal(mine.filter((e) => e.event === 'error' && e.json.code === 'INTERRUPTED').length, 1);
    // the conversation: the first turn, the user message, the partial answer once
    const msgs = await messages(base, u, sid);
    assert.deepEqual(msgs.map((m) => m.role), ['user', 'assistant', 'user', 'assistant']);
    const streamed = textOf(mine);
    assert.ok(streamed.startsWith('word0 word1 word2'), streamed);
    assert.equal(msgs[3].content, streamed);
    assert.equal(msgs[3].partial, true);
    // the chat goes on
    const next = await turn(base, u, sid, 'after #scenario:text');
    assert.equal(next.end.state, 'done');
    // and a second sweep changes nothing (no duplicates)
    await new Promise((r2) => setTimeout(r2, 200));
    const again = await events(base, u, sid);
    assert.equal(again.filter((e) => e.json.turn_id === turnId).length, mine.length);
    assert.equal((await messages(base, u, sid)).length, 6);
  });

  test('two instances on one database: events and cancel cross over', async () => {
    const a = await startTusko(ms);
    const b = await startProgram('tusko', { env: tuskoEnv(a.pg, ms) });
    const u = makeUser(a.pg);
    const sid = await newSession(a.tusko.url, u);
    // a listener on B, the turn on A
    const live = sse(b.url, `/api/sessions/${sid}/events`, {
      headers: u.auth,
      timeoutMs: 20000,
      until: (e) => e.event === 'turn_end',
    });
    await new Promise((r) => setTimeout(r, 300));
    const r = await post(a.tusko.url, u, sid, 'long #scenario:long');
    assert.equal(r.status, 202);
    await sse(b.url, `/api/sessions/${sid}/events`, { headers: u.auth, timeoutMs: 10000, until: (e) => e.event === 'text' });
    // cancel through B: the turn runs on A
    const c = await api(b.url, `/api/sessions/${sid}/cancel`, { method: 'POST', headers: u.auth });
    assert.equal(c.status, 202);
    const got = await live;
    const end = got.events.at(-1);
    assert.equal(end.event, 'turn_end');
    assert.equal(end.json.state, 'cancelled');
    // B's live stream equals what A stored
    const stored = await events(a.tusko.url, u, sid);
    assert.deepEqual(got.events.map((e) => e.id), stored.map((e) => e.id));
    const ends = await untilTurnEnd(a.tusko.url, u, sid, r.json.turn_id);
    assert.equal(ends.at(-1).json.state, 'cancelled');
  });
});
