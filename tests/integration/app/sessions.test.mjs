// Chat sessions: create, list, get, rename, delete, messages; one user never
// sees another's sessions — their ids answer 404, never 403.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { api, stopAll } from '../../lib/harness.mjs';
import { makeUser, startTusko } from './lib.mjs';

after(stopAll);

describe('chat sessions', () => {
  let t, alice, bob;
  before(async () => {
    t = await startTusko({ tag: 'sessions' });
    alice = makeUser(t.pg, 'alice@example.com');
    bob = makeUser(t.pg, 'bob@example.com');
  });

  test('create with defaults, then with a title and an allowed model', async () => {
    let r = await api(t.tusko.url, '/api/sessions', { method: 'POST', headers: alice.auth });
    assert.equal(r.status, 201, r.text);
    assert.match(r.json.id, /^[0-9a-f-]{36}$/);
    assert.equal(r.json.title, 'New chat');
    assert.equal(r.json.model, null);
    assert.ok(!Number.isNaN(Date.parse(r.json.created_at)));
    assert.equal(r.json.user_id, undefined, 'the owner column is not exposed');
    assert.equal(r.headers.get('location'), `/api/sessions/${r.json.id}`);
    r = await api(t.tusko.url, '/api/sessions', { json: { title: 'Q3 deck ✨', model: 'anthropic:claude-sonnet-4' }, headers: alice.auth });
    assert.equal(r.status, 201);
    assert.equal(r.json.title, 'Q3 deck ✨');
    assert.equal(r.json.model, 'anthropic:claude-sonnet-4');
    // a bare model name is accepted when one provider offers it, and stored in full
    r = await api(t.tusko.url, '/api/sessions', { json: { model: 'gpt-4o-mini' }, headers: alice.auth });
    assert.equal(r.status, 201);
    assert.equal(r.json.model, 'openai:gpt-4o-mini');
  });

  test('bad fields are refused with 400', async () => {
    const cases = [
      [{ model: 'openai:gpt-5-secret' }, 'MODEL_NOT_ALLOWED'],
      [{ model: 'anthropic:gpt-4o-mini' }, 'MODEL_NOT_ALLOWED'],
      [{ model: 42 }, 'MODEL_NOT_ALLOWED'],
      [{ title: '' }, 'INVALID_REQUEST'],
      [{ title: 'x'.repeat(201) }, 'INVALID_REQUEST'],
      [{ title: 'a\nb' }, 'INVALID_REQUEST'],
      [{ title: 7 }, 'INVALID_REQUEST'],
      [[1, 2], 'INVALID_REQUEST'],
    ];
    for (const [json, code] of cases) {
      const r = await api(t.tusko.url, '/api/sessions', { json, headers: alice.auth });
      assert.equal(r.status, 400, JSON.stringify(json));
      assert.equal(r.json.code, code, JSON.stringify(json));
    }
    const ok = await api(t.tusko.url, '/api/sessions', { json: { title: 'é'.repeat(200) }, headers: alice.auth });
    assert.equal(ok.status, 201, '200 characters (400 bytes) is within the limit');
  });

  test('list is newest first, paginated, and only the caller’s', async () => {
    const mine = [];
    for (let i = 0; i < 3; i++) mine.push((await api(t.tusko.url, '/api/sessions', { json: { title: `b${i}` }, headers: bob.auth })).json.id);
    let r = await api(t.tusko.url, '/api/sessions', { headers: bob.auth });
    assert.equal(r.status, 200);
    assert.deepEqual(r.json.sessions.map((s) => s.id), [...mine].reverse());
    assert.equal(r.json.has_more, false);
    r = await api(t.tusko.url, '/api/sessions?limit=2', { headers: bob.auth });
    assert.deepEqual(r.json.sessions.map((s) => s.id), [mine[2], mine[1]]);
    assert.equal(r.json.has_more, true);
    r = await api(t.tusko.url, '/api/sessions?limit=2&offset=2', { headers: bob.auth });
    assert.deepEqual(r.json.sessions.map((s) => s.id), [mine[0]]);
    assert.equal(r.json.has_more, false);
    const a = await api(t.tusko.url, '/api/sessions?limit=200', { headers: alice.auth });
    assert.ok(a.json.sessions.length >= 4);
    assert.ok(a.json.sessions.every((s) => !mine.includes(s.id)), 'alice does not see bob’s sessions');
    for (const q of ['limit=0', 'limit=201', 'limit=x', 'offset=-1'])
      assert.equal((await api(t.tusko.url, `/api/sessions?${q}`, { headers: bob.auth })).status, 400, q);
  });

  test('q finds the caller’s chats by title, ignoring case, beyond the first page', async () => {
    const carol = makeUser(t.pg, 'carol-q@example.com');
    const made = {};
    for (const title of ['Trip to Lisbon', 'budget 2027', 'LISBON hotels', 'Ünïcode Ärger', 'x_100%']) made[title] = (await api(t.tusko.url, '/api/sessions', { json: { title }, headers: carol.auth })).json.id;
    for (let i = 0; i < 5; i++) await api(t.tusko.url, '/api/sessions', { json: { title: `filler ${i}` }, headers: carol.auth });
    const titles = async (q, extra = '') => {
      const r = await api(t.tusko.url, `/api/sessions?q=${encodeURIComponent(q)}${extra}`, { headers: carol.auth });
      assert.equal(r.status, 200, q);
      return r.json.sessions.map((x) => x.title);
    };
    assert.deepEqual(await titles('lisbon'), ['LISBON hotels', 'Trip to Lisbon'], 'case-insensitive, newest first');
    assert.deepEqual(await titles('ärger'), ['Ünïcode Ärger'], 'non-ASCII letters fold too');
    assert.deepEqual(await titles('_1'), ['x_100%'], '_ is a character, not a wildcard');
    assert.deepEqual(await titles('%'), ['x_100%'], '% is a character, not a wildcard');
    assert.deepEqual(await titles('no such title'), []);
    // the oldest chat is past a one-item page of the unfiltered list, found by q
    const page = await api(t.tusko.url, '/api/sessions?limit=1', { headers: carol.auth });
    assert.ok(!page.json.sessions.some((x) => x.title === 'Trip to Lisbon'));
    const r = await api(t.tusko.url, '/api/sessions?q=lisbon&limit=1', { headers: carol.auth });
    assert.deepEqual(r.json.sessions.map((x) => x.title), ['LISBON hotels']);
    assert.equal(r.json.has_more, true);
    assert.equal((await titles('')).length, 10, 'an empty q filters nothing');
    // another user's chats never match
    const bobs = await api(t.tusko.url, '/api/sessions?q=b', { headers: bob.auth });
    assert.ok(bobs.json.sessions.every((x) => !Object.values(made).includes(x.id)));
    for (const q of ['%FF', encodeURIComponent('a'.repeat(201))]) {
      const bad = await api(t.tusko.url, `/api/sessions?q=${q}`, { headers: carol.auth });
      assert.equal(bad.status, 400, q);
      assert.match(bad.json.message, /"q"/);
    }
  });

  test('get, rename (PATCH) and change the model', async () => {
    const id = (await api(t.tusko.url, '/api/sessions', { json: { title: 'old' }, headers: alice.auth })).json.id;
    let r = await api(t.tusko.url, `/api/sessions/${id}`, { headers: alice.auth });
    assert.equal(r.status, 200);
    assert.equal(r.json.title, 'old');
    r = await api(t.tusko.url, `/api/sessions/${id}`, { method: 'PATCH', json: { title: 'new name' }, headers: alice.auth });
    assert.equal(r.status, 200);
    assert.equal(r.json.title, 'new name');
    assert.ok(Date.parse(r.json.updated_at) >= Date.parse(r.json.created_at));
    r = await api(t.tusko.url, `/api/sessions/${id}`, { method: 'PATCH', json: { model: 'anthropic:claude-sonnet-4' }, headers: alice.auth });
    assert.equal(r.json.model, 'anthropic:claude-sonnet-4');
    assert.equal(r.json.title, 'new name');
    r = await api(t.tusko.url, `/api/sessions/${id}`, { method: 'PATCH', json: { model: null }, headers: alice.auth });
    assert.equal(r.json.model, null);
    r = await api(t.tusko.url, `/api/sessions/${id}`, { method: 'PATCH', json: {}, headers: alice.auth });
    assert.equal(r.status, 400);
    r = await api(t.tusko.url, `/api/sessions/${id}`, { method: 'PATCH', json: { model: 'openai:nope' }, headers: alice.auth });
    assert.equal(r.status, 400);
    assert.equal(r.json.code, 'MODEL_NOT_ALLOWED');
    // the renamed session is now first in the list
    r = await api(t.tusko.url, '/api/sessions', { headers: alice.auth });
    assert.equal(r.json.sessions[0].id, id);
  });

  test('messages are listed in order, paginated by seq', async () => {
    const id = (await api(t.tusko.url, '/api/sessions', { json: {}, headers: alice.auth })).json.id;
    let r = await api(t.tusko.url, `/api/sessions/${id}/messages`, { headers: alice.auth });
    assert.equal(r.status, 200);
    assert.deepEqual(r.json.messages, []);
    t.pg.query(`INSERT INTO messages (id, session_id, role, content) VALUES
      (gen_random_uuid(), '${id}', 'user', 'hello'),
      (gen_random_uuid(), '${id}', 'assistant', 'hi there'),
      (gen_random_uuid(), '${id}', 'user', 'bye')`);
    r = await api(t.tusko.url, `/api/sessions/${id}/messages`, { headers: alice.auth });
    assert.deepEqual(r.json.messages.map((m) => [m.role, m.content]), [['user', 'hello'], ['assistant', 'hi there'], ['user', 'bye']]);
    assert.equal(r.json.messages[0].session_id, undefined);
    const seqs = r.json.messages.map((m) => m.seq);
    assert.ok(seqs[0] < seqs[1] && seqs[1] < seqs[2]);
    r = await api(t.tusko.url, `/api/sessions/${id}/messages?after=${seqs[0]}&limit=1`, { headers: alice.auth });
    assert.deepEqual(r.json.messages.map((m) => m.content), ['hi there']);
    assert.equal(r.json.has_more, true);
  });

  test('another user’s session ids answer 404 on every route, and change nothing', async () => {
    const id = (await api(t.tusko.url, '/api/sessions', { json: { title: 'alice private' }, headers: alice.auth })).json.id;
    t.pg.query(`INSERT INTO messages (id, session_id, role, content) VALUES (gen_random_uuid(), '${id}', 'user', 'secret')`);
    const tries = [
      ['GET', `/api/sessions/${id}`],
      ['PATCH', `/api/sessions/${id}`, { title: 'pwned' }],
      ['DELETE', `/api/sessions/${id}`],
      ['GET', `/api/sessions/${id}/messages`],
    ];
    for (const [method, p, json] of tries) {
      const r = await api(t.tusko.url, p, { method, json, headers: bob.auth });
      assert.equal(r.status, 404, `${method} ${p}`);
      assert.equal(r.json.code, 'NOT_FOUND');
      assert.doesNotMatch(r.text, /alice|secret/);
    }
    // a malformed id and an unknown one answer the same
    for (const bad of ['not-a-uuid', '00000000-0000-4000-8000-000000000000', `${id}x`, id.toUpperCase().replace(/./, 'Z')]) {
      const r = await api(t.tusko.url, `/api/sessions/${encodeURIComponent(bad)}`, { headers: bob.auth });
      assert.equal(r.status, 404, bad);
    }
    const r = await api(t.tusko.url, `/api/sessions/${id}`, { headers: alice.auth });
    assert.equal(r.json.title, 'alice private', 'untouched');
  });

  test('delete removes the session and its messages; a second delete is 404', async () => {
    const id = (await api(t.tusko.url, '/api/sessions', { json: {}, headers: alice.auth })).json.id;
    t.pg.query(`INSERT INTO messages (id, session_id, role, content) VALUES (gen_random_uuid(), '${id}', 'user', 'x')`);
    let r = await api(t.tusko.url, `/api/sessions/${id}`, { method: 'DELETE', headers: alice.auth });
    assert.equal(r.status, 204);
    assert.equal(t.pg.rows(`SELECT count(*) FROM messages WHERE session_id = '${id}'`)[0][0], '0');
    r = await api(t.tusko.url, `/api/sessions/${id}`, { headers: alice.auth });
    assert.equal(r.status, 404);
    r = await api(t.tusko.url, `/api/sessions/${id}`, { method: 'DELETE', headers: alice.auth });
    assert.equal(r.status, 404);
    r = await api(t.tusko.url, `/api/sessions/${id}/messages`, { headers: alice.auth });
    assert.equal(r.status, 404);
  });
});

// The answers of every route to the letter where a refactor could change them:
// "no such chat session" for malformed, unknown and others' ids on every route,
// what a route checks first, the pages' has_more, the parameters' messages, and
// 503 DB_UNAVAILABLE when the database fails a query (the table renamed away).
describe('chat sessions: error answers and pages', () => {
  let t, dana, eve;
  const NOT_FOUND = { code: 'NOT_FOUND', message: 'no such chat session' };
  const DB = { code: 'DB_UNAVAILABLE', message: 'the database is unavailable; try again shortly' };
  before(async () => {
    t = await startTusko({ tag: 'sessionserr' });
    dana = makeUser(t.pg, 'dana@example.com');
    eve = makeUser(t.pg, 'eve@example.com');
  });

  test('malformed, unknown and another user\'s ids: 404 "no such chat session" on every route', async () => {
    const evesId = (await api(t.tusko.url, '/api/sessions', { json: { title: 'eve' }, headers: eve.auth })).json.id;
    for (const id of ['not-a-uuid', '00000000-0000-4000-8000-000000000000', evesId]) {
      for (const [method, p, json] of [
        ['GET', `/api/sessions/${id}`],
        ['PATCH', `/api/sessions/${id}`, { title: 'x' }],
        ['PATCH', `/api/sessions/${id}`, { model: null }],
        ['DELETE', `/api/sessions/${id}`],
        ['GET', `/api/sessions/${id}/messages`],
      ]) {
        const r = await api(t.tusko.url, p, { method, json, headers: dana.auth });
        assert.equal(r.status, 404, `${method} ${p}: ${r.text}`);
        assert.deepEqual(r.json, NOT_FOUND, `${method} ${p}`);
      }
    }
    const r = await api(t.tusko.url, `/api/sessions/${evesId}`, { headers: eve.auth });
    assert.equal(r.json.title, 'eve', 'untouched');
  });

  test('PATCH checks its body before the id; messages check their parameters before the id', async () => {
    for (const [json, code, message] of [
      [{}, 'INVALID_REQUEST', 'give "title" and/or "model" to change'],
      [{ title: 7 }, 'INVALID_REQUEST', '"title" must be a string'],
      [{ model: 'openai:nope' }, 'MODEL_NOT_ALLOWED', '"model" must be one of GET /api/models'],
    ]) {
      const r = await api(t.tusko.url, '/api/sessions/not-a-uuid', { method: 'PATCH', json, headers: dana.auth });
      assert.equal(r.status, 400, r.text);
      assert.deepEqual(r.json, { code, message });
    }
    let r = await api(t.tusko.url, '/api/sessions/not-a-uuid', { method: 'PATCH', headers: dana.auth });
    assert.equal(r.status, 400, r.text);
    assert.equal(r.json.code, 'INVALID_JSON');
    for (const [q, message] of [
      ['limit=0', '"limit" must be an integer from 1 to 1000'],
      ['limit=1001', '"limit" must be an integer from 1 to 1000'],
      ['after=-1', '"after" must be an integer from 0 to 9223372036854775807'],
    ]) {
      r = await api(t.tusko.url, `/api/sessions/not-a-uuid/messages?${q}`, { headers: dana.auth });
      assert.equal(r.status, 400, q);
      assert.deepEqual(r.json, { code: 'INVALID_REQUEST', message }, q);
    }
    for (const [q, message] of [
      ['limit=201', '"limit" must be an integer from 1 to 200'],
      ['offset=1000001', '"offset" must be an integer from 0 to 1000000'],
    ]) {
      r = await api(t.tusko.url, `/api/sessions?${q}`, { headers: dana.auth });
      assert.deepEqual(r.json, { code: 'INVALID_REQUEST', message }, q);
    }
  });

  test('pages: has_more exactly when there is more, on both lists', async () => {
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push((await api(t.tusko.url, '/api/sessions', { json: { title: `p${i}` }, headers: dana.auth })).json.id);
    const list = async (q) => (await api(t.tusko.url, `/api/sessions?${q}`, { headers: dana.auth })).json;
    let j = await list('limit=3');
    assert.deepEqual(Object.keys(j).sort(), ['has_more', 'sessions']);
    assert.deepEqual([j.sessions.length, j.has_more], [3, false]);
    j = await list('limit=2&offset=1');
    assert.deepEqual([j.sessions.map((s) => s.id), j.has_more], [[ids[1], ids[0]], false]);
    j = await list('limit=1&offset=1');
    assert.deepEqual([j.sessions.map((s) => s.id), j.has_more], [[ids[1]], true]);
    const sid = ids[0];
    t.pg.query(`INSERT INTO messages (id, session_id, role, content) VALUES
      (gen_random_uuid(), '${sid}', 'user', 'm1'), (gen_random_uuid(), '${sid}', 'assistant', 'm2')`);
    const msgs = async (q) => (await api(t.tusko.url, `/api/sessions/${sid}/messages?${q}`, { headers: dana.auth })).json;
    j = await msgs('limit=2');
    assert.deepEqual(Object.keys(j).sort(), ['has_more', 'messages']);
    assert.deepEqual([j.messages.map((m) => m.content), j.has_more], [['m1', 'm2'], false]);
    j = await msgs('limit=1');
    assert.deepEqual([j.messages.map((m) => m.content), j.has_more], [['m1'], true]);
    j = await msgs(`after=${j.messages[0].seq}`);
    assert.deepEqual([j.messages.map((m) => m.content), j.has_more], [['m2'], false]);
    // GET and PATCH answer the row itself
    const got = (await api(t.tusko.url, `/api/sessions/${sid}`, { headers: dana.auth })).json;
    assert.deepEqual(Object.keys(got).sort(), ['created_at', 'id', 'model', 'origin', 'schedule_id', 'title', 'updated_at']);
    assert.deepEqual([got.origin, got.schedule_id], ['user', null]);
    const patched = await api(t.tusko.url, `/api/sessions/${sid}`, { method: 'PATCH', json: { title: 'renamed' }, headers: dana.auth });
    assert.equal(patched.status, 200);
    assert.deepEqual({ ...patched.json, updated_at: 0 }, { ...got, title: 'renamed', updated_at: 0 });
  });

  test('a failing database answers 503 DB_UNAVAILABLE on every route', async () => {
    const id = (await api(t.tusko.url, '/api/sessions', { json: { title: 'kept' }, headers: dana.auth })).json.id;
    t.pg.query('ALTER TABLE chat_sessions RENAME TO chat_sessions_away');
    try {
      for (const [method, p, json] of [
        ['POST', '/api/sessions', {}],
        ['GET', '/api/sessions'],
        ['GET', `/api/sessions/${id}`],
        ['PATCH', `/api/sessions/${id}`, { title: 'x' }],
        ['DELETE', `/api/sessions/${id}`],
        ['GET', `/api/sessions/${id}/messages`],
      ]) {
        const r = await api(t.tusko.url, p, { method, json, headers: dana.auth });
        assert.equal(r.status, 503, `${method} ${p}: ${r.text}`);
        assert.deepEqual(r.json, DB, `${method} ${p}`);
      }
    } finally {
      t.pg.query('ALTER TABLE chat_sessions_away RENAME TO chat_sessions');
    }
    const r = await api(t.tusko.url, `/api/sessions/${id}`, { headers: dana.auth });
    assert.equal(r.json.title, 'kept');
  });
});
