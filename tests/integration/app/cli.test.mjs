// The administrative commands: tusko user add, tusko token create, tusko migrate.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { api, runProgram, startPostgres, stopAll } from '../../lib/harness.mjs';
import { startTusko } from './lib.mjs';

after(stopAll);

describe('tusko user add / token create', () => {
  let pg;
  const run = (args, input) => runProgram('tusko', args, { env: { DATABASE_URL: pg.url }, input });
  before(async () => {
    pg = await startPostgres('cli');
  });

  test('migrate applies the schema once', () => {
    let r = run(['migrate']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stderr, /schema up to date/);
    r = run(['migrate']);
    assert.equal(r.code, 0);
    assert.match(r.stderr, /applied=0/);
  });

  test('user add reads the password from stdin, prints the id, stores an argon2id hash', () => {
    const r = run(['user', 'add', '--email', 'Zoe@Example.COM', '--password-stdin'], 'a long passphrase\n');
    assert.equal(r.code, 0, r.stderr);
    const id = r.stdout.trim();
    assert.match(id, /^[0-9a-f-]{36}$/);
    const [[email, hash]] = pg.rows(`SELECT email, password_hash FROM users WHERE id = '${id}'`);
    assert.equal(email, 'zoe@example.com');
    assert.match(hash, /^\$argon2id\$v=19\$m=65536,t=2,p=1\$/);
    assert.doesNotMatch(hash, /a long passphrase/);
  });

  test('user add refuses a duplicate, a bad email, a short password, missing options', () => {
    let r = run(['user', 'add', '--email', 'zoe@example.com', '--password-stdin'], 'another passphrase\n');
    assert.equal(r.code, 1);
    assert.match(r.stderr, /already exists/);
    r = run(['user', 'add', '--email', 'not-an-email', '--password-stdin'], 'a long passphrase\n');
    assert.equal(r.code, 2);
    r = run(['user', 'add', '--email', 'short@example.com', '--password-stdin'], 'short\n');
    assert.equal(r.code, 1);
    assert.match(r.stderr, /at least 8/);
    r = run(['user', 'add', '--password-stdin'], 'a long passphrase\n');
    assert.equal(r.code, 2);
    assert.match(r.stderr, /--email/);
    r = run(['user', 'add', '--email', 'x@example.com', '--bogus']);
    assert.equal(r.code, 2);
    r = run(['user', 'frobnicate']);
    assert.equal(r.code, 2);
    assert.equal(pg.rows(`SELECT count(*) FROM users WHERE email IN ('short@example.com', 'x@example.com')`)[0][0], '0');
  });

  test('user add without --password-stdin makes an account with no password', () => {
    const r = run(['user', 'add', '--email=nopw@example.com']);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(pg.rows(`SELECT password_hash IS NULL FROM users WHERE email = 'nopw@example.com'`)[0][0], 't');
  });

  test('token create prints a working token; unknown users are refused', async () => {
    let r = run(['token', 'create', '--email', 'ZOE@example.com', '--name', 'ci']);
    assert.equal(r.code, 0, r.stderr);
    const tok = r.stdout.trim();
    assert.match(tok, /^tsk_[0-9a-f]{64}$/);
    assert.equal(pg.rows(`SELECT name FROM api_tokens`)[0][0], 'ci');
    const t = await startTusko({ pg });
    const me = await api(t.tusko.url, '/api/me', { headers: { authorization: `Bearer ${tok}` } });
    assert.equal(me.status, 200);
    assert.equal(me.json.email, 'zoe@example.com');
    await t.tusko.stop();
    r = run(['token', 'create', '--email', 'ghost@example.com']);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /no user/);
    assert.equal(r.stdout, '');
    r = run(['token', 'create']);
    assert.equal(r.code, 2);
  });

  test('an unknown command is refused', () => {
    const r = run(['launch']);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /unknown command/);
  });
});
