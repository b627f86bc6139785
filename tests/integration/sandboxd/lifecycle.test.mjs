// tusko-sandboxd through its API: auth, create (warm and cold), the server proxy
// (streamed), list with filters and pages, metadata, renew, pause/resume, expiry,
// idle reaping, delete leaving nothing behind, limits in the cgroups, and restart
// safety after kill -9.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { runProgram, sleep, stopAll, tmpdir } from '../../lib/harness.mjs';
import {
  GONE,
  HOST_MOUNTS,
  KEY,
  NATIVE_ONLY,
  alive,
  cgroupFile,
  client,
  footprint,
  hostMounts,
  imageDir,
  initPid,
  leftovers,
  pidns,
  plantLeftover,
  poolReady,
  record,
  removeStateDir,
  startSandboxd,
  until,
} from './sbx.mjs';

after(stopAll);

describe('sandboxd service', () => {
  let sbx, api;
  before(async () => {
    sbx = await startSandboxd({ env: { SANDBOX_WARM_POOL_SIZE: '1', SANDBOX_MIN_TIMEOUT: '1' } });
    api = sbx.api;
  });

  test('refuses to start without an API key; --insecure-no-auth starts and says so loudly', async () => {
    const d1 = tmpdir('sbxd-'), d2 = tmpdir('sbxd-');
    const r = runProgram('tusko-sandboxd', [], {
      env: { SANDBOXD_LISTEN: '127.0.0.1:0', SANDBOXD_STATE_DIR: d1, SANDBOX_IMAGE_DIR: imageDir() },
    });
    assert.equal(r.code, 2);
    assert.match(r.stderr, /SANDBOXD_API_KEY/);
    const d0 = tmpdir('sbxd-');
    const p = await startSandboxd({ stateDir: d0, env: { SANDBOXD_API_KEY: '' } }).catch((e) => e);
    removeStateDir(d0);
    assert.ok(p instanceof Error, 'an empty key must not start the service');
    const { startProgram } = await import('../../lib/harness.mjs');
    const ins = await startProgram('tusko-sandboxd', {
      args: ['--insecure-no-auth'],
      env: { SANDBOXD_LISTEN: '127.0.0.1:0', SANDBOXD_STATE_DIR: d2, SANDBOX_IMAGE_DIR: imageDir(), SANDBOX_WARM_POOL_SIZE: '0' },
    });
    assert.match(ins.log(), /INSECURE: serving WITHOUT authentication/);
    const lr = await client(ins.url, null).list();
    assert.equal(lr.status, 200);
    await ins.stop();
    removeStateDir(d1);
    removeStateDir(d2);
  });

  test('every route but /healthz needs the key, the proxy included', async () => {
    const none = client(api.base, null);
    const wrong = client(api.base, KEY.slice(0, -1) + 'x');
    for (const c of [none, wrong]) {
      for (const [m, p] of [
        ['GET', '/v1/sandboxes'],
        ['GET', '/sandboxes'],
        ['POST', '/v1/sandboxes'],
        ['GET', '/v1/sandboxes/x'],
        ['DELETE', '/v1/sandboxes/x'],
        ['POST', '/v1/sandboxes/x/pause'],
        ['GET', '/v1/sandboxes/x/endpoints/44772'],
        ['POST', '/v1/sandboxes/x/proxy/44772/command'],
        ['GET', '/sandboxes/x/proxy/44772/ping'],
      ]) {
        const r = await c.call(m, p, m === 'POST' ? {} : undefined);
        assert.equal(r.status, 401, `${m} ${p}`);
        assert.equal(r.json.code, 'UNAUTHORIZED');
        assert.ok(r.headers.get('x-request-id'));
      }
    }
    const h = await none.call('GET', '/healthz');
    assert.equal(h.status, 200);
  });

  test('create validates the request: image, entrypoint, limits, timeout, env, metadata, network, pool', async () => {
    const cases = [
      [{ image: { uri: 'python:3.11' } }, /unknown image "python:3.11"/],
      [{ image: undefined }, /image is required/],
      [{ entrypoint: undefined }, /entrypoint is required/],
      [{ entrypoint: [] }, /entrypoint must be/],
      [{ resourceLimits: { memory: 'lots' } }, /memory/],
      [{ resourceLimits: { cpu: '-1' } }, /cpu/],
      [{ resourceLimits: { pids: '3' } }, /pids/],
      [{ resourceLimits: { gpu: '1' } }, /GPU/],
      [{ resourceLimits: { disk: '1Gi' } }, /not a known limit/],
      [{ timeout: 'soon' }, /timeout/],
      [{ timeout: 999999999 }, /timeout must be between/],
      [{ env: { 'BAD-NAME': 'x' } }, /not a valid variable name/],
      [{ env: { A: 1 } }, /env.A must be a string/],
      [{ metadata: { 'opensandbox.io/x': 'y' } }, /reserved/],
      [{ metadata: { k: 'has spaces' } }, /metadata value/],
      [{ networkPolicy: { defaultAction: 'maybe' } }, /defaultAction must be allow or deny/],
      [{ networkPolicy: { egress: [{ action: 'allow', target: 'not a host' }] } }, /is not a host name/],
      [{ extensions: { poolRef: 'nope' } }, /names no pool/],
      [{ snapshotId: 'snap_1' }, /snapshots are not supported/],
      [{ extensions: { 'access.renew.extend.seconds': '5' } }, /300 to 86400/],
    ];
    for (const [body, re] of cases) {
      const r = await api.create(body);
      assert.equal(r.status, 400, JSON.stringify(body) + ' → ' + r.text);
      assert.equal(r.json.code, 'INVALID_REQUEST');
      assert.match(r.json.message, re, JSON.stringify(body));
    }
    const bad = await api.call('POST', '/v1/sandboxes', undefined, { 'content-type': 'application/json' });
    assert.equal(bad.status, 400);
  });

  test('create → run a command through the proxy → delete; warm then cold; the answer follows the spec', async () => {
    await until(() => poolReady(sbx.stateDir) >= 1, { what: 'the pool' });
    const r1 = await api.create({ metadata: { owner: 'u1', session: 's1' }, env: { GREETING: 'hello' }, timeout: 600 });
    assert.equal(r1.status, 202, r1.text);
    assert.equal(r1.headers.get('x-sandbox-pool'), 'warm');
    assert.match(r1.headers.get('location'), new RegExp(`/v1/sandboxes/${r1.json.id}$`));
    assert.equal(r1.json.status.state, 'Running');
    assert.deepEqual(r1.json.metadata, { owner: 'u1', session: 's1' });
    assert.deepEqual(r1.json.entrypoint, ['tail', '-f', '/dev/null']);
    assert.ok(Date.parse(r1.json.expiresAt) > Date.now() + 590000);
    assert.ok(r1.json.createdAt);
    assert.equal(r1.json.image, undefined, 'the create answer has no startup source');
    const r2 = await api.create();
    assert.equal(r2.status, 202);
    for (const id of [r1.json.id, r2.json.id]) {
      const g = await api.get(id);
      assert.equal(g.status, 200);
      assert.deepEqual(g.json.image, { uri: 'tusko-sandbox' });
      const ep = await api.call('GET', `/v1/sandboxes/${id}/endpoints/44772?use_server_proxy=true`);
      assert.equal(ep.status, 200);
      assert.ok(ep.json.endpoint.endsWith(`/v1/sandboxes/${id}/proxy/44772`), ep.json.endpoint);
      assert.match(ep.json.headers['X-EXECD-ACCESS-TOKEN'], /^[0-9a-f]{64}$/);
      // without the execd token, execd itself refuses
      const nt = await api.call('GET', `/v1/sandboxes/${id}/proxy/44772/ping`);
      assert.equal(nt.status, 401);
    }
    const out = await api.exec(r1.json.id, 'echo $GREETING; id -un; pwd; hostname');
    assert.equal(out.status, 200);
    assert.equal(out.stdout, 'hello\nsandbox\n/workspace\nsandbox');
    assert.equal(out.exitCode, 0);
    const fail = await api.exec(r2.json.id, 'exit 3');
    assert.equal(fail.exitCode, 3);
    // the entrypoint runs
    const ps = await api.exec(r2.json.id, 'ps -eo args');
    assert.match(ps.stdout, /tail -f \/dev\/null/);
    // other ports are not served, unknown sandboxes are 404
    const op = await api.call('GET', `/v1/sandboxes/${r1.json.id}/proxy/8080/`);
    assert.equal(op.status, 404);
    assert.equal((await api.get('00000000-0000-4000-8000-000000000000')).status, 404);
    for (const id of [r1.json.id, r2.json.id]) {
      const d = await api.del(id);
      assert.equal(d.status, 204);
      const g = await api.get(id);
      assert.equal(g.json.status.state, 'Terminated');
      assert.equal(g.json.status.reason, 'user_delete');
      assert.equal((await api.del(id)).status, 404);
      assert.equal((await api.call('GET', `/v1/sandboxes/${id}/proxy/44772/ping`)).status, 404);
    }
  });

  test('the proxy streams: output arrives while the command still runs', async () => {
    const c = await api.create();
    const id = c.json.id;
    const it = await api.stream(id, 'echo first; while [ ! -e /tmp/go ]; do sleep 0.02; done; echo second');
    let seen = [];
    for await (const ev of it) {
      if (ev.type === 'stdout') {
        seen.push(ev.text);
        // only an unbuffered proxy delivers "first" before the command can end
        if (ev.text === 'first') assert.equal((await api.exec(id, 'touch /tmp/go')).exitCode, 0);
      }
      if (ev.type === 'execution_complete') break;
    }
    assert.deepEqual(seen, ['first', 'second']);
    await api.del(id);
  });

  test('list: state and metadata filters, pagination', async (t) => {
    const ids = [];
    for (const [team, n] of [
      ['red', 0],
      ['red', 1],
      ['blue', 2],
    ]) {
      const r = await api.create({ metadata: { team, n: String(n), note: 'Demo-Test' } });
      assert.equal(r.status, 202);
      ids.push(r.json.id);
    }
    // a failure below must not leave these for the next test (which counts what is listed)
    t.after(async () => {
      for (const id of ids) await api.del(id);
    });
    const pause = await api.call('POST', `/v1/sandboxes/${ids[2]}/pause`);
    assert.equal(pause.status, 202, pause.text);
    const all = await api.list();
    assert.equal(all.json.pagination.totalItems, 3);
    const red = await api.list(`?metadata=${encodeURIComponent('team=red')}`);
    assert.deepEqual(red.json.items.map((x) => x.id).sort(), [ids[0], ids[1]].sort());
    const both = await api.list(`?metadata=${encodeURIComponent('team=red&n=1')}`);
    assert.deepEqual(both.json.items.map((x) => x.id), [ids[1]]);
    const none = await api.list(`?metadata=${encodeURIComponent('team=green')}`);
    assert.equal(none.json.items.length, 0);
    const paused = await api.list('?state=Paused');
    assert.deepEqual(paused.json.items.map((x) => x.id), [ids[2]]);
    const either = await api.list('?state=Running&state=Paused');
    assert.equal(either.json.items.length, 3);
    const p1 = await api.list('?pageSize=2&page=1');
    assert.deepEqual(p1.json.pagination, { page: 1, pageSize: 2, totalItems: 3, totalPages: 2, hasNextPage: true });
    assert.deepEqual(p1.json.items.map((x) => x.id), [ids[0], ids[1]], 'oldest first');
    const p2 = await api.list('?pageSize=2&page=2');
    assert.deepEqual(p2.json.items.map((x) => x.id), [ids[2]]);
    assert.equal(p2.json.pagination.hasNextPage, false);
    assert.equal((await api.list('?state=Sleeping')).status, 400);
    assert.equal((await api.list('?pageSize=0')).status, 400);
    // metadata patch (merge patch), then the filter sees it
    const pm = await api.call('PATCH', `/v1/sandboxes/${ids[0]}/metadata`, { team: 'blue', n: null, extra: 'x' });
    assert.equal(pm.status, 200, pm.text);
    assert.deepEqual(pm.json.metadata, { team: 'blue', note: 'Demo-Test', extra: 'x' });
    assert.equal((await api.call('PATCH', `/v1/sandboxes/${ids[0]}/metadata`, { 'opensandbox.io/a': 'b' })).status, 400);
    const blue = await api.list(`?metadata=${encodeURIComponent('team=blue')}`);
    assert.equal(blue.json.items.length, 2);
    for (const id of ids) assert.equal((await api.del(id)).status, 204);
    assert.equal((await api.list()).json.items.length, 0);
    assert.equal((await api.list('?state=Terminated')).json.items.length >= 3, true);
  });

  test('renew-expiration moves expiresAt; earlier or past times are refused', async () => {
    const c = await api.create({ timeout: 120 });
    const id = c.json.id;
    const later = new Date(Date.now() + 3600 * 1000).toISOString();
    const r = await api.call('POST', `/v1/sandboxes/${id}/renew-expiration`, { expiresAt: later });
    assert.equal(r.status, 200, r.text);
    assert.equal(Date.parse(r.json.expiresAt), Date.parse(later));
    assert.equal(Date.parse((await api.get(id)).json.expiresAt), Date.parse(later));
    const earlier = await api.call('POST', `/v1/sandboxes/${id}/renew-expiration`, { expiresAt: new Date(Date.now() + 60000).toISOString() });
    assert.equal(earlier.status, 400);
    const past = await api.call('POST', `/v1/sandboxes/${id}/renew-expiration`, { expiresAt: '2001-01-01T00:00:00Z' });
    assert.equal(past.status, 400);
    const junk = await api.call('POST', `/v1/sandboxes/${id}/renew-expiration`, { expiresAt: 'tomorrow' });
    assert.equal(junk.status, 400);
    assert.equal(record(sbx.stateDir, id).expiresMs, Date.parse(later), 'kept on disk');
    await api.del(id);
  });

  test('pause freezes every process (no progress), resume thaws it', async () => {
    const c = await api.create();
    const id = c.json.id;
    const bg = await api.exec(id, 'i=0; while :; do i=$((i+1)); echo $i > /workspace/count; sleep 0.01; done', { background: true });
    assert.equal(bg.status, 200);
    const pid = initPid(sbx.stateDir, id);
    const count = () => {
      try {
        return Number(fs.readFileSync(`/proc/${pid}/root/workspace/count`, 'utf8') || 0);
      } catch {
        return 0; /* not written yet */
      }
    };
    await until(() => count() > 3, { what: 'the counter' });
    assert.equal((await api.call('POST', `/v1/sandboxes/${id}/pause`)).status, 202);
    assert.equal((await api.get(id)).json.status.state, 'Paused');
    assert.equal(cgroupFile(id, 'freezer', 'freezer.state'), 'FROZEN');
    assert.equal((await api.call('POST', `/v1/sandboxes/${id}/pause`)).status, 409);
    const proxied = await api.call('GET', `/v1/sandboxes/${id}/proxy/44772/ping`);
    assert.equal(proxied.status, 409, 'a paused sandbox is not proxied to');
    const a = count();
    await sleep(400);
    assert.equal(count(), a, 'a frozen process made progress');
    assert.equal((await api.call('POST', `/v1/sandboxes/${id}/resume`)).status, 202);
    assert.equal((await api.get(id)).json.status.state, 'Running');
    await until(() => count() > a + 3, { what: 'progress after resume' });
    assert.equal((await api.call('POST', `/v1/sandboxes/${id}/resume`)).status, 409);
    await api.del(id);
  });

  test('resource limits land in the cgroups; a pool sandbox is re-limited when claimed', async () => {
    await until(() => poolReady(sbx.stateDir) >= 1, { what: 'the pool' });
    const c = await api.create({ resourceLimits: { cpu: '500m', memory: '256Mi', pids: '64' } });
    assert.equal(c.status, 202);
    const id = c.json.id;
    assert.equal(cgroupFile(id, 'memory', 'memory.limit_in_bytes'), String(256 * 1024 * 1024));
    assert.equal(cgroupFile(id, 'pids', 'pids.max'), '64');
    assert.equal(cgroupFile(id, 'cpu', 'cpu.cfs_quota_us'), '50000');
    assert.deepEqual((await api.get(id)).json.resourceLimits, { cpu: '500m', memory: String(256 * 1024 * 1024), pids: '64' });
    await api.del(id);
  });

  test('delete leaves no process, mount, cgroup or folder behind', async () => {
    const mountsBefore = hostMounts().length;
    const c = await api.create();
    const id = c.json.id;
    await api.exec(id, 'sleep 1000 & sleep 1000 & echo x > /workspace/f');
    const pid = initPid(sbx.stateDir, id);
    const ns = pidns(pid);
    assert.ok(ns);
    const during = footprint(sbx.stateDir, id, ns);
    assert.equal(during.dir, true);
    assert.ok(during.cgroups >= 1);
    assert.ok(during.processes >= 4, JSON.stringify(during));
    assert.equal(during.mounts, HOST_MOUNTS, 'the sandbox mounts nothing in the host namespace (docker: its volume)');
    assert.equal((await api.del(id)).status, 204);
    assert.equal(alive(pid), false);
    assert.deepEqual(footprint(sbx.stateDir, id, ns), GONE);
    assert.equal(hostMounts().length, mountsBefore);
  });

  after(async () => {
    for (const x of (await api.list()).json.items) await api.del(x.id);
    await sbx.stop();
  });

  test('the pool is refilled and its members are never listed', async () => {
    await until(() => poolReady(sbx.stateDir) >= 1, { what: 'the pool' });
    assert.equal((await api.list()).json.items.length, 0);
    const c = await api.create({ extensions: { poolRef: 'default' }, image: undefined, entrypoint: undefined });
    assert.equal(c.status, 202, c.text);
    assert.equal(c.headers.get('x-sandbox-pool'), 'warm');
    await until(() => poolReady(sbx.stateDir) >= 1, { what: 'a refill' });
    assert.equal((await api.list()).json.items.length, 1);
    await api.del(c.json.id);
  });
});

describe('sandboxd cold start, expiry and idle reaping', () => {
  test('a cold sandbox past its timeout is reaped (ttl_expiry) and frees everything', async () => {
    const s = await startSandboxd({ env: { SANDBOX_MIN_TIMEOUT: '1' } });
    const c = await s.api.create({ timeout: 1 });
    assert.equal(c.status, 202);
    assert.equal(c.headers.get('x-sandbox-pool'), 'cold', 'no pool here: a cold start');
    const id = c.json.id;
    const pid = initPid(s.stateDir, id);
    const ns = pidns(pid);
    const g = await until(async () => {
      const r = await s.api.get(id);
      return r.json.status.state === 'Terminated' ? r : null;
    }, { what: 'expiry' });
    assert.equal(g.json.status.reason, 'ttl_expiry');
    assert.equal(alive(pid), false);
    assert.deepEqual(footprint(s.stateDir, id, ns), GONE);
    await s.stop();
  });

  test('a sandbox with no proxied activity for SANDBOX_IDLE_TTL is reaped; activity keeps it', async () => {
    const s = await startSandboxd({ env: { SANDBOX_IDLE_TTL: '1500ms' } });
    const busy = (await s.api.create()).json.id;
    const idle = (await s.api.create()).json.id;
    // a long request in flight counts as activity for its whole length
    const long = s.api.exec(busy, 'sleep 2.5; echo done');
    const g = await until(async () => {
      const r = await s.api.get(idle);
      return r.json.status.state === 'Terminated' ? r : null;
    }, { what: 'idle reaping' });
    assert.equal(g.json.status.reason, 'idle_timeout');
    assert.equal((await long).stdout, 'done');
    assert.equal((await s.api.get(busy)).json.status.state, 'Running');
    await s.api.del(busy);
    await s.stop();
  });
});

describe('sandboxd variants', () => {
  test('without a user namespace (SANDBOX_USERNS=off) the sandbox runs as an unprivileged host uid', NATIVE_ONLY, async () => {
    const s = await startSandboxd({ env: { SANDBOX_USERNS: 'off' } });
    assert.doesNotMatch(s.log(), /namespaces=[a-z,]*user/);
    const c = await s.api.create();
    assert.equal(c.status, 202, c.text);
    const r = await s.api.exec(c.json.id, "id -u; grep -E '^CapEff' /proc/self/status; mount -t tmpfs x /mnt 2>/dev/null; echo mount=$?; touch /etc/x 2>/dev/null; echo write=$?");
    const [uid, cap, mount, write] = r.stdout.split('\n');
    assert.equal(uid, '200001000');
    assert.equal(cap, 'CapEff:\t0000000000000000');
    assert.notEqual(mount, 'mount=0');
    assert.equal(write, 'write=1');
    assert.equal((await s.api.del(c.json.id)).status, 204);
    await s.stop();
  });

  test('with a user namespace the sandbox user is uid 1000 inside and 200001000 outside', NATIVE_ONLY, async () => {
    const s = await startSandboxd();
    assert.match(s.log(), /namespaces=[a-z,]*user/);
    const c = await s.api.create();
    const r = await s.api.exec(c.json.id, 'id -u; cat /proc/self/uid_map');
    assert.match(r.stdout, /^1000\n\s*0\s+200000000\s+65536$/);
    assert.equal((await s.api.del(c.json.id)).status, 204);
    await s.stop();
  });

  test('execd sockets move to /run when their path would not fit a unix socket', async () => {
    const base = tmpdir('sbxd-');
    const stateDir = path.join(base, 'a-state-directory-whose-path-is-long');
    assert.ok(stateDir.length > 49);
    const s = await startSandboxd({ stateDir });
    const c = await s.api.create();
    assert.equal(c.status, 202, c.text);
    const sock = record(stateDir, c.json.id).runtime.socket;
    assert.match(sock, /^\/run\/tusko-sandboxd\.[0-9a-f]{8}\/.*\.sock$/);
    assert.equal(fs.statSync(path.dirname(sock)).mode & 0o777, 0o700);
    assert.equal((await s.api.exec(c.json.id, 'echo ok')).stdout, 'ok');
    assert.equal((await s.api.del(c.json.id)).status, 204);
    assert.equal(fs.existsSync(sock), false);
    await s.stop();
    assert.equal(fs.existsSync(path.dirname(sock)), false);
    fs.rmSync(base, { recursive: true, force: true });
  });
});

describe('sandboxd restart safety', () => {
  test('after kill -9 the running sandboxes are found and usable; half-made ones are cleaned', async () => {
    const stateDir = tmpdir('sbxd-');
    const s1 = await startSandboxd({ stateDir, env: { SANDBOX_WARM_POOL_SIZE: '1' } });
    const ids = [];
    for (let i = 0; i < 3; i++) {
      const c = await s1.api.create({ metadata: { i: String(i) } });
      assert.equal(c.status, 202);
      ids.push(c.json.id);
      assert.equal((await s1.api.exec(c.json.id, `echo keep-${i} > /workspace/note`)).exitCode, 0);
    }
    assert.equal((await s1.api.call('POST', `/v1/sandboxes/${ids[2]}/pause`)).status, 202);
    await until(() => poolReady(stateDir) >= 1, { what: 'the pool member' });
    const poolId = fs.readdirSync(path.join(stateDir, 'sandboxes')).find((d) => !ids.includes(d));
    const poolPid = initPid(stateDir, poolId);
    await s1.kill9();
    // a half-made sandbox: a folder with a broken record, and a leftover in the
    // runtime (native: a stray cgroup; docker: a labelled container and volume)
    const half = '11111111-2222-4333-8444-555555555555';
    fs.mkdirSync(path.join(stateDir, 'sandboxes', half));
    fs.writeFileSync(path.join(stateDir, 'sandboxes', half, 'sandbox.json'), '{"id": "trunc');
    plantLeftover(ids[0], half);
    const s2 = await startSandboxd({ stateDir, env: { SANDBOX_WARM_POOL_SIZE: '1' } });
    const list = await s2.api.list();
    assert.deepEqual(list.json.items.map((x) => x.id).sort(), [...ids].sort());
    for (let i = 0; i < 2; i++) {
      const out = await s2.api.exec(ids[i], 'cat /workspace/note');
      assert.equal(out.stdout, `keep-${i}`);
    }
    assert.equal((await s2.api.get(ids[2])).json.status.state, 'Paused');
    assert.equal((await s2.api.call('POST', `/v1/sandboxes/${ids[2]}/resume`)).status, 202);
    assert.equal((await s2.api.exec(ids[2], 'cat /workspace/note')).stdout, 'keep-2');
    assert.equal(fs.existsSync(path.join(stateDir, 'sandboxes', half)), false);
    assert.equal(leftovers(half), 0);
    assert.equal(alive(poolPid), false, 'the old pool member is destroyed');
    assert.equal(leftovers(poolId), 0);
    for (const id of ids) {
      const pid = initPid(stateDir, id);
      const ns = pidns(pid);
      assert.equal((await s2.api.del(id)).status, 204);
      assert.deepEqual(footprint(stateDir, id, ns), GONE);
    }
    await s2.stop();
    // a clean stop destroys the pool member too
    assert.deepEqual(fs.readdirSync(path.join(stateDir, 'sandboxes')), []);
    removeStateDir(stateDir);
  });
});
