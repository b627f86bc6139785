// The official OpenSandbox SDK (@alibaba-group/opensandbox, npm) against our
// service with useServerProxy: every execd call goes through sandboxd's proxy.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { ConnectionConfig, Sandbox } from '@alibaba-group/opensandbox';

import { stopAll } from '../../lib/harness.mjs';
import { KEY, startSandboxd } from './sbx.mjs';

after(stopAll);

describe('the npm SDK with useServerProxy', () => {
  let s, sbx;
  before(async () => {
    s = await startSandboxd({ env: { SANDBOX_WARM_POOL_SIZE: '1' } });
    const connectionConfig = new ConnectionConfig({ domain: new URL(s.url).host, protocol: 'http', apiKey: KEY, useServerProxy: true });
    sbx = await Sandbox.create({ connectionConfig, image: 'tusko-sandbox', metadata: { owner: 'sdk-user' }, timeoutSeconds: 300 });
  });

  test('creates a sandbox on our service and runs a command', async () => {
    assert.ok(sbx.id);
    assert.equal((await s.api.get(sbx.id)).json.metadata.owner, 'sdk-user');
    const exec = await sbx.commands.run('echo hello from $(id -un) in $(pwd)');
    assert.equal(exec.logs.stdout.map((m) => m.text).join(''), 'hello from sandbox in /workspace');
    assert.equal(exec.error, undefined);
    const info = await sbx.getInfo();
    assert.equal(info.status.state, 'Running');
  });

  test('writes and reads a file', async () => {
    await sbx.files.writeFiles([{ path: '/workspace/notes/a.txt', data: 'written by the SDK\n' }]);
    assert.equal(await sbx.files.readFile('/workspace/notes/a.txt'), 'written by the SDK\n');
    const cat = await sbx.commands.run('cat /workspace/notes/a.txt');
    assert.equal(cat.logs.stdout.map((m) => m.text).join(''), 'written by the SDK');
  });

  test('renews and kills it', async () => {
    const info = await sbx.getInfo();
    const before = new Date(info.expiresAt).getTime();
    const renewed = await sbx.renew(3600);
    assert.ok(new Date(renewed.expiresAt).getTime() > before + 3000 * 1000, 'renew moved expiresAt');
    assert.ok(new Date((await sbx.getInfo()).expiresAt).getTime() > before + 3000 * 1000);
    await sbx.kill();
    await sbx.close();
    const gone = await s.api.get(sbx.id);
    assert.equal(gone.json.status.state, 'Terminated');
    await s.stop();
  });
});
