// Sign-in with a local account, the session cookie and its flags, CSRF,
// API tokens, sign-out, expiry, throttling, and that every /api route refuses
// callers without credentials.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { api, stopAll } from '../../lib/harness.mjs';
import { addUser, cookiesOf, createToken, login, makeUser, startTusko } from './lib.mjs';

after(stopAll);

// Every route tusko's app layer serves behind auth (method, path).
const PROTECTED = [
  ['GET', '/api/me'],
  ['GET', '/api/models'],
  ['POST', '/api/sessions'],
  ['GET', '/api/sessions'],
  ['GET', '/api/sessions/00000000-0000-4000-8000-000000000000'],
  ['PATCH', '/api/sessions/00000000-0000-4000-8000-000000000000'],
  ['DELETE', '/api/sessions/00000000-0000-4000-8000-000000000000'],
  ['GET', '/api/sessions/00000000-0000-4000-8000-000000000000/messages'],
  ['POST', '/api/auth/logout'],
];

describe('local accounts', () => {
  let t, alice;
  before(async () => {
    t = await startTusko({ tag: 'auth', env: { TUSKO_LOGIN_MAX_FAILURES: '3' } });
    alice = makeUser(t.pg, 'alice@example.com');
  });

  test('every /api route refuses a request without credentials (401 JSON)', async () => {
    for (const [method, p] of PROTECTED) {
      const r = await api(t.tusko.url, p, { method, json: method === 'GET' ? undefined : {} });
      assert.equal(r.status, 401, `${method} ${p}`);
      assert.equal(r.json.code, 'UNAUTHORIZED', `${method} ${p}`);
      assert.match(r.headers.get('www-authenticate') || '', /^Bearer/);
    }
  });

  test('every /api route refuses a bad token, a malformed header and a forged cookie', async () => {
    const bad = [
      { authorization: 'Bearer tsk_' + '0'.repeat(64) },
      { authorization: 'Bearer nonsense' },
      { authorization: 'Basic YWxpY2U6cHc=' },
      { authorization: alice.token }, // no scheme
      { cookie: 'tusko_session=' + 'a'.repeat(64) },
      { cookie: 'tusko_session=../../etc' },
    ];
    for (const headers of bad)
      for (const [method, p] of PROTECTED) {
        const r = await api(t.tusko.url, p, { method, headers });
        assert.equal(r.status, 401, `${method} ${p} with ${JSON.stringify(headers)}`);
      }
  });

  test('a bad Authorization header is refused even next to a good cookie', async () => {
    const s = await login(t.tusko.url, alice.email);
    assert.equal(s.res.status, 200);
    const r = await api(t.tusko.url, '/api/me', { headers: { cookie: s.cookie, authorization: 'Bearer tsk_' + 'f'.repeat(64) } });
    assert.equal(r.status, 401);
  });

  test('an API token authenticates; /api/me says who and how', async () => {
    const r = await api(t.tusko.url, '/api/me', { headers: alice.auth });
    assert.equal(r.status, 200);
    assert.equal(r.json.id, alice.id);
    assert.equal(r.json.email, 'alice@example.com');
    assert.equal(r.json.auth, 'token');
    assert.equal(r.json.csrf_token, undefined);
  });

  test('sign-in sets an HttpOnly SameSite=Lax session cookie (not Secure over http)', async () => {
    const s = await login(t.tusko.url, 'Alice@Example.com '); // emails are case- and space-insensitive
    assert.equal(s.res.status, 200, s.res.text);
    assert.equal(s.res.json.user.id, alice.id);
    assert.match(s.csrf, /^[0-9a-f]{64}$/);
    const sc = s.cookies.tusko_session;
    assert.ok(sc, 'session cookie set');
    assert.match(sc.value, /^[0-9a-f]{64}$/);
    assert.equal(sc.attrs.httponly, true);
    assert.equal(sc.attrs.samesite, 'Lax');
    assert.equal(sc.attrs.path, '/');
    assert.equal(sc.attrs.secure, undefined);
    assert.equal(Number(sc.attrs['max-age']), 7 * 24 * 3600);
    const cc = s.cookies.tusko_csrf;
    assert.equal(cc.value, s.csrf);
    assert.equal(cc.attrs.httponly, undefined);
    assert.equal(s.res.headers.get('cache-control'), 'no-store');
    const me = await api(t.tusko.url, '/api/me', { headers: { cookie: s.cookie } });
    assert.equal(me.status, 200);
    assert.equal(me.json.id, alice.id);
    assert.equal(me.json.auth, 'session');
    assert.equal(me.json.csrf_token, s.csrf);
  });

  test('the session secret is stored only as a hash', async () => {
    const s = await login(t.tusko.url, alice.email);
    const secret = s.cookies.tusko_session.value;
    const rows = t.pg.rows(`SELECT encode(token_hash, 'hex'), csrf_token FROM web_sessions`);
    assert.ok(rows.length >= 1);
    for (const [h] of rows) assert.notEqual(h, secret);
    const { createHash } = await import('node:crypto');
    const want = createHash('sha256').update(secret).digest('hex');
    assert.ok(rows.some(([h]) => h === want));
    const tok = t.pg.rows(`SELECT encode(token_hash, 'hex') FROM api_tokens`);
    assert.ok(tok.every(([h]) => !alice.token.includes(h)));
    assert.ok(tok.some(([h]) => h === createHash('sha256').update(alice.token).digest('hex')));
  });

  test('wrong password and unknown account both answer 401 INVALID_CREDENTIALS', async () => {
    addUser(t.pg, 'carol@example.com');
    const a = await login(t.tusko.url, 'carol@example.com', 'not the password');
    assert.equal(a.res.status, 401);
    assert.equal(a.res.json.code, 'INVALID_CREDENTIALS');
    assert.deepEqual(a.cookies, {});
    const b = await login(t.tusko.url, 'nobody@example.com', 'whatever it is');
    assert.equal(b.res.status, 401);
    assert.equal(b.res.json.code, 'INVALID_CREDENTIALS');
    assert.equal(b.res.json.message, a.res.json.message);
    const c = await api(t.tusko.url, '/api/auth/login', { json: { email: 'carol@example.com' } });
    assert.equal(c.status, 400);
    const d = await api(t.tusko.url, '/api/auth/login', { body: 'not json', headers: { 'content-type': 'application/json' } });
    assert.equal(d.status, 400);
  });

  test('cookie-authenticated writes need the CSRF token; Bearer writes do not', async () => {
    const s = await login(t.tusko.url, alice.email);
    const base = { cookie: s.cookie };
    let r = await api(t.tusko.url, '/api/sessions', { json: {}, headers: base });
    assert.equal(r.status, 403);
    assert.equal(r.json.code, 'CSRF_FAILED');
    r = await api(t.tusko.url, '/api/sessions', { json: {}, headers: { ...base, 'x-csrf-token': 'f'.repeat(64) } });
    assert.equal(r.status, 403);
    // another session's token does not fit this one
    const other = await login(t.tusko.url, alice.email);
    r = await api(t.tusko.url, '/api/sessions', { json: {}, headers: { ...base, 'x-csrf-token': other.csrf } });
    assert.equal(r.status, 403);
    r = await api(t.tusko.url, '/api/sessions', { json: {}, headers: { ...base, 'x-csrf-token': s.csrf } });
    assert.equal(r.status, 201);
    // same-origin browser metadata passes, cross-site is refused even with the token
    const host = new URL(t.tusko.url).host;
    r = await api(t.tusko.url, '/api/sessions', { json: {}, headers: { ...base, 'x-csrf-token': s.csrf, origin: `http://${host}`, 'sec-fetch-site': 'same-origin' } });
    assert.equal(r.status, 201);
    for (const h of [{ origin: 'http://evil.example' }, { origin: 'null' }, { 'sec-fetch-site': 'cross-site' }, { 'sec-fetch-site': 'same-site' }, { origin: `http://${host}.evil.example` }]) {
      r = await api(t.tusko.url, '/api/sessions', { json: {}, headers: { ...base, 'x-csrf-token': s.csrf, ...h } });
      assert.equal(r.status, 403, JSON.stringify(h));
      assert.equal(r.json.code, 'CSRF_FAILED');
    }
    // DELETE and PATCH are writes too
    r = await api(t.tusko.url, '/api/sessions/00000000-0000-4000-8000-000000000000', { method: 'DELETE', headers: base });
    assert.equal(r.status, 403);
    // reads need no token
    r = await api(t.tusko.url, '/api/sessions', { headers: base });
    assert.equal(r.status, 200);
    // a token-authenticated write needs none, and a stray Origin does not matter
    r = await api(t.tusko.url, '/api/sessions', { json: {}, headers: { ...alice.auth, origin: 'http://evil.example' } });
    assert.equal(r.status, 201);
  });

  test('a cross-site sign-in attempt is refused (login CSRF)', async () => {
    const s = await login(t.tusko.url, alice.email, 'correct horse battery', { origin: 'http://evil.example' });
    assert.equal(s.res.status, 403);
    assert.deepEqual(s.cookies, {});
  });

  test('sign-out ends the session at once and clears the cookies', async () => {
    const s = await login(t.tusko.url, alice.email);
    let r = await api(t.tusko.url, '/api/me', { headers: { cookie: s.cookie } });
    assert.equal(r.status, 200);
    r = await api(t.tusko.url, '/api/auth/logout', { method: 'POST', headers: { cookie: s.cookie } });
    assert.equal(r.status, 403, 'sign-out is a write: CSRF-checked');
    r = await api(t.tusko.url, '/api/auth/logout', { method: 'POST', headers: { cookie: s.cookie, 'x-csrf-token': s.csrf } });
    assert.equal(r.status, 204);
    const c = cookiesOf(r);
    assert.equal(c.tusko_session.value, '');
    assert.equal(c.tusko_session.attrs['max-age'], '0');
    r = await api(t.tusko.url, '/api/me', { headers: { cookie: s.cookie } });
    assert.equal(r.status, 401);
    // the API token still works
    r = await api(t.tusko.url, '/api/me', { headers: alice.auth });
    assert.equal(r.status, 200);
  });

  test('an expired session is refused', async () => {
    const s = await login(t.tusko.url, alice.email);
    const { createHash } = await import('node:crypto');
    const h = createHash('sha256').update(s.cookies.tusko_session.value).digest('hex');
    t.pg.query(`UPDATE web_sessions SET expires_at = now() - interval '1 second' WHERE token_hash = decode('${h}', 'hex')`);
    const r = await api(t.tusko.url, '/api/me', { headers: { cookie: s.cookie } });
    assert.equal(r.status, 401);
  });

  test('an expired API token is refused', async () => {
    addUser(t.pg, 'erin@example.com');
    const tok = createToken(t.pg, 'erin@example.com');
    t.pg.query(`UPDATE api_tokens SET expires_at = now() - interval '1 second' WHERE user_id = (SELECT id FROM users WHERE email = 'erin@example.com')`);
    const r = await api(t.tusko.url, '/api/me', { headers: { authorization: `Bearer ${tok}` } });
    assert.equal(r.status, 401);
  });

  test('failed sign-ins are throttled per account with Retry-After; success resets the count', async () => {
    addUser(t.pg, 'dave@example.com');
    // two failures, a success (resets), then three failures reach the limit of 3
    for (let i = 0; i < 2; i++) assert.equal((await login(t.tusko.url, 'dave@example.com', 'wrong password!')).res.status, 401);
    assert.equal((await login(t.tusko.url, 'dave@example.com')).res.status, 200);
    for (let i = 0; i < 3; i++) assert.equal((await login(t.tusko.url, 'dave@example.com', 'wrong password!')).res.status, 401);
    const r = await login(t.tusko.url, 'dave@example.com');
    assert.equal(r.res.status, 429, 'even the right password waits');
    assert.equal(r.res.json.code, 'TOO_MANY_ATTEMPTS');
    const ra = Number(r.res.headers.get('retry-after'));
    assert.ok(ra >= 1 && ra <= 15 * 60, `Retry-After ${ra}`);
    // another account is not affected
    assert.equal((await login(t.tusko.url, alice.email)).res.status, 200);
    // the window passing (moved back in the table) lets the account in again
    t.pg.query(`UPDATE rate_events SET at = at - interval '16 minutes' WHERE key = 'login:acct:dave@example.com'`);
    assert.equal((await login(t.tusko.url, 'dave@example.com')).res.status, 200);
  });

  test('GET /api/auth/config is public and says which sign-ins are on', async () => {
    const r = await api(t.tusko.url, '/api/auth/config');
    assert.equal(r.status, 200);
    assert.equal(r.json.password, true);
    assert.equal(r.json.oidc, false);
  });

  test('every response carries the security headers', async () => {
    for (const [p, h] of [['/api/me', alice.auth], ['/api/me', {}], ['/api/nope', {}], ['/healthz', {}]]) {
      const r = await api(t.tusko.url, p, { headers: h });
      assert.equal(r.headers.get('x-content-type-options'), 'nosniff', p);
      assert.equal(r.headers.get('x-frame-options'), 'DENY', p);
      assert.match(r.headers.get('content-security-policy'), /frame-ancestors 'none'/, p);
      assert.equal(r.headers.get('referrer-policy'), 'same-origin', p);
      assert.equal(r.headers.get('strict-transport-security'), null, 'no HSTS over http');
    }
  });
});

describe('behind https (TUSKO_PUBLIC_URL)', () => {
  test('cookies are Secure with the __Host- prefix, HSTS is sent, Origin must match the public URL', async () => {
    const t = await startTusko({ tag: 'https', env: { TUSKO_PUBLIC_URL: 'https://chat.example.test/' } });
    addUser(t.pg, 'alice@example.com');
    const s = await login(t.tusko.url, 'alice@example.com');
    assert.equal(s.res.status, 200);
    const sc = s.cookies['__Host-tusko_session'];
    assert.ok(sc, JSON.stringify(Object.keys(s.cookies)));
    assert.equal(sc.attrs.secure, true);
    assert.equal(sc.attrs.httponly, true);
    assert.equal(sc.attrs.samesite, 'Lax');
    assert.equal(sc.attrs.path, '/');
    assert.equal(sc.attrs.domain, undefined);
    assert.equal(s.cookies['__Host-tusko_csrf'].attrs.secure, true);
    assert.match(s.res.headers.get('strict-transport-security'), /max-age=\d+/);
    // the plain name is not accepted in place of the prefixed one
    const plain = await api(t.tusko.url, '/api/me', { headers: { cookie: `tusko_session=${sc.value}` } });
    assert.equal(plain.status, 401);
    let r = await api(t.tusko.url, '/api/sessions', { json: {}, headers: { cookie: s.cookie, 'x-csrf-token': s.csrf, origin: 'https://chat.example.test' } });
    assert.equal(r.status, 201);
    r = await api(t.tusko.url, '/api/sessions', { json: {}, headers: { cookie: s.cookie, 'x-csrf-token': s.csrf, origin: t.tusko.url } });
    assert.equal(r.status, 403, 'the Host-derived origin no longer counts once TUSKO_PUBLIC_URL is set');
    await t.tusko.stop();
  });
});
