// Workspace snapshots end to end: a real tusko-sandboxd (native) and its
// execd, a real Postgres, the scripted model writing files, and s3rver (npm)
// read back with the test's own client; the verifying stand-in for a store that
// refuses. A snapshot round-trips byte for byte with its manifest and SHA-256
// metadata; an unchanged tree stores nothing; a big workspace goes up in parts;
// retention keeps the last N; a chat without a sandbox has nothing to snapshot;
// a wrong secret turns the feature off at start-up; a refusing store ends the
// snapshot failed with the store's code.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { startProgram, stopAll, tmpdir } from '../../lib/harness.mjs';
import { s3Env, startS3rver } from '../../lib/s3.mjs';
import { startS3Standin } from '../../lib/s3-standin.mjs';
import { KEY, startSandboxd } from '../sandboxd/sbx.mjs';
import { api, makeUser, newSession, startModels, startTusko, tuskoEnv, turn, until } from '../agent/lib.mjs';

const call = (name, args) => ({ steps: [{ tool_calls: [{ name, arguments: args }] }, { text: 'done: {{tool_result}}' }] });
const sha = (b) => crypto.createHash('sha256').update(b).digest('hex');

const SCENARIOS = {
  'write-a': call('write_file', { path: 'notes/a.txt', content: 'alpha\n' }),
  'write-c': call('write_file', { path: 'c.txt', content: 'gamma\n' }),
  'write-a2': call('write_file', { path: 'notes/a.txt', content: 'changed\n' }),
  'write-b': call('write_file', { path: 'b é.md', content: '# beta\n' }),
  // 48 MiB of incompressible bytes: the archive goes up in parts
  'write-big': call('execute_command', { command: 'head -c 50331648 /dev/urandom > big.bin && ls -l big.bin' }),
  'rm-big': call('execute_command', { command: 'rm big.bin' }),
  'snap-tool': call('snapshot_workspace', {}),
};

describe('workspace snapshots', () => {
  let ms, sbx, rv, stack, base, alice, sid;
  const snap = (s = sid, who = alice) => api(base, `/api/sessions/${s}/snapshots`, { method: 'POST', headers: who.auth });
  const list = async (s = sid) => (await api(base, `/api/sessions/${s}/snapshots`, { headers: alice.auth })).json.snapshots;

  before(async () => {
    ms = await startModels({ scenarios: SCENARIOS });
    sbx = await startSandboxd({ env: { SANDBOX_WARM_POOL_SIZE: '0' } });
    rv = await startS3rver();
    stack = await startTusko(ms, {
      env: { OPENSANDBOX_URL: sbx.url, OPENSANDBOX_API_KEY: KEY, ...s3Env(rv), S3_PREFIX: 'snap', S3_PART_SIZE: '16', S3_MULTIPART_THRESHOLD: '32', SNAPSHOT_KEEP_LAST: '2' },
      tag: 'snapshots',
    });
    base = stack.tusko.url;
    alice = makeUser(stack.pg);
    await until(() => /snapshots on/.test(stack.tusko.log()), { what: 'the start-up check' });
    sid = await newSession(base, alice);
  });
  after(async () => {
    await stopAll();
    await rv.close();
    await ms.close();
  });

  test('a chat without a sandbox has nothing to snapshot', async () => {
    const r = await snap();
    assert.equal(r.status, 409, r.text);
    assert.equal(r.json.code, 'NOTHING_TO_SNAPSHOT');
    assert.deepEqual(await list(), []);
  });

  test('a snapshot round-trips byte for byte, with its manifest and SHA-256 metadata', async () => {
    for (const sc of ['write-a', 'write-b']) assert.equal((await turn(base, alice, sid, `#scenario:${sc}`)).end.state, 'done');
    const r = await snap();
    assert.equal(r.status, 201, r.text);
    const s = r.json;
    assert.equal(s.status, 'ready');
    assert.equal(s.files, 2);
    assert.match(s.key, new RegExp(`^snap/${alice.id}/${sid}/\\d{8}T\\d{6}Z-${s.id}\\.tar\\.gz$`));
    const obj = await rv.get(s.key);
    assert.equal(obj.status, 200);
    assert.equal(obj.body.length, s.bytes);
    assert.equal(sha(obj.body), s.sha256);
    assert.equal(obj.headers.get('x-amz-meta-sha256'), s.sha256);
    const dir = tmpdir('snap-x-');
    fs.writeFileSync(path.join(dir, 'a.tgz'), obj.body);
    execFileSync('tar', ['-xzf', 'a.tgz', '-C', dir], { cwd: dir });
    assert.equal(fs.readFileSync(path.join(dir, 'notes/a.txt'), 'utf8'), 'alpha\n');
    assert.equal(fs.readFileSync(path.join(dir, 'b é.md'), 'utf8'), '# beta\n');
    const man = JSON.parse((await rv.get(s.key.replace(/\.tar\.gz$/, '.manifest.json'))).body);
    assert.deepEqual(man.files.map((f) => [f.path, f.size, f.sha256]).sort(), [
      ['b é.md', 7, sha('# beta\n')],
      ['notes/a.txt', 6, sha('alpha\n')],
    ]);
    fs.rmSync(dir, { recursive: true, force: true });
    const l = await list();
    assert.equal(l.length, 1);
    assert.equal(l[0].id, s.id);
    assert.equal(l[0].sha256, s.sha256);
  });

  test('an unchanged workspace answers "unchanged" and stores nothing', async () => {
    const before = await list();
    const r = await snap();
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.status, 'unchanged');
    assert.equal(r.json.id, before[0].id);
    assert.equal((await list()).length, 1);
    // the fast-lane tool says the same
    const t = await turn(base, alice, sid, '#scenario:snap-tool');
    const end = t.events.find((e) => e.event === 'tool_end' && e.json.name === 'snapshot_workspace');
    assert.match(end.json.result, /has not changed since snapshot/);
    // and in a chat without a sandbox it starts none
    const empty = await newSession(base, alice);
    const t2 = await turn(base, alice, empty, '#scenario:snap-tool');
    assert.ok(!t2.events.some((e) => e.event === 'sandbox_spawn'));
    assert.match(t2.events.find((e) => e.event === 'tool_end').json.result, /nothing to snapshot/);
  });

  test('a 48 MiB workspace goes up in parts; retention keeps the last two', async () => {
    const first = (await list())[0];
    assert.equal((await turn(base, alice, sid, '#scenario:write-big')).end.state, 'done');
    const big = await snap();
    assert.equal(big.status, 201, big.text);
    assert.ok(big.json.bytes > 48 * 1024 * 1024, String(big.json.bytes));
    const obj = await rv.get(big.json.key);
    assert.equal(sha(obj.body), big.json.sha256);
    assert.equal((await list()).length, 2);
    assert.equal((await turn(base, alice, sid, '#scenario:rm-big')).end.state, 'done');
    const third = await snap();
    assert.equal(third.status, 201, third.text);
    const l = await list();
    assert.deepEqual(l.map((x) => x.id), [third.json.id, big.json.id]);
    assert.equal((await rv.get(first.key)).status, 404, 'the oldest object is deleted');
    assert.equal((await rv.get(first.key.replace(/\.tar\.gz$/, '.manifest.json'))).status, 404);
    // delete one by hand: the object, then the row
    const d = await api(base, `/api/sessions/${sid}/snapshots/${big.json.id}`, { method: 'DELETE', headers: alice.auth });
    assert.equal(d.status, 204, d.text);
    assert.equal((await rv.get(big.json.key)).status, 404);
    assert.deepEqual((await list()).map((x) => x.id), [third.json.id]);
  });

  test('restore: verified, confined, the manifest checked; bad archives refused and nothing written', async () => {
    const read = async (p) => (await api(base, `/api/sessions/${sid}/files/preview?path=${encodeURIComponent(p)}`, { headers: alice.auth })).json.text;
    const s = (await list())[0];
    assert.equal(await read('notes/a.txt'), 'alpha\n');
    assert.equal((await turn(base, alice, sid, '#scenario:write-a2')).end.state, 'done');
    assert.equal(await read('notes/a.txt'), 'changed\n');
    const restore = (id, body = { confirm: true }) => api(base, `/api/sessions/${sid}/snapshots/${id}/restore`, { method: 'POST', json: body, headers: alice.auth });
    const nc = await restore(s.id, {});
    assert.equal(nc.status, 400);
    assert.equal(nc.json.code, 'CONFIRM_REQUIRED');
    const r = await restore(s.id);
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.restored, s.files);
    assert.deepEqual(r.json.differs, []);
    assert.equal(await read('notes/a.txt'), 'alpha\n');
    // into a new chat of the same user
    const sid2 = await newSession(base, alice);
    const r2 = await api(base, `/api/sessions/${sid2}/snapshots/${s.id}/restore`, { method: 'POST', json: { confirm: true }, headers: alice.auth });
    assert.equal(r2.status, 200, r2.text);
    // crafted archives, put in the store with rows of their own
    const bad = {
      dotdot: "t.addfile(ti('../escape.txt', 5), io.BytesIO(b'evil\\n'))",
      absolute: "t.addfile(ti('/etc/evil.txt', 5), io.BytesIO(b'evil\\n'))",
      symlink: "x = tarfile.TarInfo('notes/a.txt'); x.type = tarfile.SYMTYPE; x.linkname = '/etc/passwd'; t.addfile(x)",
      bomb: "t.addfile(ti('zeros.bin', 80 << 20), Zero())",
    };
    for (const [name, add] of Object.entries(bad)) {
      const py = `import io, sys, tarfile
class Zero(io.RawIOBase):
    def readinto(self, b):
        b[:] = bytes(len(b)); return len(b)
def ti(n, size):
    x = tarfile.TarInfo(n); x.size = size; return x
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode='w:gz', format=tarfile.USTAR_FORMAT) as t:
    t.addfile(ti('ok.txt', 3), io.BytesIO(b'ok\\n'))
    ${add}
sys.stdout.buffer.write(buf.getvalue())`;
      const body = execFileSync('python3', ['-c', py], { maxBuffer: 64 << 20 });
      const key = `snap/${alice.id}/${sid}/bad-${name}.tar.gz`;
      const put = await fetch(`${rv.url}/${rv.bucket}/${key}`, { method: 'PUT', body });
      assert.equal(put.status, 200, `s3rver PUT ${put.status}`);
      const id = crypto.randomUUID();
      stack.pg.query(`INSERT INTO snapshots (id, user_id, session_id, key, manifest_key, bytes, sha256, files, status) VALUES ('${id}', '${alice.id}', '${sid}', '${key}', '${key}.manifest.json', ${body.length}, '${sha(body)}', 2, 'ready')`);
      const rr = await restore(id);
      assert.equal(rr.status, 422, `${name}: ${rr.text}`);
      assert.equal(rr.json.code, 'UNSAFE_ARCHIVE', name);
      // nothing was written: ok.txt (the first member) is not there, a.txt as it was
      const ok = await api(base, `/api/sessions/${sid}/files/preview?path=ok.txt`, { headers: alice.auth });
      assert.equal(ok.status, 404, `${name}: ok.txt was written`);
      assert.equal(await read('notes/a.txt'), 'alpha\n');
    }
    // a changed object fails its SHA-256 check
    const id = crypto.randomUUID();
    stack.pg.query(`INSERT INTO snapshots (id, user_id, session_id, key, manifest_key, bytes, sha256, files, status) VALUES ('${id}', '${alice.id}', '${sid}', '${s.key}', '${s.key}.m', 1, '${'0'.repeat(64)}', 1, 'ready')`);
    const v = await restore(id);
    assert.equal(v.status, 422, v.text);
    assert.equal(v.json.code, 'VERIFY_FAILED');
    stack.pg.query(`DELETE FROM snapshots WHERE key LIKE '%/bad-%' OR id = '${id}'`);
  });

  test('another user can neither list nor snapshot the chat', async () => {
    const bob = makeUser(stack.pg);
    const r = await snap(sid, bob);
    assert.equal(r.status, 404, r.text);
    const l = await api(base, `/api/sessions/${sid}/snapshots`, { headers: bob.auth });
    assert.equal(l.status, 404);
  });

  test('a store refusing the signature: the snapshot ends failed with the store\'s code', async () => {
    const st = await startS3Standin({ bucket: 'snaps', accessKey: 'AKIDSNAP', secretKey: 'the-right-secret' });
    const t2 = await startProgram('tusko', { env: tuskoEnv(stack.pg, ms, { OPENSANDBOX_URL: sbx.url, OPENSANDBOX_API_KEY: KEY, ...s3Env(st), S3_PART_SIZE: '16', S3_MULTIPART_THRESHOLD: '32' }) });
    await until(() => /snapshots on/.test(t2.log()), { what: 'the check' });
    // through the verifying store: 48 MiB in 16 MiB parts, every request signed right
    assert.equal((await turn(t2.url, alice, sid, '#scenario:write-big')).end.state, 'done');
    const big = await api(t2.url, `/api/sessions/${sid}/snapshots`, { method: 'POST', headers: alice.auth });
    assert.equal(big.status, 201, big.text);
    const parts = st.requests.filter((q) => q.method === 'PUT' && q.query.partNumber);
    assert.equal(parts.length, Math.ceil(big.json.bytes / (16 * 1024 * 1024)));
    assert.ok(st.requests.some((q) => q.method === 'POST' && 'uploads' in q.query));
    assert.ok(!st.requests.some((q) => q.method === 'PUT' && !q.query.partNumber && q.bytes > 32 * 1024 * 1024));
    for (const q of st.requests) assert.equal(q.ok, true, `${q.method} ${q.path}: ${q.code}`);
    assert.equal(sha(st.objects.get(big.json.key).body), big.json.sha256);
    assert.equal(st.objects.get(big.json.key).meta['x-amz-meta-sha256'], big.json.sha256);
    assert.equal((await turn(t2.url, alice, sid, '#scenario:rm-big')).end.state, 'done');
    // from now on the store refuses every upload
    st.objects.clear();
    st.failures.push({ when: (q) => q.method === 'PUT', status: 403, code: 'SignatureDoesNotMatch', times: 1000 });
    assert.equal((await turn(t2.url, alice, sid, '#scenario:write-c')).end.state, 'done');
    const r = await api(t2.url, `/api/sessions/${sid}/snapshots`, { method: 'POST', headers: alice.auth });
    assert.equal(r.status, 502, r.text);
    assert.equal(r.json.status, 'failed');
    assert.match(r.json.error, /SignatureDoesNotMatch/);
    assert.equal(st.objects.size, 0);
    await t2.stop();
    // and a wrong secret at start-up: the feature is off, one log line
    const t3 = await startProgram('tusko', { env: tuskoEnv(stack.pg, ms, { ...s3Env(st), S3_SECRET_ACCESS_KEY: 'wrong-secret-Qx7' }) });
    await until(() => /snapshots are off/.test(t3.log()), { what: 'the failed check' });
    assert.match(t3.log(), /SignatureDoesNotMatch/);
    assert.ok(!t3.log().includes('wrong-secret-Qx7'));
    const off = await api(t3.url, `/api/sessions/${sid}/snapshots`, { headers: alice.auth });
    assert.equal(off.status, 503);
    assert.equal(off.json.code, 'SNAPSHOTS_OFF');
    await t3.stop();
    await st.close();
  });
});
