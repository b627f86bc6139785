// The known case of a migration that locks a hot table: sql/0025 builds an
// index on events inside its transaction, and every event write waits for it.
// On a database whose events table is large and still lacks it, tusko serve
// refuses to start (applying nothing) and says to run `tusko migrate`;
// `tusko migrate --status` shows it pending with the table; `tusko migrate`
// applies it, and tusko serve then starts.
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';

import { runProgram, startPostgres, startProgram, stopAll } from '../../lib/harness.mjs';

after(stopAll);

describe('a migration that locks a large table', () => {
  test('serve refuses it, migrate applies it', async () => {
    const pg = await startPostgres('migrate_locks');
    const env = { DATABASE_URL: pg.url, TUSKO_LISTEN: '127.0.0.1:0' };
    let r = runProgram('tusko', ['migrate'], { env });
    assert.equal(r.code, 0, r.stderr);
    // a database as it was before 0025, with 10,001 events
    pg.query(`DROP INDEX events_turn_start;
      DELETE FROM schema_migrations WHERE version = '0025_events_turn_start.sql';
      INSERT INTO events (seq, session_id, type, data)
        SELECT g, '01a23000-0000-7000-8000-000000000001', CASE WHEN g % 10 = 0 THEN 'turn_start' ELSE 'text' END, '{}'
        FROM generate_series(1, 10001) g`);

    const t = await startProgram('tusko', { env, expectListen: false });
    const ex = await t.wait();
    assert.equal(ex.code, 1, t.log());
    assert.match(t.log(), /migration 0025_events_turn_start\.sql locks table events \(over 10000 rows\)/);
    assert.match(t.log(), /Run `tusko migrate` first/);
    assert.deepEqual(pg.rows(`SELECT to_regclass('events_turn_start') IS NULL`), [['t']]);
    // a command other than migrate refuses the same way
    r = runProgram('tusko', ['token', 'create', '--email', 'x@example.com'], { env });
    assert.equal(r.code, 1);
    assert.match(r.stderr, /locks table events/);

    r = runProgram('tusko', ['migrate', '--status'], { env });
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^applied +0001_users\.sql$/m);
    assert.match(r.stdout, /^pending +0025_events_turn_start\.sql +locks events \(over 10000 rows: run tusko migrate before starting\)$/m);
    assert.match(r.stdout, /^1 pending; some lock large tables/m);

    r = runProgram('tusko', ['migrate'], { env });
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stderr, /migration applied.*version=0025_events_turn_start\.sql/);
    assert.deepEqual(pg.rows(`SELECT to_regclass('events_turn_start') IS NOT NULL`), [['t']]);
    r = runProgram('tusko', ['migrate', '--status'], { env });
    assert.match(r.stdout, /^0 pending$/m);

    const ok = await startProgram('tusko', { env });
    await ok.stop();
  });

  test('migrate refuses stray arguments', async () => {
    const pg = await startPostgres('migrate_args');
    const r = runProgram('tusko', ['migrate', '--bogus'], { env: { DATABASE_URL: pg.url } });
    assert.equal(r.code, 2);
    assert.match(r.stderr, /usage: tusko migrate \[--status\]/);
    assert.deepEqual(pg.rows(`SELECT to_regclass('schema_migrations') IS NULL`), [['t']]);
  });
});
