// Helpers for tusko's own integration tests: a tusko on a fresh database, users
// made with the real CLI, sign-in through the real API.
import assert from 'node:assert/strict';

import { api, runProgram, startPostgres, startProgram } from '../../lib/harness.mjs';

// Starts tusko on a fresh database (or `pg` when given). Returns { tusko, pg, env }.
export async function startTusko({ pg, env = {}, tag = 'app' } = {}) {
  pg = pg || (await startPostgres(tag));
  const full = { DATABASE_URL: pg.url, TUSKO_LISTEN: '127.0.0.1:0', TUSKO_MODELS: 'openai:gpt-4o-mini,anthropic:claude-sonnet-4', ...env };
  const tusko = await startProgram('tusko', { env: full });
  return { tusko, pg, env: full };
}

// `tusko user add --email E --password-stdin` → the new user's id.
export function addUser(pg, email, password = 'correct horse battery') {
  const r = runProgram('tusko', ['user', 'add', '--email', email, '--password-stdin'], {
    env: { DATABASE_URL: pg.url },
    input: password + '\n',
  });
  assert.equal(r.code, 0, `user add ${email}: ${r.stderr}`);
  return r.stdout.trim();
}

// `tusko token create --email E` → the token.
export function createToken(pg, email) {
  const r = runProgram('tusko', ['token', 'create', '--email', email], { env: { DATABASE_URL: pg.url } });
  assert.equal(r.code, 0, `token create ${email}: ${r.stderr}`);
  return r.stdout.trim();
}

// A user with a token: { id, email, token, auth: { authorization } }.
export function makeUser(pg, email) {
  const id = addUser(pg, email);
  const token = createToken(pg, email);
  return { id, email, token, auth: { authorization: `Bearer ${token}` } };
}

// Parses the Set-Cookie headers of a response into { name: { value, attrs: {lowercased: value|true} } }.
export function cookiesOf(res) {
  const out = {};
  for (const line of res.headers.getSetCookie()) {
    const [pair, ...attrs] = line.split(';').map((s) => s.trim());
    const eq = pair.indexOf('=');
    const a = {};
    for (const x of attrs) {
      const i = x.indexOf('=');
      if (i < 0) a[x.toLowerCase()] = true;
      else a[x.slice(0, i).toLowerCase()] = x.slice(i + 1);
    }
    out[pair.slice(0, eq)] = { value: pair.slice(eq + 1), attrs: a, raw: line };
  }
  return out;
}

// Signs in with a password. Returns { res, cookies, cookie (header value), csrf }.
export async function login(base, email, password = 'correct horse battery', headers = {}) {
  const res = await api(base, '/api/auth/login', { json: { email, password }, headers });
  const cookies = cookiesOf(res);
  const cookie = Object.entries(cookies)
    .filter(([, c]) => c.value)
    .map(([n, c]) => `${n}=${c.value}`)
    .join('; ');
  return { res, cookies, cookie, csrf: res.json && res.json.csrf_token };
}
