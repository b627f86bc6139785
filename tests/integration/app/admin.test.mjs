// Administrators (docs/ADMIN.md). The first account of an install is an admin
// and the next ones are users; `tusko user add --admin` makes another admin.
// Every route of the admin table (GET /api/admin/routes, read as an admin) is
// tried as a user with a token and with a signed-in session: each answers 403
// and changes nothing. An admin changes roles (the last enabled admin cannot be
// demoted or disabled), disables a user — their session and token stop at
// once, they cannot sign in — and re-enables them, deletes a user with what
// they own, and reads the audit log of all of it (sign-ins and a failure,
// token creations, the admin's actions), paged, filtered and as JSON lines.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { api, runProgram, stopAll } from '../../lib/harness.mjs';
import { addUser, createToken, login, startTusko } from './lib.mjs';

const PW = 'correct horse battery';

describe('admin', () => {
  let t, base, admin, bob, carol;
  before(async () => {
    t = await startTusko({ tag: 'admin' });
    base = t.tusko.url;
    const mk = (email, extra = []) => {
      const r = runProgram('tusko', ['user', 'add', '--email', email, '--password-stdin', ...extra], {
        env: { DATABASE_URL: t.pg.url },
        input: PW + '\n',
      });
      assert.equal(r.code, 0, r.stderr);
      return { id: r.stdout.trim(), email, stderr: r.stderr };
    };
    admin = mk('root@example.com');
    bob = mk('bob@example.com');
    carol = mk('carol@example.com', ['--admin']);
    for (const u of [admin, bob, carol]) {
      u.token = createToken(t.pg, u.email);
      u.auth = { authorization: `Bearer ${u.token}` };
    }
  });
  after(stopAll);

  test('the first account is an admin, the next a user, --admin makes one', async () => {
    assert.match(admin.stderr, /an admin/);
    assert.match(bob.stderr, /a user/);
    assert.match(carol.stderr, /an admin/);
    for (const [u, role] of [[admin, 'admin'], [bob, 'user'], [carol, 'admin']]) {
      const r = await api(base, '/api/me', { headers: u.auth });
      assert.equal(r.status, 200);
      assert.equal(r.json.role, role, u.email);
    }
  });

  test('a user reaches no admin route (every one tried, token and session)', async () => {
    const r = await api(base, '/api/admin/routes', { headers: admin.auth });
    assert.equal(r.status, 200, r.text);
    const routes = r.json.routes;
    assert.ok(routes.length >= 5, JSON.stringify(routes));
    const s = await login(base, bob.email);
    assert.equal(s.res.status, 200);
    const before = (await api(base, '/api/admin/users', { headers: admin.auth })).json;
    for (const { method, path } of routes) {
      assert.match(path, /^\/api\/admin\//);
      const p = path.replace('{id}', admin.id);
      const body = method === 'GET' || method === 'DELETE' ? undefined : { role: 'user', disabled: true };
      const viaToken = await api(base, p, { method, json: body, headers: bob.auth });
      assert.equal(viaToken.status, 403, `${method} ${p} as a user (token): ${viaToken.text}`);
      assert.equal(viaToken.json.code, 'FORBIDDEN');
      const viaCookie = await api(base, p, {
        method,
        json: body,
        headers: { cookie: s.cookie, 'x-csrf-token': s.csrf, origin: base },
      });
      assert.equal(viaCookie.status, 403, `${method} ${p} as a user (session): ${viaCookie.text}`);
      // no credential at all: 401, never the handler
      const anon = await api(base, p, { method, json: body });
      assert.equal(anon.status, 401, `${method} ${p} anonymously`);
    }
    const afterwards = (await api(base, '/api/admin/users', { headers: admin.auth })).json;
    assert.deepEqual(afterwards.users.map((u) => [u.id, u.role, u.disabled]), before.users.map((u) => [u.id, u.role, u.disabled]));
  });

  test('roles change; the last enabled admin stays one', async () => {
    let r = await api(base, `/api/admin/users/${bob.id}`, { method: 'PATCH', json: { role: 'admin' }, headers: admin.auth });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.role, 'admin');
    // the change is seen at once (the credential cache of the user is dropped)
    r = await api(base, '/api/admin/users', { headers: bob.auth });
    assert.equal(r.status, 200);
    const users = r.json.users;
    assert.deepEqual(users.map((u) => u.email), ['root@example.com', 'bob@example.com', 'carol@example.com']);
    assert.ok(users.every((u) => u.last_seen_at), 'last seen is kept');
    for (const u of [bob, carol]) {
      r = await api(base, `/api/admin/users/${u.id}`, { method: 'PATCH', json: { role: 'user' }, headers: admin.auth });
      assert.equal(r.status, 200, r.text);
    }
    r = await api(base, `/api/admin/users/${admin.id}`, { method: 'PATCH', json: { role: 'user' }, headers: admin.auth });
    assert.equal(r.status, 409);
    assert.equal(r.json.code, 'LAST_ADMIN');
    r = await api(base, `/api/admin/users/${admin.id}`, { method: 'PATCH', json: { disabled: true }, headers: admin.auth });
    assert.equal(r.status, 409);
    r = await api(base, `/api/admin/users/${bob.id}`, { method: 'PATCH', json: { role: 'root' }, headers: admin.auth });
    assert.equal(r.status, 400);
    r = await api(base, `/api/admin/users/00000000-0000-7000-8000-000000000000`, { method: 'PATCH', json: { role: 'user' }, headers: admin.auth });
    assert.equal(r.status, 404);
    r = await api(base, '/api/me', { headers: bob.auth });
    assert.equal(r.json.role, 'user');
  });

  test('a disabled user: session and token stop at once, no sign-in; enabled again they work', async () => {
    const s = await login(base, bob.email);
    assert.equal(s.res.status, 200);
    assert.equal((await api(base, '/api/me', { headers: { cookie: s.cookie } })).status, 200);
    assert.equal((await api(base, '/api/me', { headers: bob.auth })).status, 200);
    let r = await api(base, `/api/admin/users/${bob.id}`, { method: 'PATCH', json: { disabled: true }, headers: admin.auth });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.disabled, true);
    assert.equal((await api(base, '/api/me', { headers: { cookie: s.cookie } })).status, 401);
    assert.equal((await api(base, '/api/me', { headers: bob.auth })).status, 401);
    const again = await login(base, bob.email);
    assert.equal(again.res.status, 403);
    assert.equal(again.res.json.code, 'ACCOUNT_DISABLED');
    r = await api(base, `/api/admin/users/${bob.id}`, { method: 'PATCH', json: { disabled: false }, headers: admin.auth });
    assert.equal(r.status, 200);
    assert.equal((await api(base, '/api/me', { headers: bob.auth })).status, 200);
    // the session was ended by the disabling, not merely hidden
    assert.equal((await api(base, '/api/me', { headers: { cookie: s.cookie } })).status, 401);
    assert.equal((await login(base, bob.email)).res.status, 200);
  });

  test('an admin deletes a user with what they own', async () => {
    const dave = addUser(t.pg, 'dave@example.com');
    const tok = createToken(t.pg, 'dave@example.com');
    const c = await api(base, '/api/sessions', { json: { title: 'x' }, headers: { authorization: `Bearer ${tok}` } });
    assert.equal(c.status, 201, c.text);
    let r = await api(base, `/api/admin/users/${admin.id}`, { method: 'DELETE', headers: admin.auth });
    assert.equal(r.status, 409, 'not oneself');
    r = await api(base, `/api/admin/users/${dave}`, { method: 'DELETE', headers: admin.auth });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.deleted.chat_sessions, 1);
    assert.equal((await api(base, '/api/me', { headers: { authorization: `Bearer ${tok}` } })).status, 401);
    r = await api(base, `/api/admin/users/${dave}`, { method: 'DELETE', headers: admin.auth });
    assert.equal(r.status, 404);
  });

  test('the audit log: sign-ins, a failure, tokens, admin actions; paged, filtered, JSON lines', async () => {
    const bad = await login(base, bob.email, 'wrong password, surely');
    assert.equal(bad.res.status, 401);
    let r = await api(base, '/api/admin/audit?limit=500', { headers: admin.auth });
    assert.equal(r.status, 200, r.text);
    const all = r.json.entries;
    const actions = new Set(all.map((e) => e.action));
    for (const a of ['auth.login', 'auth.login_failed', 'token.create', 'user.update', 'account deleted'])
      assert.ok(actions.has(a), `${a} in ${[...actions]}`);
    const fail = all.find((e) => e.action === 'auth.login_failed' && e.detail.reason === undefined);
    assert.equal(fail.account_id, bob.id);
    assert.equal(fail.ip, '127.0.0.1');
    const upd = all.find((e) => e.action === 'user.update');
    assert.equal(upd.actor_id, admin.id);
    assert.equal(upd.actor_email, admin.email);
    // ids descend; a page of 2 and the next one follow on
    for (let i = 1; i < all.length; i++) assert.ok(Number(all[i - 1].id) > Number(all[i].id));
    const p1 = await api(base, '/api/admin/audit?limit=2', { headers: admin.auth });
    assert.equal(p1.json.entries.length, 2);
    const p2 = await api(base, `/api/admin/audit?limit=2&before=${p1.json.next_before}`, { headers: admin.auth });
    assert.deepEqual([...p1.json.entries, ...p2.json.entries].map((e) => e.id), all.slice(0, 4).map((e) => e.id));
    // filters
    r = await api(base, '/api/admin/audit?action=auth.', { headers: admin.auth });
    assert.ok(r.json.entries.length > 0 && r.json.entries.every((e) => e.action.startsWith('auth.')));
    r = await api(base, `/api/admin/audit?actor=${admin.id}&action=user.update`, { headers: admin.auth });
    assert.ok(r.json.entries.length >= 5 && r.json.entries.every((e) => e.actor_id === admin.id));
    r = await api(base, '/api/admin/audit?actor=nope', { headers: admin.auth });
    assert.equal(r.status, 400);
    // JSON lines: every entry, one a line
    const res = await fetch(`${base}/api/admin/audit?format=jsonl`, { headers: admin.auth });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-disposition'), /attachment/);
    const lines = (await res.text()).split('\n').filter(Boolean).map((l) => JSON.parse(l));
    assert.ok(lines.length >= all.length);
    assert.deepEqual(lines.slice(0, all.length).map((e) => e.id), all.map((e) => e.id));
  });
});
