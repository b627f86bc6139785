// SANDBOXD_PROXY_MAX_PER_SANDBOX: one sandbox's proxied execd requests in
// flight are capped, so a client holding long commands on one sandbox cannot
// take the proxy (PROXY_MAX in all) from the others. One more is 429 with
// Retry-After and reaches no execd; another sandbox is served; when one of
// the held requests ends, the sandbox is served again.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { sleep, stopAll } from '../../lib/harness.mjs';
import { startSandboxd } from './sbx.mjs';

describe('proxied requests per sandbox', () => {
  let sbx;
  before(async () => {
    sbx = await startSandboxd({ env: { SANDBOXD_PROXY_MAX_PER_SANDBOX: '2' } });
  });
  after(async () => {
    const r = await sbx.api.list('?pageSize=200');
    for (const s of (r.json && r.json.items) || []) await sbx.api.del(s.id);
    await stopAll();
  });

  test('one more than the limit on one sandbox is 429; another sandbox is served; freed when one ends', async () => {
    const a = await sbx.api.create();
    const b = await sbx.api.create();
    assert.equal(a.status, 202, a.text);
    assert.equal(b.status, 202, b.text);
    for (const s of [a, b]) {
      for (let i = 0; i < 200; i++) {
        const g = await sbx.api.get(s.json.id);
        if (g.json.status.state === 'Running') break;
        await sleep(50);
      }
    }
    // two long commands held on a (each a streamed response that lasts 4 s)
    const held = [sbx.api.exec(a.json.id, 'sleep 4; echo one'), sbx.api.exec(a.json.id, 'sleep 4; echo two')];
    await sleep(800);
    const third = await sbx.api.exec(a.json.id, 'echo three');
    assert.equal(third.status, 429, third.text);
    const body = JSON.parse(third.text);
    assert.equal(body.code, 'TOO_MANY_REQUESTS');
    assert.match(body.message, /SANDBOXD_PROXY_MAX_PER_SANDBOX/);
    // the other sandbox is served meanwhile
    const other = await sbx.api.exec(b.json.id, 'echo other');
    assert.equal(other.status, 200, other.text);
    assert.match(other.stdout, /other/);
    const done = await Promise.all(held);
    assert.deepEqual(done.map((d) => d.status), [200, 200]);
    assert.match(done[0].stdout + done[1].stdout, /one/);
    // both ended: a is served again
    const again = await sbx.api.exec(a.json.id, 'echo again');
    assert.equal(again.status, 200, again.text);
    assert.match(again.stdout, /again/);
  });
});
