// The four programs: --help, --version, settings from the environment with clear
// errors, GET /healthz, a clean exit on SIGTERM; tusko's migrations.
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';

import { api, runProgram, startPostgres, startProgram, stopAll } from '../lib/harness.mjs';

after(stopAll);

const programs = [
  { name: 'tusko', listenEnv: 'TUSKO_LISTEN', needsDb: true },
  { name: 'tusko-sandboxd', listenEnv: 'SANDBOXD_LISTEN', env: { SANDBOXD_API_KEY: 'k-test-key-0123456789', SANDBOXD_STATE_DIR: '/tmp/tusko-programs-test-sbx' } },
  { name: 'tusko-execd', listenEnv: 'EXECD_LISTEN', env: { EXECD_WORKSPACE: '/tmp' } },
  { name: 'tusko-browserd', listenEnv: 'BROWSERD_LISTEN', env: { BROWSERD_API_KEY: 'k-test-key-0123456789' } },
];

for (const p of programs) {
  describe(p.name, () => {
    test('--help names its settings and exits 0', () => {
      const r = runProgram(p.name, ['--help']);
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, new RegExp(p.listenEnv));
      assert.match(r.stdout, /--version/);
    });

    test('--version prints the version', () => {
      const r = runProgram(p.name, ['--version']);
      assert.equal(r.code, 0);
      assert.match(r.stdout, new RegExp(`^${p.name} \\d+\\.\\d+\\.\\d+`));
    });

    test('a bad setting is refused with the variable named', () => {
      const r = runProgram(p.name, [], { env: { ...(p.env || {}), [p.listenEnv]: 'not-an-address' } });
      assert.notEqual(r.code, 0);
      assert.match(r.stderr, /not-an-address/);
    });

    test('an unknown LOG_LEVEL or LOG_FORMAT is refused, exit status 2', () => {
      for (const [k, v] of [['LOG_LEVEL', 'loud'], ['LOG_FORMAT', 'xml']]) {
        const r = runProgram(p.name, [], { env: { ...(p.env || {}), [k]: v } });
        assert.equal(r.code, 2, r.stderr);
        assert.match(r.stderr, new RegExp(`${k}: "${v}"`));
      }
    });

    test('an unknown flag is refused', () => {
      const r = runProgram(p.name, ['--no-such-flag']);
      assert.equal(r.code, 2);
      assert.match(r.stderr, /--no-such-flag/);
    });

    test('serves /healthz and exits cleanly on SIGTERM', async () => {
      const env = { ...(p.env || {}), [p.listenEnv]: '127.0.0.1:0' };
      if (p.needsDb) env.DATABASE_URL = (await startPostgres('health')).url;
      const prog = await startProgram(p.name, { env });
      const r = await api(prog.url, '/healthz');
      assert.equal(r.status, 200);
      assert.equal(r.json.status, 'ok');
      assert.equal(r.json.program, p.name);
      assert.ok(r.headers.get('x-request-id'));
      const ex = await prog.stop();
      assert.equal(ex.code, 0, `exit ${JSON.stringify(ex)}`);
    });
  });
}

describe('tusko migrations', () => {
  test('without DATABASE_URL tusko refuses to start and says why', () => {
    const r = runProgram('tusko', []);
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, /DATABASE_URL/);
  });

  test('two instances migrating at once both succeed and migrate once', async () => {
    const db = await startPostgres('mig');
    const { spawn } = await import('node:child_process');
    const { BUILD } = await import('../lib/harness.mjs');
    const run = () =>
      new Promise((resolve) => {
        const c = spawn(`${BUILD}/tusko`, ['migrate'], { env: { PATH: process.env.PATH, DATABASE_URL: db.url } });
        let err = '';
        c.stderr.on('data', (d) => (err += d));
        c.on('exit', (code) => resolve({ code, err }));
      });
    const [a, b] = await Promise.all([run(), run()]);
    assert.equal(a.code, 0, a.err);
    assert.equal(b.code, 0, b.err);
    const applied = [a.err, b.err].map((e) => Number((e.match(/applied=(\d+)/) || [])[1]));
    assert.equal(applied.filter((n) => n > 0).length, 1, `exactly one applied: ${applied}`);
    const rows = db.rows('SELECT count(*) FROM schema_migrations');
    assert.ok(Number(rows[0][0]) >= 1);
  });
});
