// Volumes, as OpenSandbox's create request gives them: host folders the
// operator allows (SANDBOX_HOST_VOLUME_ALLOW) and named volumes (pvc.claimName)
// that outlive their sandbox, per owner — read-write, read-only (a read-only
// bind the kernel enforces) and subPath; and what is refused: no allow list,
// a folder outside it, a symlink leading out, the service's own state, a
// mount point on the read-only image, ".." in subPath.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { stopAll, tmpdir } from '../../lib/harness.mjs';
import { RUNTIME, startSandboxd } from './sbx.mjs';

after(stopAll);

const DOCKER = RUNTIME === 'docker';

describe('volumes', () => {
  let s, base, allowed, outside;
  const made = [];
  before(async () => {
    base = tmpdir('sbx-vol-');
    fs.chmodSync(base, 0o755);
    allowed = path.join(base, 'allowed');
    outside = path.join(base, 'outside');
    fs.mkdirSync(path.join(allowed, 'data'), { recursive: true });
    fs.mkdirSync(outside, { recursive: true });
    for (const d of [allowed, path.join(allowed, 'data')]) fs.chmodSync(d, 0o777);
    fs.writeFileSync(path.join(allowed, 'data/marker.txt'), 'host-marker\n');
    fs.writeFileSync(path.join(outside, 'secret.txt'), 'outside\n');
    fs.symlinkSync(outside, path.join(allowed, 'leads-out'));
    // the state directory lies beneath the allowed folder: still never mountable
    s = await startSandboxd({ stateDir: path.join(allowed, 'state'), env: { SANDBOX_HOST_VOLUME_ALLOW: `${allowed},/nonexistent-prefix` } });
  });
  after(async () => {
    for (const id of made) await s.api.del(id);
    // named volumes outlive sandboxes by design: remove the ones made here
    for (const [owner, claim] of [['vol-user-a', 'e2e-pvc'], ['vol-user-b', 'e2e-pvc'], ['vol-user-c', 'plant']])
      await s.api.call('DELETE', `/v1/volumes/${claim}?owner=${owner}`);
    await s.stop();
    fs.rmSync(base, { recursive: true, force: true });
  });

  async function create(volumes, extra = {}) {
    const c = await s.api.create({ volumes, ...extra });
    if (c.status === 202) made.push(c.json.id);
    return c;
  }
  const sh = async (id, cmd) => s.api.exec(id, cmd);

  test('a host folder read-write: the host file is seen, a write lands on the host', async () => {
    const c = await create([{ name: 'host-rw', host: { path: path.join(allowed, 'data') }, mountPath: '/mnt/host-data' }]);
    assert.equal(c.status, 202, c.text);
    const id = c.json.id;
    assert.equal((await sh(id, 'cat /mnt/host-data/marker.txt')).stdout, 'host-marker');
    const w = await sh(id, "echo written-from-sandbox > /mnt/host-data/out.txt && echo ok");
    assert.equal(w.stdout, 'ok', w.stderr);
    assert.equal(fs.readFileSync(path.join(allowed, 'data/out.txt'), 'utf8'), 'written-from-sandbox\n');
  });

  test('a host folder read-only: the kernel refuses writes', async () => {
    const c = await create([{ name: 'host-ro', host: { path: path.join(allowed, 'data') }, mountPath: '/mnt/ro', readOnly: true }]);
    assert.equal(c.status, 202, c.text);
    const id = c.json.id;
    assert.equal((await sh(id, 'cat /mnt/ro/marker.txt')).stdout, 'host-marker');
    const t = await sh(id, 'touch /mnt/ro/nope 2>&1; echo rc=$?');
    assert.match(t.stdout, /Read-only file system/);
    assert.match(t.stdout, /rc=1/);
    // root of the sandbox's own user namespace cannot lift it either
    assert.ok(!fs.existsSync(path.join(allowed, 'data/nope')));
  });

  test('host volumes outside the allow list, through a symlink, or holding the state are refused with 403', async () => {
    for (const [p, rule] of [
      [outside, /not under a prefix SANDBOX_HOST_VOLUME_ALLOW allows/],
      [path.join(allowed, 'leads-out'), /not under a prefix/],
      [path.join(allowed, 'data/../leads-out'), /not under a prefix/],
      [path.join(allowed, 'state'), /state directory/],
      [allowed, /state directory/],
      ['/etc', /not under a prefix/],
    ]) {
      const c = await create([{ name: 'v', host: { path: p }, mountPath: '/mnt/x' }]);
      assert.equal(c.status, 403, `${p}: ${c.text}`);
      assert.match(c.json.message, rule, p);
    }
    const missing = await create([{ name: 'v', host: { path: path.join(allowed, 'missing') }, mountPath: '/mnt/x' }]);
    assert.equal(missing.status, 404, missing.text);
  });

  test('bad volume requests are 400 with the rule named', async () => {
    const hp = { path: path.join(allowed, 'data') };
    for (const [v, rule] of [
      [{ name: 'v', host: hp, mountPath: '/etc/x' }, /under \/mnt, \/workspace or \/tmp/],
      [{ name: 'v', host: hp, mountPath: '/mnt/../etc' }, /mountPath refused/],
      [{ name: 'v', host: hp, mountPath: 'mnt/x' }, /absolute/],
      [{ name: 'V_bad', host: hp, mountPath: '/mnt/x' }, /DNS label/],
      [{ name: 'v', mountPath: '/mnt/x' }, /exactly one backend/],
      [{ name: 'v', host: hp, pvc: { claimName: 'a' }, mountPath: '/mnt/x' }, /exactly one backend/],
      [{ name: 'v', pvc: { claimName: 'a' }, mountPath: '/mnt/x', subPath: '../up' }, /subPath refused/],
      [{ name: 'v', pvc: { claimName: 'a' }, mountPath: '/mnt/x', subPath: '/abs' }, /relative/],
      [{ name: 'v', ossfs: { bucket: 'b' }, mountPath: '/mnt/x' }, /not supported/],
      [{ name: 'v', pvc: { claimName: 'Not_DNS' }, mountPath: '/mnt/x' }, /claimName/],
    ]) {
      const c = await create([v]);
      assert.equal(c.status, 400, `${JSON.stringify(v)}: ${c.text}`);
      assert.match(c.json.message, rule, JSON.stringify(v));
    }
    const twice = await create([
      { name: 'a', pvc: { claimName: 'a' }, mountPath: '/mnt/x' },
      { name: 'b', pvc: { claimName: 'b' }, mountPath: '/mnt/x/y' },
    ]);
    assert.equal(twice.status, 400);
    assert.match(twice.json.message, /overlaps/);
  });

  test('a named volume outlives its sandbox, read-only and subPath mounts see it, per owner', async () => {
    const meta = { user: 'vol-user-a' };
    let c = await create([{ name: 'pvc', pvc: { claimName: 'e2e-pvc' }, mountPath: '/mnt/pvc-data' }], { metadata: meta });
    assert.equal(c.status, 202, c.text);
    let w = await sh(c.json.id, 'mkdir -p /mnt/pvc-data/datasets/train && echo pvc-marker > /mnt/pvc-data/marker.txt && echo sub-marker > /mnt/pvc-data/datasets/train/marker.txt && echo ok');
    assert.equal(w.stdout, 'ok', w.stderr);
    assert.equal((await s.api.del(c.json.id)).status, 204);
    // a new sandbox of the same owner, read-only
    c = await create([{ name: 'pvc', pvc: { claimName: 'e2e-pvc' }, mountPath: '/mnt/pvc-ro', readOnly: true }], { metadata: meta });
    assert.equal(c.status, 202, c.text);
    assert.equal((await sh(c.json.id, 'cat /mnt/pvc-ro/marker.txt')).stdout, 'pvc-marker');
    assert.match((await sh(c.json.id, 'touch /mnt/pvc-ro/x 2>&1; true')).stdout, /Read-only file system/);
    // subPath: only that folder is visible
    c = await create([{ name: 'train', pvc: { claimName: 'e2e-pvc' }, mountPath: '/mnt/train', subPath: 'datasets/train' }], { metadata: meta });
    assert.equal(c.status, 202, c.text);
    assert.equal((await sh(c.json.id, 'ls /mnt/train')).stdout, 'marker.txt');
    assert.equal((await sh(c.json.id, 'cat /mnt/train/marker.txt')).stdout, 'sub-marker');
    w = await sh(c.json.id, 'echo subpath-write > /mnt/train/output.txt && cat /mnt/train/output.txt');
    assert.equal(w.stdout, 'subpath-write');
    // another owner's volume of the same name is another volume
    c = await create([{ name: 'pvc', pvc: { claimName: 'e2e-pvc' }, mountPath: '/mnt/pvc-data' }], { metadata: { user: 'vol-user-b' } });
    assert.equal(c.status, 202, c.text);
    assert.equal((await sh(c.json.id, 'ls -A /mnt/pvc-data | wc -l')).stdout, '0');
  });

  test('a symlink planted in a named volume does not lead a later subPath out', async () => {
    const meta = { user: 'vol-user-c' };
    let c = await create([{ name: 'pvc', pvc: { claimName: 'plant' }, mountPath: '/mnt/p' }], { metadata: meta });
    assert.equal(c.status, 202, c.text);
    await sh(c.json.id, 'ln -s / /mnt/p/root-link; ln -s /etc /mnt/p/etc-link');
    for (const sub of ['root-link/etc', 'etc-link']) {
      c = await create([{ name: 'pvc', pvc: { claimName: 'plant' }, mountPath: '/mnt/q', subPath: sub }], { metadata: meta });
      if (c.status === 202) {
        // never the host's folder: whatever is mounted is empty or refused
        const ls = await sh(c.json.id, 'ls /mnt/q 2>&1 | head -3');
        assert.ok(!/passwd|hostname/.test(ls.stdout), `${sub}: ${ls.stdout}`);
      } else {
        assert.ok(c.status >= 400, c.text);
      }
    }
  });

  test('DELETE /v1/volumes/{name} removes an owner\'s named volume', async () => {
    const meta = { user: 'vol-user-d' };
    const c = await create([{ name: 'pvc', pvc: { claimName: 'to-delete' }, mountPath: '/mnt/d' }], { metadata: meta });
    assert.equal(c.status, 202, c.text);
    await sh(c.json.id, 'echo x > /mnt/d/f');
    if (DOCKER) {
      const busy = await s.api.call('DELETE', '/v1/volumes/to-delete?owner=vol-user-d');
      assert.equal(busy.status, 409, busy.text);
    }
    assert.equal((await s.api.del(c.json.id)).status, 204);
    made.splice(made.indexOf(c.json.id), 1);
    let d = await s.api.call('DELETE', '/v1/volumes/to-delete?owner=vol-user-d');
    assert.equal(d.status, 204, d.text);
    d = await s.api.call('DELETE', '/v1/volumes/to-delete?owner=vol-user-d');
    assert.equal(d.status, 404, d.text);
    if (!DOCKER) assert.ok(!fs.existsSync(path.join(s.stateDir, 'volumes/vol-user-d/to-delete')));
    assert.equal((await s.api.call('DELETE', '/v1/volumes/Bad_Name')).status, 400);
  });
});

describe('volumes without an allow list', () => {
  test('a host volume is refused with 403 naming SANDBOX_HOST_VOLUME_ALLOW', async () => {
    const s = await startSandboxd();
    try {
      const c = await s.api.create({ volumes: [{ name: 'v', host: { path: '/tmp' }, mountPath: '/mnt/x' }] });
      assert.equal(c.status, 403, c.text);
      assert.match(c.json.message, /SANDBOX_HOST_VOLUME_ALLOW is empty/);
    } finally {
      await s.stop();
    }
  });
});
