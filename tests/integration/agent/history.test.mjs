// Opening a long chat at its last turns: GET /api/sessions/{id}/events?turns=N
// replays from the turn_start of the N-th most recent turn, says in a first
// "history" frame whether earlier turns exist and where they end, and pages
// back with before=SEQ&follow=0 — checked against the full replay of a chat of
// 40 turns (no event missing or repeated), with Last-Event-ID and after taking
// precedence, bad values, other users, a turn running among the last N, and
// the turn-start index doing the lookup.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { stopAll } from '../../lib/harness.mjs';
import { api, events, makeUser, newSession, post, sse, startModels, startTusko, turn, until } from './lib.mjs';

const TURNS = 40;
const SCENARIOS = {
  'h-talk': { steps: [{ text: 'Answer to {{last_user}}', split: 'words' }] },
  'h-tool': { steps: [{ tool_calls: [{ name: 'list_files', arguments: { path: '/workspace' } }] }, { text: 'Listed: {{tool_result}}' }] },
  'h-slow': { steps: [{ text: Array.from({ length: 30 }, (_, i) => `slow${i}`).join(' '), split: 'words', chunk_delay_ms: 100 }] },
};

// A replay that ends (follow=0): { status, head (the history frame or null), events (the rest) }.
async function page(base, user, sid, query, headers = {}) {
  const r = await sse(base, `/api/sessions/${sid}/events?${query}`, { headers: { ...user.auth, ...headers }, timeoutMs: 15000 });
  assert.ok(!r.timedOut, `${query}: the replay did not end`);
  const head = r.events[0] && r.events[0].event === 'history' ? r.events[0] : null;
  const rest = head ? r.events.slice(1) : r.events;
  for (const e of rest) assert.notEqual(e.event, 'history', `${query}: a history frame after the first`);
  if (head) assert.equal(head.id, undefined, 'the history frame has no id');
  return { status: r.status, head: head && head.json, events: rest, text: r.text };
}

const shape = (evs) => evs.map((e) => ({ id: e.id, event: e.event, data: e.data }));
const starts = (evs) => evs.filter((e) => e.event === 'turn_start');

describe('events by turns', () => {
  let ms, stack, base, alice, bob, sid, turnIds, full;

  before(async () => {
    ms = await startModels({ scenarios: SCENARIOS });
    stack = await startTusko(ms, { tag: 'history' });
    base = stack.tusko.url;
    alice = makeUser(stack.pg);
    bob = makeUser(stack.pg);
    sid = await newSession(base, alice);
    turnIds = [];
    for (let i = 0; i < TURNS; i++) {
      const t = await turn(base, alice, sid, `question ${i} #scenario:${i % 4 === 3 ? 'h-tool' : 'h-talk'}`);
      assert.equal(t.end.state, 'done', `turn ${i}`);
      turnIds.push(t.turnId);
    }
    full = await events(base, alice, sid);
    assert.equal(starts(full).length, TURNS);
  });
  after(async () => {
    await stopAll();
    await ms.close();
  });

  test('turns=5 replays exactly the last 5 turns, after a history frame saying where they start', async () => {
    const r = await page(base, alice, sid, 'turns=5&follow=0');
    assert.equal(r.status, 200);
    const from = starts(full).at(-5);
    assert.deepEqual(r.head, { type: 'history', earlier: true, before: Number(from.id) });
    assert.deepEqual(shape(r.events), shape(full.filter((e) => Number(e.id) >= Number(from.id))));
    assert.deepEqual(starts(r.events).map((e) => e.json.turn_id), turnIds.slice(-5));
    assert.equal(r.events[0].event, 'turn_start');
    assert.equal(r.events.at(-1).event, 'turn_end');
    // every event of those turns, tool calls too
    assert.ok(r.events.some((e) => e.event === 'tool_end'));
    // the same start for a following stream (it stays open: read up to the last stored event)
    const last = full.at(-1).id;
    const live = await sse(base, `/api/sessions/${sid}/events?turns=5`, { headers: alice.auth, until: (e) => e.id === last });
    assert.equal(live.events[0].event, 'history');
    assert.deepEqual(live.events[0].json, r.head);
    assert.deepEqual(shape(live.events.slice(1)), shape(r.events));
  });

  test('paging back with before= walks to the first turn with nothing missing or repeated', async () => {
    const first = await page(base, alice, sid, 'turns=5&follow=0');
    const pages = [first.events];
    let head = first.head;
    let n = 0;
    while (head.earlier) {
      const r = await page(base, alice, sid, `turns=7&before=${head.before}&follow=0`);
      assert.equal(r.status, 200);
      assert.ok(r.head, 'every page starts with a history frame');
      assert.ok(r.events.every((e) => Number(e.id) < head.before), 'a page ends before "before"');
      assert.ok(r.events.length > 0);
      assert.equal(r.head.before, Number(r.events[0].id), 'before is the seq of the page\'s first event');
      assert.equal(starts(r.events).length, r.head.earlier ? 7 : (TURNS - 5) % 7 || 7);
      pages.unshift(r.events);
      head = r.head;
      assert.ok(++n <= 10, 'paging did not end');
    }
    assert.equal(n, Math.ceil((TURNS - 5) / 7));
    assert.equal(head.before, Number(full[0].id));
    assert.deepEqual(shape(pages.flat()), shape(full));
    // before on its own bounds a replay that ends
    const upTo = await page(base, alice, sid, `before=${first.head.before}&follow=0`);
    assert.equal(upTo.head, null);
    assert.deepEqual(shape(upTo.events), shape(full.filter((e) => Number(e.id) < first.head.before)));
    // more turns asked than there are: all of it, nothing earlier
    const all = await page(base, alice, sid, 'turns=200&follow=0');
    assert.deepEqual(all.head, { type: 'history', earlier: false, before: Number(full[0].id) });
    assert.deepEqual(shape(all.events), shape(full));
    // exactly as many turns as there are: nothing earlier either
    const exact = await page(base, alice, sid, `turns=${TURNS}&follow=0`);
    assert.deepEqual(exact.head, all.head);
    assert.equal(exact.events.length, full.length);
  });

  test('Last-Event-ID and after take precedence over turns: a resumed stream neither skips nor repeats', async () => {
    const mid = full[Math.floor(full.length / 2)].id;
    const byHeader = await page(base, alice, sid, 'turns=5&follow=0', { 'last-event-id': mid });
    assert.equal(byHeader.head, null, 'no history frame when resuming');
    assert.deepEqual(shape(byHeader.events), shape(full.filter((e) => Number(e.id) > Number(mid))));
    const byAfter = await page(base, alice, sid, 'turns=5&after=0&follow=0');
    assert.equal(byAfter.head, null);
    assert.deepEqual(shape(byAfter.events), shape(full));
    // the header wins over after too, as before
    const both = await page(base, alice, sid, `turns=5&after=0&follow=0`, { 'last-event-id': mid });
    assert.equal(both.events[0].id, full.find((e) => Number(e.id) > Number(mid)).id);
    // a following stream opened with turns= resumes the same way (EventSource reconnecting)
    const last = full.at(-1).id;
    const resumed = await sse(base, `/api/sessions/${sid}/events?turns=5`, { headers: { ...alice.auth, 'last-event-id': mid }, until: (e) => e.id === last });
    assert.deepEqual(shape(resumed.events), shape(full.filter((e) => Number(e.id) > Number(mid))));
  });

  test('bad values are 400 INVALID_REQUEST naming the parameter; other users get 404', async () => {
    for (const [q, name] of [
      ['turns=0', 'turns'],
      ['turns=201', 'turns'],
      ['turns=-1', 'turns'],
      ['turns=abc', 'turns'],
      ['turns=5x', 'turns'],
      ['turns=', 'turns'],
      ['turns=1.5', 'turns'],
      ['turns=5&before=0&follow=0', 'before'],
      ['turns=5&before=x&follow=0', 'before'],
      ['turns=5&before=-3&follow=0', 'before'],
      ['turns=5&before=100', 'before'], // a range that ends is not followed
      ['before=100&follow=1', 'before'],
    ]) {
      const r = await api(base, `/api/sessions/${sid}/events?${q}`, { headers: alice.auth });
      assert.equal(r.status, 400, `${q}: ${r.text}`);
      assert.equal(r.json.code, 'INVALID_REQUEST', q);
      assert.match(r.json.message, new RegExp(`"${name}"`), q);
    }
    for (const q of ['turns=5&follow=0', 'turns=5&before=999999&follow=0', 'turns=5']) {
      const r = await api(base, `/api/sessions/${sid}/events?${q}`, { headers: bob.auth });
      assert.equal(r.status, 404, `bob ${q}: ${r.text}`);
      assert.equal(r.json.code, 'NOT_FOUND');
      const none = await api(base, `/api/sessions/00000000-0000-4000-8000-000000000000/events?${q}`, { headers: alice.auth });
      assert.equal(none.status, 404, q);
    }
    assert.equal((await api(base, `/api/sessions/${sid}/events?turns=5&follow=0`)).status, 401);
    // an empty chat: nothing earlier, nothing replayed
    const empty = await newSession(base, alice);
    const r = await page(base, alice, empty, 'turns=5&follow=0');
    assert.deepEqual(r.head, { type: 'history', earlier: false, before: null });
    assert.deepEqual(r.events, []);
  });

  test('a turn running among the last N streams live after the replay of its start', async () => {
    const s2 = await newSession(base, alice);
    for (let i = 0; i < 3; i++) await turn(base, alice, s2, `warm-up ${i} #scenario:h-talk`);
    const p = await post(base, alice, s2, 'go slowly #scenario:h-slow');
    assert.equal(p.status, 202);
    const tid = p.json.turn_id;
    // some of its text is stored, its end is not
    await until(async () => (await events(base, alice, s2)).some((e) => e.event === 'text' && e.json.turn_id === tid), { what: 'the slow turn\'s first text' });
    const sofar = await events(base, alice, s2);
    assert.ok(!sofar.some((e) => e.event === 'turn_end' && e.json.turn_id === tid), 'the turn was still running');
    const live = await sse(base, `/api/sessions/${s2}/events?turns=2`, {
      headers: alice.auth,
      timeoutMs: 30000,
      until: (e) => e.event === 'turn_end' && e.json && e.json.turn_id === tid,
    });
    assert.equal(live.events[0].event, 'history');
    const st = starts(sofar);
    assert.deepEqual(live.events[0].json, { type: 'history', earlier: true, before: Number(st.at(-2).id) });
    const got = live.events.slice(1);
    assert.equal(got.at(-1).event, 'turn_end');
    assert.ok(got.length > sofar.filter((e) => Number(e.id) >= Number(st.at(-2).id)).length, 'events came live after the replay');
    // exactly the stored events from that turn start on: none missing, none twice
    const stored = await events(base, alice, s2);
    assert.deepEqual(shape(got), shape(stored.filter((e) => Number(e.id) >= Number(st.at(-2).id))));
    assert.equal(got.filter((e) => e.event === 'text' && e.json.turn_id === tid).map((e) => e.json.delta).join(''), SCENARIOS['h-slow'].steps[0].text);
  });

  test('the N-th last turn start is found through the turn-start index, not a scan of the chat', async () => {
    // a database of its own: the index statistics then count this test's
    // look-up alone (statistics of the other tests reach pg_stat_* late)
    const own = await startTusko(ms, { tag: 'history_index' });
    const b2 = own.tusko.url;
    const carol = makeUser(own.pg);
    // a chat with many events: 200 turns of 100 text events each, stored directly
    const big = await newSession(b2, carol);
    own.pg.query(`
      INSERT INTO events (seq, session_id, turn_id, type, data)
      SELECT nextval('events_seq'), '${big}', t.id,
             CASE WHEN k = 0 THEN 'turn_start' ELSE 'text' END,
             json_build_object('type', CASE WHEN k = 0 THEN 'turn_start' ELSE 'text' END,
                               'turn_id', t.id, 'n', t.n, 'k', k)::text
      FROM (SELECT n, gen_random_uuid() AS id FROM generate_series(1, 200) n) t,
           generate_series(0, 99) k
      ORDER BY t.n, k;
      ANALYZE events;`);
    const stat = () => {
      const rows = own.pg.rows("SELECT idx_scan, idx_tup_read FROM pg_stat_user_indexes WHERE indexrelname = 'events_turn_start'");
      assert.equal(rows.length, 1, 'the index events_turn_start exists');
      return rows[0].map(Number);
    };
    const [scans0, read0] = stat();
    const r = await page(b2, carol, big, 'turns=3&follow=0');
    assert.equal(r.head.earlier, true);
    assert.equal(starts(r.events).length, 3);
    assert.equal(r.events.length, 300);
    assert.deepEqual(starts(r.events).map((e) => e.json.n), [198, 199, 200]);
    // (statistics reach pg_stat_* a moment after the query)
    const [scans1, read1] = await until(() => {
      const s = stat();
      return s[0] > scans0 ? s : null;
    }, { what: 'an index scan of events_turn_start', timeoutMs: 20000, stepMs: 250 });
    assert.ok(scans1 > scans0);
    assert.ok(read1 - read0 <= 3 + 2, `read ${read1 - read0} index entries for turns=3`);
  });
});
