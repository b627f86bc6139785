// OpenID Connect sign-in against a real provider (the npm package oidc-provider,
// on loopback): authorization code + PKCE (S256), state, nonce, discovery, the
// token exchange (client_secret_basic and client_secret_post), ID tokens signed
// RS256 and ES256 and checked against the JWKS, key rotation (unknown kid →
// refetch), users created or linked by (issuer, subject), and refusals.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { api, freePort, startPostgres, stopAll } from '../../lib/harness.mjs';
import { Jar, hop, makeKey, startOidcProvider } from '../../lib/oidc-provider.mjs';
import { addUser, startTusko } from './lib.mjs';

let op;
after(async () => {
  if (op) await op.stop();
  await stopAll();
});

const keys = [makeKey('RS256', 'rs-1'), makeKey('ES256', 'es-1')];

// Signs in through the provider as `login` and follows the callback into tusko.
// Returns { start, callback, jar, location } (location: where tusko sent the browser).
async function fullSignIn(tusko, login, { returnTo, jar = new Jar() } = {}) {
  const q = returnTo ? `?return_to=${encodeURIComponent(returnTo)}` : '';
  const out = await op.signIn(`${tusko.url}/api/auth/oidc/start${q}`, login, { jar });
  assert.ok(out.location, `the provider sent the browser back (last status ${out.res.status}: ${await out.res.text()})`);
  assert.ok(out.location.startsWith(`${tusko.url}/api/auth/oidc/callback?`), out.location);
  const callback = await hop(jar, out.location);
  return { callback, jar, callbackUrl: out.location, location: callback.headers.get('location') };
}

async function me(tusko, jar) {
  return api(tusko.url, '/api/me', { headers: { cookie: jar.header(tusko.url) } });
}

describe('OpenID Connect', () => {
  let pg, rs, es, ports;
  before(async () => {
    pg = await startPostgres('oidc');
    ports = { rs: await freePort(), es: await freePort(), link: await freePort() };
    const cb = (p) => [`http://127.0.0.1:${p}/api/auth/oidc/callback`];
    const clients = [
      { client_id: 'tusko-rs', client_secret: 'secret-rs-0123456789', redirect_uris: cb(ports.rs), id_token_signed_response_alg: 'RS256', token_endpoint_auth_method: 'client_secret_basic' },
      { client_id: 'tusko-es', client_secret: 'secret-es-0123456789', redirect_uris: cb(ports.es), id_token_signed_response_alg: 'ES256', token_endpoint_auth_method: 'client_secret_post' },
      { client_id: 'tusko-link', client_secret: 'secret-link-012345678', redirect_uris: cb(ports.link), token_endpoint_auth_method: 'client_secret_basic' },
    ];
    op = await startOidcProvider({ clients, keys });
    op.clients = clients;
    op.accounts.set('alice-sub', { email: 'alice@example.com', email_verified: true, name: 'Alice' });
    op.accounts.set('bob-sub', { email: 'Bob@Example.com', email_verified: true });
    op.accounts.set('mallory-sub', { email: 'carol@example.com', email_verified: false });
    const env = (id, secret, port, extra = {}) => ({
      TUSKO_LISTEN: `127.0.0.1:${port}`,
      TUSKO_PUBLIC_URL: `http://127.0.0.1:${port}`,
      OIDC_ISSUER: op.issuer,
      OIDC_CLIENT_ID: id,
      OIDC_CLIENT_SECRET: secret,
      ...extra,
    });
    rs = (await startTusko({ pg, env: env('tusko-rs', 'secret-rs-0123456789', ports.rs) })).tusko;
    es = (await startTusko({ pg, env: env('tusko-es', 'secret-es-0123456789', ports.es, { OIDC_TOKEN_AUTH_METHOD: 'client_secret_post' }) })).tusko;
    addUser(pg, 'bob@example.com', 'bobs local password');
  });

  test('/api/auth/config says OIDC is on', async () => {
    const r = await api(rs.url, '/api/auth/config');
    assert.equal(r.json.oidc, true);
    assert.equal(r.json.oidc_start, '/api/auth/oidc/start');
  });

  test('start redirects to the provider with code + PKCE S256, state and nonce, and binds the browser', async () => {
    const r = await api(rs.url, '/api/auth/oidc/start');
    assert.equal(r.status, 302);
    const loc = new URL(r.headers.get('location'));
    assert.equal(loc.origin, op.issuer);
    const q = loc.searchParams;
    assert.equal(q.get('response_type'), 'code');
    assert.equal(q.get('client_id'), 'tusko-rs');
    assert.equal(q.get('redirect_uri'), `http://127.0.0.1:${ports.rs}/api/auth/oidc/callback`);
    assert.deepEqual(q.get('scope').split(' ').sort(), ['email', 'openid', 'profile']);
    assert.match(q.get('state'), /^[0-9a-f]{64}$/);
    assert.match(q.get('nonce'), /^[0-9a-f]{64}$/);
    assert.match(q.get('code_challenge'), /^[A-Za-z0-9_-]{43}$/);
    assert.equal(q.get('code_challenge_method'), 'S256');
    const cookie = r.headers.getSetCookie().find((c) => c.startsWith('tusko_oidc='));
    assert.ok(cookie);
    assert.match(cookie, /HttpOnly/);
    assert.match(cookie, /SameSite=Lax/);
    // only hashes of the state are stored
    const rows = pg.rows(`SELECT encode(state_hash, 'hex') FROM oidc_flows`);
    assert.ok(rows.length >= 1 && rows.every(([h]) => h !== q.get('state')));
  });

  test('RS256: sign-in creates the user, sets the session cookie and returns to return_to', async () => {
    const s = await fullSignIn(rs, 'alice-sub', { returnTo: '/chats/x?y=1' });
    assert.equal(s.callback.status, 302, await s.callback.text());
    assert.equal(s.location, '/chats/x?y=1');
    const set = s.callback.headers.getSetCookie().join('\n');
    assert.match(set, /tusko_session=[0-9a-f]{64}; Path=\/; Max-Age=\d+; HttpOnly; SameSite=Lax/);
    assert.match(set, /tusko_oidc=; Path=\/; Max-Age=0/);
    const m = await me(rs, s.jar);
    assert.equal(m.status, 200);
    assert.equal(m.json.email, 'alice@example.com');
    assert.equal(m.json.auth, 'session');
    const ident = pg.rows(`SELECT issuer, subject, user_id FROM user_identities WHERE subject = 'alice-sub'`);
    assert.deepEqual(ident.map((r) => r.slice(0, 2)), [[op.issuer, 'alice-sub']]);
    assert.equal(ident[0][2], m.json.id);
    assert.equal(pg.rows(`SELECT name FROM users WHERE id = '${m.json.id}'`)[0][0], 'Alice');
    // the session works for writes with its CSRF token, like a password sign-in
    const w = await api(rs.url, '/api/sessions', { json: {}, headers: { cookie: s.jar.header(rs.url), 'x-csrf-token': m.json.csrf_token } });
    assert.equal(w.status, 201);
  });

  test('the same subject signs in again as the same user (ES256, client_secret_post)', async () => {
    const before_ = pg.rows(`SELECT user_id FROM user_identities WHERE subject = 'alice-sub'`)[0][0];
    const s = await fullSignIn(es, 'alice-sub');
    assert.equal(s.callback.status, 302, await s.callback.text());
    assert.equal(s.location, '/');
    const m = await me(es, s.jar);
    assert.equal(m.json.id, before_);
    assert.equal(pg.rows(`SELECT count(*) FROM user_identities WHERE subject = 'alice-sub'`)[0][0], '1');
    assert.match(es.log(), /provider keys loaded/);
  });

  test('a callback is single-use: a replay is refused', async () => {
    const s = await fullSignIn(rs, 'alice-sub');
    assert.equal(s.callback.status, 302);
    const again = await hop(s.jar, s.callbackUrl);
    assert.equal(again.status, 400);
    assert.equal((await again.json()).code, 'OIDC_STATE');
  });

  test('a callback in another browser (no binding cookie) is refused', async () => {
    const jar = new Jar();
    const out = await op.signIn(`${rs.url}/api/auth/oidc/start`, 'alice-sub', { jar });
    const other = await hop(new Jar(), out.location);
    assert.equal(other.status, 400);
    assert.equal((await other.json()).code, 'OIDC_STATE');
    assert.equal(other.headers.getSetCookie().some((c) => c.startsWith('tusko_session=')), false);
  });

  test('unknown and malformed states are refused', async () => {
    for (const q of ['state=' + 'a'.repeat(64) + '&code=x', 'state=short&code=x', 'code=x', '']) {
      const r = await api(rs.url, `/api/auth/oidc/callback?${q}`);
      assert.equal(r.status, 400, q);
      assert.equal(r.json.code, 'OIDC_STATE');
    }
  });

  test('an expired flow is refused', async () => {
    const jar = new Jar();
    const out = await op.signIn(`${rs.url}/api/auth/oidc/start`, 'alice-sub', { jar });
    pg.query(`UPDATE oidc_flows SET expires_at = now() - interval '1 second'`);
    const r = await hop(jar, out.location);
    assert.equal(r.status, 400);
  });

  test('the user declining at the provider ends in OIDC_DENIED', async () => {
    // a first sign-in of this account asks for consent; decline it
    const out = await op.signIn(`${rs.url}/api/auth/oidc/start`, 'decliner-sub', { consent: false });
    assert.match(out.location, /[?&]error=access_denied/);
    const r = await hop(out.jar, out.location);
    assert.equal(r.status, 401);
    assert.equal((await r.json()).code, 'OIDC_DENIED');
    assert.equal(pg.rows(`SELECT count(*) FROM user_identities WHERE subject = 'decliner-sub'`)[0][0], '0');
  });

  test('a browser whose sign-in fails is sent to the sign-in page with the reason', async () => {
    const out = await op.signIn(`${rs.url}/api/auth/oidc/start`, 'decliner2-sub', { consent: false });
    const html = { headers: { accept: 'text/html,application/xhtml+xml,*/*;q=0.8' } };
    const r = await hop(out.jar, out.location, html);
    assert.equal(r.status, 302);
    const loc = new URL(r.headers.get('location'), rs.url);
    assert.equal(loc.origin, rs.url);
    assert.equal(loc.pathname, '/');
    assert.equal(loc.searchParams.get('error'), 'OIDC_DENIED');
    assert.match(loc.searchParams.get('error_description'), /the provider refused the sign-in: access_denied/);
    assert.equal(r.headers.getSetCookie().filter((c) => /^tusko_session=[^;]/.test(c)).length, 0, 'no session');
    // the same for a replayed or forged callback
    const forged = await hop(out.jar, `${rs.url}/api/auth/oidc/callback?state=zz&code=x`, html);
    assert.equal(forged.status, 302);
    assert.equal(new URL(forged.headers.get('location'), rs.url).searchParams.get('error'), 'OIDC_STATE');
  });

  test('return_to must be a path on this site (no open redirect)', async () => {
    for (const bad of ['//evil.example/x', 'https://evil.example/', '/\\evil.example', 'javascript:alert(1)', '/a b']) {
      const r = await api(rs.url, `/api/auth/oidc/start?return_to=${encodeURIComponent(bad)}`);
      assert.equal(r.status, 400, bad);
    }
  });

  test('a verified email that belongs to a local account is refused unless linking is on', async () => {
    const s = await fullSignIn(rs, 'bob-sub');
    assert.equal(s.callback.status, 409);
    assert.equal((await s.callback.json()).code, 'EMAIL_IN_USE');
    assert.equal(pg.rows(`SELECT count(*) FROM user_identities WHERE subject = 'bob-sub'`)[0][0], '0');
    // with OIDC_LINK_BY_EMAIL the identity joins bob's account
    const link = (await startTusko({ pg, env: { TUSKO_LISTEN: `127.0.0.1:${ports.link}`, TUSKO_PUBLIC_URL: `http://127.0.0.1:${ports.link}`, OIDC_ISSUER: op.issuer, OIDC_CLIENT_ID: 'tusko-link', OIDC_CLIENT_SECRET: 'secret-link-012345678', OIDC_LINK_BY_EMAIL: 'true' } })).tusko;
    const s2 = await fullSignIn(link, 'bob-sub');
    assert.equal(s2.callback.status, 302, await s2.callback.text());
    const m = await me(link, s2.jar);
    assert.equal(m.json.email, 'bob@example.com');
    assert.equal(m.json.id, pg.rows(`SELECT id FROM users WHERE email = 'bob@example.com'`)[0][0]);
    await link.stop();
  });

  test('an unverified email is not trusted: a new account without an email', async () => {
    addUser(pg, 'carol@example.com');
    const s = await fullSignIn(rs, 'mallory-sub');
    assert.equal(s.callback.status, 302, await s.callback.text());
    const m = await me(rs, s.jar);
    assert.equal(m.json.email, null);
    assert.notEqual(m.json.id, pg.rows(`SELECT id FROM users WHERE email = 'carol@example.com'`)[0][0]);
  });

  test('a wrong client secret fails at the token exchange', async () => {
    const port = await freePort();
    const bad = (await startTusko({ pg, env: { TUSKO_LISTEN: `127.0.0.1:${port}`, TUSKO_PUBLIC_URL: `http://127.0.0.1:${ports.rs}`, OIDC_ISSUER: op.issuer, OIDC_CLIENT_ID: 'tusko-rs', OIDC_CLIENT_SECRET: 'not-the-secret' } })).tusko;
    const jar = new Jar();
    const out = await op.signIn(`${bad.url}/api/auth/oidc/start`, 'alice-sub', { jar });
    // the provider redirects to the registered URI (the other instance); hand it to this one
    const cb = out.location.replace(`127.0.0.1:${ports.rs}`, `127.0.0.1:${port}`);
    const r = await hop(jar, cb);
    assert.equal(r.status, 502);
    assert.equal((await r.json()).code, 'OIDC_TOKEN');
    await bad.stop();
  });

  test('one address may start at most 120 sign-ins per 15 minutes', async () => {
    pg.query(`DELETE FROM rate_events WHERE key LIKE 'oidc:ip:%'`);
    for (let i = 0; i < 120; i++) assert.equal((await api(rs.url, '/api/auth/oidc/start')).status, 302, `start ${i + 1}`);
    const r = await api(rs.url, '/api/auth/oidc/start');
    assert.equal(r.status, 429);
    assert.equal(r.json.code, 'TOO_MANY_ATTEMPTS');
    assert.ok(Number(r.headers.get('retry-after')) >= 1);
    pg.query(`DELETE FROM rate_events WHERE key LIKE 'oidc:ip:%'`);
    assert.equal((await api(rs.url, '/api/auth/oidc/start')).status, 302);
  });

  test('key rotation: a token signed with a new kid makes tusko refetch the JWKS', async () => {
    // rs has the old keys cached; the provider restarts on the same port with new ones
    const port = op.port;
    const clients = op.clients;
    const accounts = op.accounts;
    await op.stop();
    op = await startOidcProvider({ port, clients, keys: [makeKey('RS256', 'rs-2'), makeKey('ES256', 'es-2')] });
    op.clients = clients;
    for (const [k, v] of accounts) op.accounts.set(k, v);
    const s = await fullSignIn(rs, 'alice-sub');
    assert.equal(s.callback.status, 302, await s.callback.text());
    assert.match(rs.log(), /unknown signing key: refetching/);
    assert.equal((await me(rs, s.jar)).json.email, 'alice@example.com');
  });
});

describe('OpenID Connect off', () => {
  test('without OIDC_ISSUER the routes answer 404 OIDC_DISABLED', async () => {
    const t = await startTusko({ tag: 'nooidc' });
    for (const p of ['/api/auth/oidc/start', '/api/auth/oidc/callback?state=x&code=y']) {
      const r = await api(t.tusko.url, p);
      assert.equal(r.status, 404, p);
      assert.equal(r.json.code, 'OIDC_DISABLED');
    }
    assert.equal((await api(t.tusko.url, '/api/auth/config')).json.oidc, false);
    await t.tusko.stop();
  });
});
