// What only the docker runtime has: the container the engine holds for a sandbox
// (as `docker inspect` shows it), its labels, recovery by label after kill -9
// with `docker ps -a` / `docker volume ls` checked after deletion, the image
// imported when missing, and the errors when the engine or the image is absent.
// The shared suites run against this runtime too (*.docker.test.mjs).
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { stopAll, tmpdir } from '../../lib/harness.mjs';
import { containersOf, docker, env as dockerEnv, inspect, volumesOf } from './docker.mjs';
import { record, removeStateDir, startSandboxd } from './sbx.mjs';

after(stopAll);

const start = (opts = {}) => startSandboxd({ ...opts, env: { SANDBOX_RUNTIME: 'docker', ...dockerEnv(), ...(opts.env || {}) } });

describe('docker runtime: the container', () => {
  let s, id, c, token;
  before(async () => {
    s = await start();
    const r = await s.api.create({
      metadata: { owner: 'u1', 'tusko.io/session': 's-1' },
      timeout: 600,
      resourceLimits: { cpu: '500m', memory: '256Mi', pids: '64' },
      env: { GREETING: 'hi' },
    });
    assert.equal(r.status, 202, r.text);
    id = r.json.id;
    token = await s.api.token(id);
    const cids = containersOf(id);
    assert.equal(cids.length, 1, 'one container per sandbox');
    c = inspect(cids[0]);
  });
  after(async () => {
    await s.api.del(id);
    await s.stop();
  });

  test('isolation: network none, read-only root, no capabilities, no-new-privileges, our seccomp profile, the sandbox user', () => {
    const hc = c.HostConfig;
    assert.equal(hc.NetworkMode, 'none');
    assert.equal(hc.ReadonlyRootfs, true);
    assert.deepEqual(hc.CapDrop, ['ALL']);
    assert.equal(hc.CapAdd, null);
    assert.equal(hc.Privileged, false);
    assert.ok(hc.SecurityOpt.includes('no-new-privileges'));
    const sc = hc.SecurityOpt.find((o) => o.startsWith('seccomp='));
    const profile = JSON.parse(sc.slice('seccomp='.length));
    assert.equal(profile.defaultAction, 'SCMP_ACT_ALLOW');
    const denied = profile.syscalls.flatMap((r) => (r.args && r.args.length ? [] : r.names));
    for (const n of ['mount', 'ptrace', 'unshare', 'setns', 'bpf', 'init_module', 'kexec_load', 'keyctl', 'reboot']) assert.ok(denied.includes(n), n);
    assert.equal(c.Config.User, '1000:1000');
    // no user namespace (Docker's userns-remap is not used): the sandbox user is
    // host uid 1000, unprivileged but not a reserved id as with the native runtime
    const status = fs.readFileSync(`/proc/${c.State.Pid}/status`, 'utf8');
    assert.match(status, /^Uid:\s+1000\s+1000\s+1000\s+1000$/m);
    assert.ok(hc.MaskedPaths.includes('/sys'));
    assert.equal(hc.CgroupnsMode, 'private');
  });

  test('limits mapped: Memory (no swap), NanoCPUs, PidsLimit', () => {
    assert.equal(c.HostConfig.Memory, 256 * 1024 * 1024);
    assert.equal(c.HostConfig.MemorySwap, 256 * 1024 * 1024);
    assert.equal(c.HostConfig.NanoCpus, 500000000);
    assert.equal(c.HostConfig.PidsLimit, 64);
  });

  test('execd is the entrypoint and process 1; /workspace is its own volume; execd bound read-only; the socket folder is bound from the state folder', async () => {
    assert.equal(c.Config.Entrypoint[0], '/bin/sh');
    assert.match(c.Config.Entrypoint[2], /exec \/opt\/tusko\/bin\/tusko-execd$/m);
    const byTarget = Object.fromEntries(c.Mounts.map((m) => [m.Destination, m]));
    assert.equal(byTarget['/workspace'].Type, 'volume');
    assert.equal(byTarget['/workspace'].Name, `tusko-ws-${id}`);
    assert.equal(byTarget['/opt/tusko/bin/tusko-execd'].RW, false);
    assert.equal(byTarget['/run/tusko'].Source, path.join(s.stateDir, 'sandboxes', id, 'run'));
    const v = JSON.parse(docker('volume', 'inspect', `tusko-ws-${id}`))[0];
    assert.equal(v.Options.type, 'tmpfs');
    const r = await s.api.exec(id, 'cat /proc/1/comm; echo $GREETING; (touch /run/tusko/x) 2>/dev/null; echo rc=$?; ls /run/tusko 2>/dev/null; echo rc=$?');
    assert.equal(r.stdout, 'tusko-execd\nhi\nrc=1\nrc=2', 'the socket folder is closed to the sandbox once execd listens');
    const run = fs.statSync(path.join(s.stateDir, 'sandboxes', id, 'run'));
    assert.equal(run.uid, 0);
    assert.equal(run.mode & 0o777, 0o700);
    assert.deepEqual(fs.readdirSync(path.join(s.stateDir, 'sandboxes', id, 'run')), ['execd.sock']);
    // the socket cannot be swapped for a link to another host socket (the proxy
    // would follow it): its folder is closed to the sandbox user
    const swap = await s.api.exec(id, 'rm -f /run/tusko/execd.sock 2>/dev/null; echo rm=$?; ln -sf /var/run/docker.sock /run/tusko/execd.sock 2>/dev/null; echo ln=$?; mv /run/tusko /tmp/x 2>/dev/null; echo mv=$?');
    assert.equal(swap.stdout, 'rm=1\nln=1\nmv=1');
    assert.ok(fs.lstatSync(path.join(s.stateDir, 'sandboxes', id, 'run', 'execd.sock')).isSocket());
    assert.equal((await s.api.exec(id, 'echo still')).stdout, 'still');
  });

  test('labels: the sandbox id, the service, the owner metadata and the expiry; the execd token is nowhere in the container', async () => {
    const l = c.Config.Labels;
    assert.equal(l['io.tusko.sandbox.id'], id);
    assert.match(l['io.tusko.sandboxd'], /^[0-9a-f]{8}$/);
    assert.equal(l['io.tusko.sandbox.role'], 'sandbox');
    assert.equal(l['io.tusko.meta.owner'], 'u1');
    assert.equal(l['io.tusko.meta.tusko.io/session'], 's-1');
    const g = await s.api.get(id);
    assert.equal(Date.parse(l['io.tusko.sandbox.expires']), Date.parse(g.json.expiresAt));
    assert.ok(Date.parse(l['io.tusko.sandbox.created']) > 0);
    assert.match(token, /^[0-9a-f]{64}$/);
    assert.ok(!JSON.stringify(c).includes(token), 'the token is not in the container configuration');
    assert.equal(fs.existsSync(path.join(s.stateDir, 'sandboxes', id, 'run', 'env')), false, 'the env file (token) is gone');
  });

  test('pause and resume are the engine\'s', async () => {
    assert.equal((await s.api.call('POST', `/v1/sandboxes/${id}/pause`)).status, 202);
    assert.equal(inspect(c.Id).State.Status, 'paused');
    assert.equal((await s.api.call('POST', `/v1/sandboxes/${id}/resume`)).status, 202);
    assert.equal(inspect(c.Id).State.Status, 'running');
    assert.equal((await s.api.exec(id, 'echo back')).stdout, 'back');
  });
});

describe('docker runtime: restart', () => {
  test('kill -9 while three containers run: after a restart they are found by label, listed and usable; deleting them leaves no container or volume', async () => {
    const stateDir = tmpdir('sbxd-');
    const s1 = await start({ stateDir });
    const ids = [];
    for (let i = 0; i < 3; i++) {
      const c = await s1.api.create({ metadata: { n: String(i) } });
      assert.equal(c.status, 202, c.text);
      ids.push(c.json.id);
      assert.equal((await s1.api.exec(c.json.id, `echo kept-${i} > /workspace/f`)).exitCode, 0);
    }
    const tag = inspect(containersOf(ids[0])[0]).Config.Labels['io.tusko.sandboxd'];
    await s1.kill9();
    // the engine's view: three running containers of this service
    assert.equal(lines(docker('ps', '-q', '--filter', `label=io.tusko.sandboxd=${tag}`)).length, 3);
    // a record that lost its container id still finds its container by label
    const recPath = path.join(stateDir, 'sandboxes', ids[1], 'sandbox.json');
    const rec = record(stateDir, ids[1]);
    delete rec.runtime.container;
    fs.writeFileSync(recPath, JSON.stringify(rec));
    const s2 = await start({ stateDir });
    const list = await s2.api.list();
    assert.deepEqual(list.json.items.map((x) => x.id).sort(), [...ids].sort());
    for (const x of list.json.items) assert.equal(x.metadata.n, String(ids.indexOf(x.id)));
    for (let i = 0; i < 3; i++) assert.equal((await s2.api.exec(ids[i], 'cat /workspace/f')).stdout, `kept-${i}`);
    for (const id of ids) assert.equal((await s2.api.del(id)).status, 204);
    // `docker ps -a` and `docker volume ls`: nothing of this service is left
    assert.deepEqual(lines(docker('ps', '-aq', '--filter', `label=io.tusko.sandboxd=${tag}`)), []);
    assert.deepEqual(lines(docker('volume', 'ls', '-q', '--filter', `label=io.tusko.sandboxd=${tag}`)), []);
    for (const id of ids) {
      assert.deepEqual(containersOf(id), []);
      assert.deepEqual(volumesOf(id), []);
      assert.equal(fs.existsSync(path.join(stateDir, 'sandboxes', id)), false);
    }
    await s2.stop();
    removeStateDir(stateDir);
  });
});

describe('docker runtime: a restart while the engine does not answer', () => {
  test('the records stay; the sandboxes are back at the next start with the engine', async () => {
    const stateDir = tmpdir('sbxd-');
    const s1 = await start({ stateDir });
    const id = (await s1.api.create({ metadata: { k: 'v' } })).json.id;
    assert.equal((await s1.api.exec(id, 'echo kept > /workspace/f')).exitCode, 0);
    await s1.kill9();
    const s2 = await start({ stateDir, env: { DOCKER_HOST: 'unix:///tmp/tusko-no-docker-here.sock' } });
    assert.match(s2.log(), /keeping a sandbox's record: the runtime cannot tell/);
    assert.equal((await s2.api.create()).status, 503);
    await s2.kill9();
    assert.ok(record(stateDir, id), 'the record is still there');
    assert.equal(containersOf(id).length, 1, 'and so is the container');
    const s3 = await start({ stateDir });
    const g = await s3.api.get(id);
    assert.equal(g.json.status.state, 'Running');
    assert.deepEqual(g.json.metadata, { k: 'v' });
    assert.equal((await s3.api.exec(id, 'cat /workspace/f')).stdout, 'kept');
    assert.equal((await s3.api.del(id)).status, 204);
    assert.deepEqual(containersOf(id), []);
    await s3.stop();
    removeStateDir(stateDir);
  });
});

describe('docker runtime: the image and the engine', () => {
  test('an image missing from the engine is imported from the root filesystem, tagged by its recipe hash', async () => {
    // a tiny root filesystem with the folders the runtime checks for, under a fresh hash
    const dir = tmpdir('sbx-img-');
    const hash = crypto.randomBytes(6).toString('hex');
    for (const d of ['workspace', 'opt/tusko/bin', 'proc', 'dev', 'tmp', 'run', 'bin']) fs.mkdirSync(path.join(dir, 'rootfs', d), { recursive: true });
    fs.copyFileSync('/bin/sh', path.join(dir, 'rootfs/bin/sh'));
    fs.writeFileSync(path.join(dir, 'image.json'), JSON.stringify({ name: 'tusko-sandbox', hash }));
    const s = await start({ env: { SANDBOX_IMAGE_DIR: dir } });
    try {
      assert.match(s.log(), new RegExp(`msg="sandbox image imported" image=tusko-sandbox:${hash}`));
      const img = JSON.parse(docker('image', 'inspect', `tusko-sandbox:${hash}`))[0];
      assert.equal(img.Config.WorkingDir, '/workspace');
    } finally {
      await s.stop();
      docker('image', 'rm', `tusko-sandbox:${hash}`);
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test('no engine at DOCKER_HOST: the service runs and a create answers 503 saying so', async () => {
    const s = await start({ env: { DOCKER_HOST: 'unix:///tmp/tusko-no-docker-here.sock' } });
    const r = await s.api.create();
    assert.equal(r.status, 503);
    assert.match(r.json.message, /no Docker engine answers at DOCKER_HOST=unix:\/\/\/tmp\/tusko-no-docker-here.sock/);
    assert.match(r.json.message, /start dockerd/);
    await s.stop();
  });

  test('no image to import: 503 telling how to build it; an unknown SANDBOX_DOCKER_IMAGE is named', async () => {
    const s = await start({ env: { SANDBOX_IMAGE_DIR: '/nonexistent/tusko-sandbox' } });
    const r = await s.api.create();
    assert.equal(r.status, 503);
    assert.match(r.json.message, /imports the sandbox image, but: no sandbox image at \/nonexistent\/tusko-sandbox .*images\/sandbox\/build.sh/);
    await s.stop();
    const s2 = await start({ env: { SANDBOX_DOCKER_IMAGE: 'tusko-sandbox:no-such-tag' } });
    const r2 = await s2.api.create();
    assert.equal(r2.status, 503);
    assert.match(r2.json.message, /SANDBOX_DOCKER_IMAGE=tusko-sandbox:no-such-tag: the engine has no such image/);
    await s2.stop();
  });
});

function lines(s) {
  return s ? s.split('\n').filter(Boolean) : [];
}
