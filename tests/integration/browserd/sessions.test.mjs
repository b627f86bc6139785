// tusko-browserd's Steel session API against real Chromium: the npm steel-sdk
// creates, lists (paged), retrieves and releases sessions; every session is a
// Chromium of its own whose profile is gone after its end; limits, refusals,
// timeouts, idleness, a killed browser and SIGTERM.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, describe, test } from 'node:test';

import Steel from 'steel-sdk';

import { runProgram, sleep, stopAll, tmpdir } from '../../lib/harness.mjs';
import { KEY, browsers, chromium, profiles, startBrowserd, until } from './brd.mjs';

after(stopAll);

const sdk = (s, key = KEY) => new Steel({ steelAPIKey: key, baseURL: s.url, maxRetries: 0 });

describe('startup', () => {
  test('refuses to start without a key or with a short one', () => {
    const base = { BROWSERD_LISTEN: '127.0.0.1:0', BROWSERD_STATE_DIR: tmpdir('brd-'), BROWSERD_CHROMIUM: chromium() };
    let r = runProgram('tusko-browserd', [], { env: base, timeoutMs: 10000 });
    assert.equal(r.code, 2);
    assert.match(r.stderr, /BROWSERD_API_KEY is not set/);
    r = runProgram('tusko-browserd', [], { env: { ...base, BROWSERD_API_KEY: 'short' }, timeoutMs: 10000 });
    assert.equal(r.code, 2);
    assert.match(r.stderr, /shorter than 16/);
  });
});

describe('the steel-sdk against browserd', () => {
  test('creates from the warm pool, retrieves, lists in pages and releases', async () => {
    const s = await startBrowserd({ env: { BROWSERD_WARM_POOL_SIZE: '1' } });
    const client = sdk(s);
    // the pool fills in the background: one browser, no session
    await until(async () => (await s.call('/v1/health')).json.warm === 1, 20000, 'the warm pool');
    assert.equal(browsers(s.stateDir).filter((b) => b.main).length, 1);
    const a = await client.sessions.create();
    assert.match(a.id, /^[0-9a-f-]{36}$/);
    assert.equal(a.status, 'live');
    assert.equal(a.pool, 'warm');
    assert.deepEqual(a.dimensions, { width: 1280, height: 800 });
    assert.equal(a.timeout, 300000);
    assert.match(a.userAgent, /HeadlessChrome\//);
    assert.ok(Date.parse(a.createdAt) <= Date.now());
    for (const k of ['websocketUrl', 'debugUrl', 'sessionViewerUrl']) assert.equal(typeof a[k], 'string');
    // the pool is refilled: a second browser comes up beside the session's
    await until(async () => (await s.call('/v1/health')).json.warm === 1, 20000, 'the refill');
    const want = '7d1f1c4e-2a0b-4c61-9a51-0b8f3c2d9e10';
    const b = await client.sessions.create({ sessionId: want, userAgent: 'tusko-test-agent/1.0', dimensions: { width: 900, height: 700 }, timeout: 120000 });
    assert.equal(b.id, want);
    assert.equal(b.pool, 'cold', 'a custom user agent is a browser of its own');
    assert.equal(b.userAgent, 'tusko-test-agent/1.0');
    assert.deepEqual(b.dimensions, { width: 900, height: 700 });
    assert.equal(b.timeout, 120000);
    const bp = browsers(s.stateDir).find((x) => x.main && process_has(x.pid, '--user-agent=tusko-test-agent/1.0'));
    assert.ok(bp, "the session's Chromium runs with its user agent");
    const c = await client.sessions.create();
    assert.equal((await client.sessions.retrieve(a.id)).status, 'live');
    // each session its own Chromium with its own profile (plus the pool's)
    const mains = browsers(s.stateDir).filter((x) => x.main);
    assert.equal(new Set(mains.map((x) => x.profile)).size, mains.length);
    assert.ok(mains.length >= 3);
    // paged: two at a time, newest first, every session once
    const page1 = await s.call('/v1/sessions?limit=2');
    assert.equal(page1.status, 200);
    assert.deepEqual(page1.json.sessions.map((x) => x.id), [c.id, b.id]);
    assert.equal(page1.json.nextCursor, b.id);
    assert.equal(page1.json.totalCount, 3);
    const page2 = await s.call(`/v1/sessions?limit=2&cursorId=${b.id}`);
    assert.deepEqual(page2.json.sessions.map((x) => x.id), [a.id]);
    assert.equal(page2.json.nextCursor, null);
    const seen = [];
    for await (const x of client.sessions.list({ limit: 1 })) seen.push(x.id);
    assert.deepEqual(seen, [c.id, b.id, a.id]);
    // release one: its Chromium and its profile go, its record stays
    const profileOfB = bp.profile;
    const rel = await client.sessions.release(b.id);
    assert.equal(rel.success, true);
    assert.equal(rel.status, 'released');
    assert.ok(!fs.existsSync(profileOfB), 'the profile folder is removed');
    assert.ok(!browsers(s.stateDir).some((x) => x.profile === profileOfB), 'its Chromium is gone');
    const gone = await client.sessions.retrieve(b.id);
    assert.equal(gone.status, 'released');
    assert.ok(gone.duration > 0);
    const d1 = gone.duration;
    await sleep(30);
    assert.equal((await client.sessions.retrieve(b.id)).duration, d1, 'an ended session stops counting');
    assert.deepEqual((await s.call('/v1/sessions?status=released')).json.sessions.map((x) => x.id), [b.id]);
    assert.deepEqual((await s.call('/v1/sessions?status=live')).json.sessions.map((x) => x.id), [c.id, a.id]);
    // a second release says it had ended
    assert.equal((await client.sessions.release(b.id)).message, 'The session had ended');
    // the id of a released session is not given again
    const dup = await s.call('/v1/sessions', { json: { sessionId: want } });
    assert.equal(dup.status, 409);
    // release all
    const all = await client.sessions.releaseAll();
    assert.equal(all.success, true);
    assert.match(all.message, /Released 2 sessions/);
    assert.deepEqual((await s.call('/v1/sessions?status=live')).json.sessions, []);
    // only the pool's browser is left
    await until(() => browsers(s.stateDir).filter((x) => x.main).length === 1, 10000, 'only the pool');
    assert.equal(profiles(s.stateDir).length, 1);
    await s.stop();
  });
});

function process_has(pid, arg) {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').includes(arg);
  } catch {
    return false;
  }
}

describe('auth, refusals and limits', () => {
  test('the key is required everywhere but health, and bodies are checked', async () => {
    const s = await startBrowserd({ env: { BROWSERD_MAX_SESSIONS: '2', BROWSERD_MAX_TIMEOUT: '10m' } });
    assert.equal((await s.call('/v1/health', { headers: { 'steel-api-key': '' } })).status, 200);
    for (const [m, p] of [['GET', '/v1/sessions'], ['POST', '/v1/sessions'], ['GET', '/v1/sessions/x'], ['POST', '/v1/sessions/release']]) {
      const none = await fetch(s.url + p, { method: m });
      assert.equal(none.status, 401, `${m} ${p} without a key`);
      const wrong = await fetch(s.url + p, { method: m, headers: { 'steel-api-key': KEY.slice(0, -1) + 'x' } });
      assert.equal(wrong.status, 401, `${m} ${p} with a wrong key`);
    }
    await assert.rejects(sdk(s, 'not-the-key-0123456789').sessions.create(), (e) => e.status === 401);
    const bad = [
      [{ proxyUrl: 'http://10.0.0.1:3128' }, /proxyUrl is not supported/],
      [{ useProxy: true }, /useProxy is not supported/],
      [{ headless: false }, /headless: false/],
      [{ sessionId: 'not-a-uuid' }, /sessionId must be a UUID/],
      [{ timeout: 11 * 60 * 1000 }, /timeout is in milliseconds/],
      [{ timeout: 10 }, /timeout is in milliseconds/],
      [{ dimensions: { width: 50, height: 600 } }, /dimensions/],
      [{ userAgent: 'a\nb' }, /userAgent/],
      [{ deviceConfig: { device: 'mobile' } }, /desktop/],
      [{ sessionContext: { localStorage: { 'https://a.test': { k: 'v' } } } }, /localStorage is not supported/],
      [{ sessionContext: { cookies: [{ name: 'a', value: 'b' }] } }, /needs a url or a domain/],
      [{ sessionContext: { cookies: [{ name: 'a', value: 1, domain: 'a.test' }] } }, /string name and value/],
      [[1, 2], /JSON object/],
    ];
    for (const [body, re] of bad) {
      const r = await s.call('/v1/sessions', { json: body });
      assert.equal(r.status, 400, JSON.stringify(body));
      assert.match(r.json.message, re);
    }
    assert.equal((await s.call('/v1/sessions', { body: '{nope', headers: { 'content-type': 'application/json' } })).status, 400);
    assert.equal((await s.call('/v1/sessions?limit=0')).status, 400);
    assert.equal((await s.call('/v1/sessions?status=dead')).status, 400);
    assert.equal((await s.call('/v1/sessions/0b8f3c2d-0000-4000-8000-000000000000')).status, 404);
    assert.equal((await s.call('/v1/sessions/0b8f3c2d-0000-4000-8000-000000000000/release', { method: 'POST' })).status, 404);
    // a cookie Chromium itself refuses fails the create, and its browser goes
    const refused = await s.call('/v1/sessions', { json: { sessionContext: { cookies: [{ name: 'a b;', value: 'x', url: 'notaurl' }] } } });
    assert.equal(refused.status, 400, refused.text);
    await until(() => browsers(s.stateDir).length === 0, 10000, 'the refused browser to go');
    // good cookies are accepted
    const ok = await s.call('/v1/sessions', { json: { sessionContext: { cookies: [{ name: 'tk', value: 'v1', domain: 'example.test', path: '/', secure: true, sameSite: 'Lax', expires: -1 }] } } });
    assert.equal(ok.status, 200, ok.text);
    // BROWSERD_MAX_SESSIONS=2: a third is refused until one ends
    const two = await s.call('/v1/sessions', { method: 'POST' });
    assert.equal(two.status, 200);
    const three = await s.call('/v1/sessions', { method: 'POST' });
    assert.equal(three.status, 429);
    assert.match(three.json.message, /BROWSERD_MAX_SESSIONS/);
    await s.call(`/v1/sessions/${two.json.id}/release`, { method: 'POST' });
    assert.equal((await s.call('/v1/sessions', { method: 'POST' })).status, 200);
    await s.stop();
  });

  test('at once, never more than BROWSERD_MAX_SESSIONS are created', async () => {
    const s = await startBrowserd({ env: { BROWSERD_MAX_SESSIONS: '3' } });
    const rs = await Promise.all(Array.from({ length: 6 }, () => s.call('/v1/sessions', { method: 'POST' })));
    const codes = rs.map((r) => r.status).sort();
    assert.deepEqual(codes, [200, 200, 200, 429, 429, 429]);
    assert.equal(browsers(s.stateDir).filter((b) => b.main).length, 3);
    await s.stop();
  });
});

describe('ends', () => {
  test('a killed Chromium fails its session, and its profile goes', async () => {
    const s = await startBrowserd();
    const a = (await s.call('/v1/sessions', { method: 'POST' })).json;
    const main = browsers(s.stateDir).find((b) => b.main);
    assert.ok(main);
    process.kill(main.pid, 'SIGKILL');
    await until(async () => (await s.call(`/v1/sessions/${a.id}`)).json.status === 'failed', 10000, 'the failed status');
    await until(() => browsers(s.stateDir).length === 0 && profiles(s.stateDir).length === 0, 10000, 'its processes and profile to go');
    assert.match(s.log(), new RegExp(`msg="ended" id=${a.id} why=browser-gone`));
    // the service goes on
    const b = await s.call('/v1/sessions', { method: 'POST' });
    assert.equal(b.status, 200);
    await s.stop();
  });

  test('a session ends at its timeout and an unused one at BROWSERD_IDLE_TTL', async () => {
    const s = await startBrowserd({ env: { BROWSERD_IDLE_TTL: '2s' } });
    const t0 = Date.now();
    const a = (await s.call('/v1/sessions', { json: { timeout: 1000 } })).json;
    const b = (await s.call('/v1/sessions', { json: { timeout: 600000 } })).json;
    await until(async () => (await s.call(`/v1/sessions/${a.id}`)).json.status === 'released', 10000, 'the timeout');
    assert.ok(Date.now() - t0 >= 1000);
    assert.match(s.log(), new RegExp(`id=${a.id} why=timeout`));
    await until(async () => (await s.call(`/v1/sessions/${b.id}`)).json.status === 'released', 10000, 'the idle end');
    assert.ok(Date.now() - t0 >= 2000);
    assert.match(s.log(), new RegExp(`id=${b.id} why=idle`));
    await until(() => browsers(s.stateDir).length === 0 && profiles(s.stateDir).length === 0, 10000, 'every browser to go');
    await s.stop();
  });

  test('SIGTERM leaves no Chromium and no profile; a restart clears what a crash left', async () => {
    const s = await startBrowserd({ env: { BROWSERD_WARM_POOL_SIZE: '2' } });
    await s.call('/v1/sessions', { method: 'POST' });
    await s.call('/v1/sessions', { json: { userAgent: 'x/1' } });
    await until(async () => (await s.call('/v1/health')).json.warm === 2, 20000, 'the pool');
    assert.ok(browsers(s.stateDir).filter((b) => b.main).length >= 3);
    const ex = await s.stop();
    assert.equal(ex.code, 0);
    assert.deepEqual(browsers(s.stateDir), []);
    assert.ok(!fs.existsSync(path.join(s.stateDir, 'profiles')));
    // a SIGKILLed browserd: its browsers die with it (they are tied to it), and
    // the profiles it left are removed by the next start
    const s2 = await startBrowserd({ stateDir: s.stateDir });
    await s2.call('/v1/sessions', { method: 'POST' });
    assert.equal(profiles(s2.stateDir).length, 1);
    await s2.kill9();
    await until(() => browsers(s.stateDir).length === 0, 10000, 'the browsers of a killed browserd to die');
    assert.equal(profiles(s.stateDir).length, 1, 'a crash leaves its profile');
    const s3 = await startBrowserd({ stateDir: s.stateDir });
    assert.equal(profiles(s3.stateDir).length, 0);
    await s3.stop();
  });
});
