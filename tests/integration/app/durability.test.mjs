// tusko serve says at start whether its database keeps what it acknowledges:
// on the test cluster (scripts/pg.sh --unsafe-fast) it warns, naming each
// unsafe setting; on a cluster with Postgres's durable defaults it does not.
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';

import { startCluster, startPostgres, startProgram, stopAll } from '../../lib/harness.mjs';

const env = (url) => ({ DATABASE_URL: url, TUSKO_LISTEN: '127.0.0.1:0' });

describe('durability settings at start', () => {
  after(stopAll);

  test('unsafe settings are named in a warning', async () => {
    const pg = await startPostgres('durability');
    const t = await startProgram('tusko', { env: env(pg.url) });
    await t.stop();
    const line = t.log().split('\n').find((l) => l.includes('unsafe settings'));
    assert.ok(line, t.log());
    assert.match(line, / warn tusko db /);
    for (const s of ['fsync=off', 'full_page_writes=off', 'synchronous_commit=off']) assert.ok(line.includes(s), line);
  });

  test('a durable cluster gets no warning', async () => {
    const c = await startCluster();
    assert.equal(c.mode(), 'durable');
    const t = await startProgram('tusko', { env: env(c.db('durable')) });
    await t.stop();
    assert.ok(!t.log().includes('unsafe settings'), t.log());
    assert.match(t.log(), /durable settings: fsync, synchronous_commit and full_page_writes are on/);
  });
});
