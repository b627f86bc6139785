// Whole-sandbox paths, as upstream OpenSandbox serves them: execd's command,
// session and file APIs take any path of the sandbox's own view (cwd /tmp, a
// session in /tmp, files under /tmp), never anything of the host's, and the
// read-only image answers 403 READ_ONLY_FILESYSTEM as EROFS would to any
// process. A sandbox whose execd was asked for workspace confinement (as tusko
// asks for its own sandboxes, POST /confine) refuses all of that for good.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import { after, before, describe, test } from 'node:test';

import { stopAll } from '../../lib/harness.mjs';
import { EXECD_PORT, KEY, startSandboxd } from './sbx.mjs';

after(stopAll);

const q = (p) => encodeURIComponent(p);

// Calls execd through sandboxd's server proxy.
function execd(s, id) {
  const base = `${s.url}/v1/sandboxes/${id}/proxy/${EXECD_PORT}`;
  async function headers(extra = {}) {
    return { 'OPEN-SANDBOX-API-KEY': KEY, 'X-EXECD-ACCESS-TOKEN': await s.api.token(id), ...extra };
  }
  return {
    async call(method, p, json) {
      const h = await headers(json !== undefined ? { 'content-type': 'application/json' } : {});
      const res = await fetch(base + p, { method, headers: h, body: json !== undefined ? JSON.stringify(json) : undefined });
      const text = await res.text();
      let parsed = null;
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = null;
      }
      return { status: res.status, text, json: parsed };
    },
    async upload(p, data) {
      const form = new FormData();
      form.append('metadata', new Blob([JSON.stringify({ path: p })], { type: 'application/json' }), 'metadata');
      form.append('file', new Blob([data]), 'x');
      const res = await fetch(base + '/files/upload', { method: 'POST', headers: await headers(), body: form });
      const text = await res.text();
      let parsed = null;
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = null;
      }
      return { status: res.status, text, json: parsed };
    },
  };
}

describe('whole-sandbox paths', () => {
  let s, id, x;
  const hostSecret = `/tmp/sbx-paths-secret-${crypto.randomBytes(6).toString('hex')}`;
  before(async () => {
    fs.writeFileSync(hostSecret, 'host secret');
    s = await startSandboxd();
    const c = await s.api.create();
    assert.equal(c.status, 202, c.text);
    id = c.json.id;
    x = execd(s, id);
  });
  after(async () => {
    fs.rmSync(hostSecret, { force: true });
    if (id) await s.api.del(id);
  });

  test('a command runs with cwd /tmp', async () => {
    const r = await s.api.exec(id, 'pwd', { cwd: '/tmp' });
    assert.equal(r.stdout, '/tmp');
    const d = await s.api.exec(id, 'pwd');
    assert.equal(d.stdout, '/workspace');
  });

  test('a session lives in /tmp', async () => {
    const c = await x.call('POST', '/session', { cwd: '/tmp' });
    assert.equal(c.status, 200, c.text);
    const sid = c.json.session_id;
    const r = await x.call('POST', `/session/${sid}/run`, { command: 'pwd; cd /var && pwd' });
    assert.equal(r.status, 200, r.text);
    assert.match(r.text, /"text":\s*"\/tmp"/);
    const again = await x.call('POST', `/session/${sid}/run`, { command: 'pwd' });
    assert.match(again.text, /"text":\s*"\/var"/); // a session keeps its shell's state
    await x.call('DELETE', `/session/${sid}`);
  });

  test('files under /tmp: write, read, stat, list, search, move, delete', async () => {
    let r = await x.upload('/tmp/osb/a.txt', 'under tmp\n');
    assert.equal(r.status, 200, r.text);
    assert.equal((await s.api.exec(id, 'cat /tmp/osb/a.txt')).stdout, 'under tmp');
    r = await x.call('GET', `/files/download?path=${q('/tmp/osb/a.txt')}`);
    assert.equal(r.text, 'under tmp\n');
    r = await x.call('GET', `/files/info?path=${q('/tmp/osb/a.txt')}`);
    assert.equal(r.json['/tmp/osb/a.txt'].size, 10);
    r = await x.call('GET', `/directories/list?path=${q('/tmp/osb')}`);
    assert.deepEqual(r.json.map((e) => e.path), ['/tmp/osb/a.txt']);
    r = await x.call('GET', `/files/search?path=${q('/tmp/osb')}&pattern=${q('*.txt')}`);
    assert.deepEqual(r.json.map((e) => e.path), ['/tmp/osb/a.txt']);
    r = await x.call('POST', '/files/mv', [{ src: '/tmp/osb/a.txt', dest: '/tmp/osb/b.txt' }]);
    assert.equal(r.status, 200, r.text);
    r = await x.call('POST', '/directories', { '/tmp/osb/sub': { mode: 755 } });
    assert.equal(r.status, 200, r.text);
    r = await x.call('DELETE', `/files?path=${q('/tmp/osb/b.txt')}`);
    assert.equal(r.status, 200, r.text);
    r = await x.call('DELETE', `/directories?path=${q('/tmp/osb')}`);
    assert.equal(r.status, 200, r.text);
    assert.equal((await s.api.exec(id, 'ls /tmp/osb 2>&1 || echo gone')).stdout.split('\n').pop(), 'gone');
  });

  test('the image is readable and read-only: 403 READ_ONLY_FILESYSTEM', async () => {
    let r = await x.call('GET', `/files/download?path=${q('/etc/os-release')}`);
    assert.equal(r.status, 200, r.text);
    assert.match(r.text, /ID=/);
    r = await x.upload('/etc/tusko-new', 'x');
    assert.equal(r.status, 403, r.text);
    assert.equal(r.json.code, 'READ_ONLY_FILESYSTEM');
    r = await x.call('DELETE', `/files?path=${q('/etc/os-release')}`);
    assert.ok(r.status === 403, r.text);
    assert.equal((await s.api.exec(id, 'test -f /etc/os-release && echo kept')).stdout, 'kept');
  });

  test('giving a file away needs a privilege execd does not have: 403 PERMISSION_DENIED, nothing left', async () => {
    const form = new FormData();
    form.append('metadata', new Blob([JSON.stringify({ path: '/tmp/given.txt', owner: 'nobody', group: 'nogroup' })], { type: 'application/json' }), 'metadata');
    form.append('file', new Blob(['x']), 'x');
    const res = await fetch(`${s.url}/v1/sandboxes/${id}/proxy/${EXECD_PORT}/files/upload`, {
      method: 'POST',
      headers: { 'OPEN-SANDBOX-API-KEY': KEY, 'X-EXECD-ACCESS-TOKEN': await s.api.token(id) },
      body: form,
    });
    const body = await res.json();
    assert.equal(res.status, 403, JSON.stringify(body));
    assert.equal(body.code, 'PERMISSION_DENIED');
    assert.equal((await s.api.exec(id, 'test -e /tmp/given.txt && echo there || echo absent')).stdout, 'absent');
  });

  test('the host stays out of view: magic links and the host\'s files are refused or absent', async () => {
    for (const p of ['/proc/self/root/etc/passwd', '/proc/1/root/etc/passwd', '/proc/1/cwd', hostSecret]) {
      const r = await x.call('GET', `/files/download?path=${q(p)}`);
      assert.ok([400, 403, 404].includes(r.status), `${p}: ${r.status} ${r.text}`);
      assert.ok(!r.text.includes('host secret'));
    }
  });

  test('POST /confine keeps the sandbox to /workspace for good', async () => {
    const c = await s.api.create();
    assert.equal(c.status, 202, c.text);
    const y = execd(s, c.json.id);
    try {
      let r = await y.call('POST', '/confine', { confine: 'workspace' });
      assert.equal(r.status, 200, r.text);
      assert.deepEqual(r.json, { confine: 'workspace', root: '/workspace' });
      r = await y.call('POST', '/command', { command: 'pwd', cwd: '/tmp' });
      assert.equal(r.status, 400);
      assert.match(r.json.message, /outside the workspace/);
      r = await y.call('POST', '/session', { cwd: '/tmp' });
      assert.equal(r.status, 400);
      r = await y.upload('/tmp/x.txt', 'x');
      assert.equal(r.status, 400);
      r = await y.call('GET', `/files/download?path=${q('/etc/os-release')}`);
      assert.equal(r.status, 400);
      r = await y.upload('/workspace/ok.txt', 'ok');
      assert.equal(r.status, 200, r.text);
      r = await y.call('POST', '/confine', { confine: 'none' });
      assert.equal(r.status, 400);
      assert.equal((await y.call('GET', '/confine')).json.confine, 'workspace');
    } finally {
      await s.api.del(c.json.id);
    }
  });
});
