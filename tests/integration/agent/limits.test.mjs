// Per-user and per-token limits (docs/SECURITY.md section 7), each shown to
// refuse exactly over its limit and to leave other users alone:
// USER_MAX_STREAMS (the oldest stream closed with a reason, the others kept),
// USER_MAX_ACTIVE_TURNS (across a user's chats, exact under a burst),
// USER_MAX_UPLOADS (refused before the body is read, freed when one ends) and
// API_TOKEN_RATE_LIMIT (per token). Then the abuse test: one address holding
// as many half-open connections as it may and one user opening streams
// without end, while other users from other loopback addresses sign in, chat
// and get their answers.
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';

import { sleep, stopAll } from '../../lib/harness.mjs';
import { api, makeUser, newSession, post, sse, startModels, startTusko, untilTurnEnd } from './lib.mjs';

const STREAMS = 3;
const TURNS = 2;
const TOKEN_RATE = 40;
const PER_IP = 20;

const SCENARIOS = {
  slow: { steps: [{ text: Array.from({ length: 20 }, (_, i) => `w${i}`).join(' '), chunk_delay_ms: 150 }] },
  quick: { steps: [{ text: 'done quickly' }] },
};

// A live stream of a chat, read in the background: { events, ended, close() }.
function follow(base, user, sid) {
  const ac = new AbortController();
  const s = { events: [], ended: false, close: () => ac.abort() };
  s.done = sse(base, `/api/sessions/${sid}/events`, {
    headers: user.auth,
    timeoutMs: 120000,
    signal: ac.signal,
    until: (ev) => {
      s.events.push(ev);
      return false;
    },
  }).then((r) => {
    s.ended = !r.timedOut;
    s.status = r.status;
    return r;
  });
  return s;
}

async function waitFor(pred, what, ms = 10000) {
  const end = Date.now() + ms;
  while (!pred()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

// A request from a given loopback source address (node's fetch cannot choose one).
function request(base, p, { method = 'GET', headers = {}, body, localAddress } = {}) {
  const u = new URL(base + p);
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: u.hostname, port: u.port, path: u.pathname + u.search, method, headers, localAddress, agent: false },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d) => (text += d));
        res.on('end', () => {
          let json = null;
          try {
            json = JSON.parse(text);
          } catch {
            /* not JSON */
          }
          resolve({ status: res.statusCode, headers: res.headers, text, json });
        });
      },
    );
    req.setTimeout(20000, () => req.destroy(new Error(`${method} ${p} from ${localAddress}: no answer in 20 s`)));
    req.on('error', reject);
    req.end(body);
  });
}

describe('per-user and per-token limits', () => {
  let ms, stack, base;

  before(async () => {
    ms = await startModels({ scenarios: SCENARIOS });
    stack = await startTusko(ms, {
      tag: 'limits',
      env: {
        USER_MAX_STREAMS: String(STREAMS),
        USER_MAX_ACTIVE_TURNS: String(TURNS),
        USER_MAX_UPLOADS: '1',
        API_TOKEN_RATE_LIMIT: String(TOKEN_RATE),
        HTTP_MAX_CONNECTIONS_PER_IP: String(PER_IP),
      },
    });
    base = stack.tusko.url;
  });
  after(async () => {
    await stopAll();
    if (ms) await ms.close();
  });

  test('USER_MAX_STREAMS: one stream more closes the oldest with a reason; the rest and other users keep theirs', async () => {
    const alice = makeUser(stack.pg);
    const bob = makeUser(stack.pg);
    const sid = await newSession(base, alice);
    const bsid = await newSession(base, bob);
    const mine = [];
    for (let i = 0; i < STREAMS; i++) {
      mine.push(follow(base, alice, sid));
      await sleep(150); // opened in this order: the first is the oldest
    }
    const bobs = follow(base, bob, bsid);
    await sleep(300);
    assert.ok(mine.every((s) => !s.ended), 'streams within the limit stay open');
    const extra = follow(base, alice, sid);
    await waitFor(() => mine[0].ended, 'the oldest stream to be closed');
    const last = mine[0].events.at(-1);
    assert.equal(last.event, 'stream_closed');
    assert.equal(last.json.reason, 'TOO_MANY_STREAMS');
    assert.equal(last.json.max, STREAMS);
    assert.equal(last.id, undefined, 'the closing frame has no id (Last-Event-ID stays)');
    await sleep(300);
    assert.ok(mine.slice(1).every((s) => !s.ended) && !extra.ended && !bobs.ended, 'only the oldest was closed');
    // the streams left are live: a turn reaches each of them, and bob's chat works
    const r = await post(base, alice, sid, '#scenario:quick');
    assert.equal(r.status, 202, r.text);
    for (const s of [...mine.slice(1), extra])
      await waitFor(() => s.events.some((e) => e.event === 'turn_end' && e.json.turn_id === r.json.turn_id), 'turn_end on a kept stream');
    assert.ok(!mine[0].events.some((e) => e.event === 'turn_end'), 'the closed stream got nothing more');
    for (const s of [...mine, extra, bobs]) s.close();
  });

  test('USER_MAX_ACTIVE_TURNS: across chats, exact under a burst, freed when a turn ends', async () => {
    const alice = makeUser(stack.pg);
    const bob = makeUser(stack.pg);
    const chats = [];
    for (let i = 0; i < 8; i++) chats.push(await newSession(base, alice));
    const burst = await Promise.all(chats.map((sid) => post(base, alice, sid, '#scenario:slow')));
    const ok = burst.filter((r) => r.status === 202);
    const refused = burst.filter((r) => r.status === 429);
    assert.equal(ok.length, TURNS, `accepted: ${burst.map((r) => r.status).join(',')}`);
    assert.equal(refused.length, chats.length - TURNS);
    for (const r of refused) {
      assert.equal(r.json.code, 'TOO_MANY_ACTIVE_TURNS');
      assert.match(r.json.message, /USER_MAX_ACTIVE_TURNS/);
      assert.ok(ok.some((o) => o.json.turn_id === r.json.turn_id), 'turn_id names one of the active turns');
      assert.ok(Number(r.headers.get('retry-after')) >= 1);
    }
    // another user is not affected
    const bsid = await newSession(base, bob);
    const b = await post(base, bob, bsid, '#scenario:quick');
    assert.equal(b.status, 202, b.text);
    // when one of alice's turns ends, one more is accepted
    const first = ok[0].json;
    await untilTurnEnd(base, alice, first.session_id, first.turn_id, { timeoutMs: 30000 });
    const free = burst.findIndex((r) => r.status === 429);
    const again = await post(base, alice, chats[free], '#scenario:quick');
    assert.equal(again.status, 202, again.text);
  });

  test('USER_MAX_UPLOADS: a second upload at once is refused before its body; freed when the first ends', async () => {
    const alice = makeUser(stack.pg);
    const bob = makeUser(stack.pg);
    const sid = await newSession(base, alice);
    const bsid = await newSession(base, bob);
    const u = new URL(base);
    // the first upload: headers and a little of the body, the rest held back
    const size = 200000;
    const sock = net.connect(Number(u.port), u.hostname);
    await new Promise((res) => sock.once('connect', res));
    let answer = '';
    sock.on('data', (d) => (answer += d));
    sock.write(
      `PUT /api/sessions/${sid}/files/upload?path=/workspace/a.bin HTTP/1.1\r\nHost: x\r\n` +
        `Authorization: ${alice.auth.authorization}\r\nContent-Length: ${size}\r\n\r\n` +
        'x'.repeat(1000),
    );
    await sleep(300);
    const second = await api(base, `/api/sessions/${sid}/files/upload?path=/workspace/b.bin`, {
      method: 'PUT',
      headers: { ...alice.auth, 'content-type': 'application/octet-stream' },
      body: 'y'.repeat(10),
    });
    assert.equal(second.status, 429, second.text);
    assert.equal(second.json.code, 'TOO_MANY_UPLOADS');
    // bob's upload is not refused by the limit (execution is off here: 409 from the route itself)
    const bobs = await api(base, `/api/sessions/${bsid}/files/upload?path=/workspace/b.bin`, {
      method: 'PUT',
      headers: { ...bob.auth, 'content-type': 'application/octet-stream' },
      body: 'z',
    });
    assert.equal(bobs.status, 409, bobs.text);
    assert.equal(bobs.json.code, 'EXECUTION_OFF');
    // small requests of alice are not uploads and are not refused
    const list = await api(base, '/api/sessions', { headers: alice.auth });
    assert.equal(list.status, 200);
    // the first upload completes; then alice may upload again
    sock.write('x'.repeat(size - 1000));
    await waitFor(() => /\r\n\r\n/.test(answer), 'the first upload to be answered');
    assert.match(answer, /^HTTP\/1\.1 409/, answer.slice(0, 200));
    sock.destroy();
    await sleep(200);
    const third = await api(base, `/api/sessions/${sid}/files/upload?path=/workspace/c.bin`, {
      method: 'PUT',
      headers: { ...alice.auth, 'content-type': 'application/octet-stream' },
      body: 'w',
    });
    assert.equal(third.status, 409, third.text);
  });

  test('API_TOKEN_RATE_LIMIT: requests a minute per token, with Retry-After; another token is counted apart', async () => {
    const alice = makeUser(stack.pg);
    // not across a minute's boundary: the limit's window is the wall-clock minute
    const intoMinute = Date.now() % 60000;
    if (intoMinute > 50000) await sleep(60000 - intoMinute + 200);
    const statuses = [];
    let refusal = null;
    for (let i = 0; i < TOKEN_RATE + 5; i++) {
      const r = await api(base, '/api/sessions', { headers: alice.auth });
      statuses.push(r.status);
      if (r.status === 429 && !refusal) refusal = r;
    }
    assert.deepEqual(statuses.slice(0, TOKEN_RATE), Array(TOKEN_RATE).fill(200));
    assert.deepEqual(statuses.slice(TOKEN_RATE), Array(5).fill(429));
    assert.equal(refusal.json.code, 'RATE_LIMITED');
    assert.match(refusal.json.message, /API_TOKEN_RATE_LIMIT/);
    const retry = Number(refusal.headers.get('retry-after'));
    assert.ok(retry >= 1 && retry <= 60, `Retry-After ${retry}`);
    // a second token of the same user has its own count
    const other = makeUser(stack.pg, alice.email.replace('@', '+2@'));
    const r2 = await api(base, '/api/sessions', { headers: other.auth });
    assert.equal(r2.status, 200);
  });

  test('abuse: half-open connections from one address and endless streams of one user leave other users served', async () => {
    const u = new URL(base);
    // the attacker at 127.0.0.2: as many half-open requests as it can
    const held = [];
    let closedByServer = 0;
    for (let i = 0; i < PER_IP * 5; i++) {
      const s = net.connect({ port: Number(u.port), host: u.hostname, localAddress: '127.0.0.2' });
      s.on('error', () => {});
      s.on('close', () => closedByServer++);
      s.on('connect', () => s.write('GET /api/sessions HTTP/1.1\r\nHo'));
      held.push(s);
    }
    await sleep(1000);
    const open = held.filter((s) => !s.destroyed && s.readyState === 'open').length;
    assert.ok(open <= PER_IP, `${open} connections of one address stay open (limit ${PER_IP})`);
    assert.ok(closedByServer >= PER_IP * 5 - PER_IP, `the server closed ${closedByServer} over the limit`);
    // a user opening streams without end on one chat (from 127.0.0.3)
    const mallory = makeUser(stack.pg);
    const msid = await newSession(base, mallory);
    const floods = [];
    for (let i = 0; i < 30; i++) {
      const s = follow(base, mallory, msid);
      floods.push(s);
      await sleep(10);
    }
    await waitFor(() => floods.filter((s) => !s.ended).length <= STREAMS, 'mallory down to her limit of streams', 15000);
    // meanwhile users from other addresses sign in, chat and get their answers
    const users = [1, 2, 3].map(() => makeUser(stack.pg));
    await Promise.all(
      users.map(async (user, i) => {
        const from = `127.0.0.${10 + i}`;
        const login = await request(base, '/api/auth/login', {
          method: 'POST',
          localAddress: from,
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ email: user.email, password: 'correct horse battery' }),
        });
        assert.equal(login.status, 200, `sign-in from ${from}: ${login.text}`);
        const mk = await request(base, '/api/sessions', {
          method: 'POST',
          localAddress: from,
          headers: { ...user.auth, 'content-type': 'application/json' },
          body: '{}',
        });
        assert.equal(mk.status, 201, mk.text);
        const sent = await request(base, `/api/sessions/${mk.json.id}/messages`, {
          method: 'POST',
          localAddress: from,
          headers: { ...user.auth, 'content-type': 'application/json' },
          body: JSON.stringify({ content: '#scenario:quick' }),
        });
        assert.equal(sent.status, 202, sent.text);
        const evs = await untilTurnEnd(base, user, mk.json.id, sent.json.turn_id);
        assert.equal(evs.at(-1).json.state, 'done', JSON.stringify(evs.at(-1).json));
      }),
    );
    for (const s of held) s.destroy();
    for (const s of floods) s.close();
  });
});
