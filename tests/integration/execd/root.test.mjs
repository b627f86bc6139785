// tusko-execd serving a whole root (EXECD_CONFINE=none, the default, as upstream):
// every path beneath EXECD_ROOT is served — relative ones relative to the
// workspace — and nothing escapes the root: not "..", not a symlink, not a magic
// link. A temporary folder stands in for the sandbox's "/"; POST /confine then
// narrows the same daemon to its workspace, for good.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { stopAll, tmpdir } from '../../lib/harness.mjs';
import { H, checkResponse, req, startExecd, stream, texts } from './lib.mjs';

after(stopAll);

const q = (p) => encodeURIComponent(p);

// One upload request: a metadata part before each file part, as the SDK sends.
async function upload(base, files) {
  const form = new FormData();
  for (const f of files) {
    form.append('metadata', new Blob([JSON.stringify(f.meta)], { type: 'application/json' }), 'metadata');
    form.append('file', new Blob([f.data]), 'x');
  }
  const res = await fetch(base + '/files/upload', { method: 'POST', headers: H, body: form });
  const text = await res.text();
  let json = null;
  try {
    json = JSON.parse(text);
  } catch {
    json = null;
  }
  return { status: res.status, text, json };
}

describe('whole root', () => {
  let ex, ROOT, WS, TMP, OUT;
  before(async () => {
    const base = tmpdir('tusko-execd-root-');
    ROOT = path.join(base, 'root');
    WS = path.join(ROOT, 'workspace');
    TMP = path.join(ROOT, 'tmp');
    OUT = path.join(base, 'outside');
    for (const d of [WS, TMP, OUT]) fs.mkdirSync(d, { recursive: true });
    fs.writeFileSync(path.join(OUT, 'secret.txt'), 'not for you');
    fs.symlinkSync(OUT, path.join(TMP, 'out-abs')); // absolute, out of the root
    fs.symlinkSync('../../outside', path.join(TMP, 'out-rel')); // relative, out of the root
    fs.symlinkSync('../workspace', path.join(TMP, 'ws-link')); // stays beneath the root
    ex = await startExecd({ workspace: WS, env: { EXECD_CONFINE: 'none', EXECD_ROOT: ROOT } });
  });

  test('commands start in the workspace and may run anywhere beneath the root', async () => {
    let r = await stream(ex.url, '/command', { command: 'pwd' });
    assert.deepEqual(texts(r.events, 'stdout'), [WS]);
    r = await stream(ex.url, '/command', { command: 'pwd', cwd: TMP });
    assert.deepEqual(texts(r.events, 'stdout'), [TMP]);
    r = await stream(ex.url, '/command', { command: 'pwd', cwd: '../tmp' }); // relative to the workspace
    assert.deepEqual(texts(r.events, 'stdout'), [TMP]);
    for (const cwd of [OUT, '../../outside', `${TMP}/out-abs`, `${TMP}/out-rel`, '/proc/self/root', '~', '$HOME']) {
      const x = await req(ex.url, '/command', { json: { command: 'pwd', cwd } });
      assert.equal(x.status, 400, cwd);
      checkResponse('POST', '/command', x);
    }
  });

  test('a session may live in another folder of the root', async () => {
    const c = await req(ex.url, '/session', { json: { cwd: TMP } });
    assert.equal(c.status, 200, c.text);
    const sid = c.json.session_id;
    let r = await stream(ex.url, `/session/${sid}/run`, { command: 'pwd' });
    assert.deepEqual(texts(r.events, 'stdout'), [TMP]);
    r = await stream(ex.url, `/session/${sid}/run`, { command: 'pwd', cwd: WS });
    assert.deepEqual(texts(r.events, 'stdout'), [WS]);
    const bad = await req(ex.url, '/session', { json: { cwd: OUT } });
    assert.equal(bad.status, 400);
    await req(ex.url, `/session/${sid}`, { method: 'DELETE' });
  });

  test('files anywhere beneath the root: upload, info, list, search, mv, download, delete', async () => {
    const f = path.join(TMP, 'notes/a.txt');
    let r = await upload(ex.url, [{ meta: { path: f, mode: 640 }, data: 'alpha\n' }]);
    assert.equal(r.status, 200, r.text);
    assert.equal(fs.readFileSync(f, 'utf8'), 'alpha\n');
    r = await req(ex.url, `/files/info?path=${q(f)}`);
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json[f].size, 6);
    r = await req(ex.url, `/directories/list?path=${q(path.join(TMP, 'notes'))}`);
    assert.deepEqual(r.json.map((e) => e.path), [f]);
    r = await req(ex.url, `/files/search?path=${q(TMP)}&pattern=${q('*.txt')}`);
    assert.equal(r.status, 200, r.text);
    assert.ok(r.json.some((e) => e.path === f), r.text);
    r = await req(ex.url, '/files/mv', { json: [{ src: f, dest: path.join(TMP, 'b.txt') }] });
    assert.equal(r.status, 200, r.text);
    r = await req(ex.url, `/files/download?path=${q(path.join(TMP, 'b.txt'))}`);
    assert.equal(r.text, 'alpha\n');
    // through a symlink that stays beneath the root: followed for reads
    fs.writeFileSync(path.join(WS, 'w.txt'), 'in the workspace');
    r = await req(ex.url, `/files/download?path=${q(path.join(TMP, 'ws-link/w.txt'))}`);
    assert.equal(r.text, 'in the workspace');
    r = await req(ex.url, `/files?path=${q(path.join(TMP, 'b.txt'))}`, { method: 'DELETE' });
    assert.equal(r.status, 200, r.text);
    assert.ok(!fs.existsSync(path.join(TMP, 'b.txt')));
  });

  test('nothing outside the root is read or written', async () => {
    const reads = [path.join(OUT, 'secret.txt'), '../../outside/secret.txt', `${TMP}/out-abs/secret.txt`, `${TMP}/out-rel/secret.txt`, '/proc/self/root/etc/passwd', '/etc/passwd', '..\u0000x'];
    for (const p of reads) {
      const r = await req(ex.url, `/files/download?path=${q(p)}`);
      assert.ok(r.status === 400 || r.status === 404, `${p}: ${r.status} ${r.text}`);
      assert.ok(!r.text.includes('not for you'));
    }
    for (const p of [`${TMP}/out-abs/pwn.txt`, `${TMP}/out-rel/pwn.txt`, path.join(OUT, 'pwn.txt'), '../../outside/pwn.txt']) {
      const r = await upload(ex.url, [{ meta: { path: p }, data: 'x' }]);
      assert.equal(r.status, 400, `${p}: ${r.status} ${r.text}`);
    }
    assert.deepEqual(fs.readdirSync(OUT), ['secret.txt']);
  });

  test('a read-only folder answers 403 READ_ONLY_FILESYSTEM', { skip: process.getuid() !== 0 && 'needs root (a read-only bind mount)' }, async () => {
    const ro = path.join(ROOT, 'usr');
    fs.mkdirSync(ro, { recursive: true });
    fs.writeFileSync(path.join(ro, 'kept.txt'), 'kept');
    const { execFileSync } = await import('node:child_process');
    execFileSync('mount', ['--bind', ro, ro]);
    try {
      execFileSync('mount', ['-o', 'remount,bind,ro', ro]);
      const r = await upload(ex.url, [{ meta: { path: path.join(ro, 'new.txt') }, data: 'x' }]);
      assert.equal(r.status, 403, r.text);
      assert.match(r.json.code, /READ_ONLY_FILESYSTEM/);
      const d = await req(ex.url, `/files?path=${q(path.join(ro, 'kept.txt'))}`, { method: 'DELETE' });
      assert.equal(d.status, 403, d.text);
      assert.equal(d.json.code, 'READ_ONLY_FILESYSTEM');
      const m = await req(ex.url, `/directories`, { json: { [path.join(ro, 'sub')]: { mode: 755 } } });
      assert.equal(m.status, 403, m.text);
    } finally {
      execFileSync('umount', [ro]);
    }
    assert.equal(fs.readFileSync(path.join(ro, 'kept.txt'), 'utf8'), 'kept');
  });

  test('POST /confine narrows the daemon to its workspace, for good', async () => {
    let r = await req(ex.url, '/confine');
    assert.deepEqual(r.json, { confine: 'none', root: ROOT });
    r = await req(ex.url, '/confine', { json: { confine: 'none' } });
    assert.equal(r.status, 400);
    r = await req(ex.url, '/confine', { json: { confine: 'workspace' } });
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.json, { confine: 'workspace', root: WS });
    const x = await req(ex.url, '/command', { json: { command: 'pwd', cwd: TMP } });
    assert.equal(x.status, 400);
    assert.match(x.json.message, /outside the workspace/);
    const d = await req(ex.url, `/files/download?path=${q(path.join(TMP, 'ws-link/w.txt'))}`);
    assert.equal(d.status, 400);
    const s = await req(ex.url, '/session', { json: { cwd: TMP } });
    assert.equal(s.status, 400);
    const ok = await req(ex.url, `/files/download?path=${q('w.txt')}`);
    assert.equal(ok.text, 'in the workspace');
    r = await req(ex.url, '/confine', { json: { confine: 'workspace' } }); // idempotent
    assert.equal(r.status, 200);
  });
});
