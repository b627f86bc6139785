// tusko-sandboxd with SANDBOX_RUNTIME=kubernetes against the stand-in API
// server and its process kubelet (tests/lib/k8s-cluster.mjs): every sandbox is
// a Pod, its execd a real tusko-execd reached at the pod's IP through
// sandboxd's proxy. Shown here: the warm pool (pool=warm pods, refilled from
// the watch), a warm claim against a cold create, commands through the
// OpenSandbox API, the pod sandboxd makes (Pod Security "restricted", enforced
// by the stand-in, plus Kubernetes' own schema and our lock-down rules), two
// sandboxd racing for one warm pod, a pod deleted under a sandbox, a restart
// that takes its pods back and deletes an orphan, the cluster's quota as 503,
// and kubectl reading the pods as sandboxd labelled them. Not shown: anything
// a real cluster adds (scheduling, CNI, NetworkPolicy, image pulls).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { sleep, tmpdir } from '../../lib/harness.mjs';
import { startCluster, L, NS } from '../../lib/k8s-cluster.mjs';
import { schemaProblems, restrictedProblems, lockdownProblems } from '../../lib/k8s-policy.mjs';
import { startProgram } from '../../lib/harness.mjs';
import { client, KEY, until } from '../sandboxd/sbx.mjs';

const labels = (p) => p.metadata.labels || {};

// tusko-sandboxd on the stand-in cluster (no image folder: the pods' image is
// the cluster's business)
async function sandboxd(cluster, extra = {}, { stateDir } = {}) {
  const p = await startProgram('tusko-sandboxd', { env: { SANDBOXD_API_KEY: KEY, SANDBOXD_LISTEN: '127.0.0.1:0',
    SANDBOXD_STATE_DIR: stateDir || tmpdir('sbxd-k8s-'), SANDBOX_IMAGE_DIR: '/nonexistent', ...cluster.env(extra) } });
  p.api = client(p.url);
  return p;
}

function runAsync(cmd, args) {
  return new Promise((resolve) => {
    const c = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '', stderr = '';
    c.stdout.on('data', (d) => { stdout += d; });
    c.stderr.on('data', (d) => { stderr += d; });
    const t = setTimeout(() => c.kill('SIGKILL'), 30000);
    c.on('close', (status) => { clearTimeout(t); resolve({ status, stdout, stderr }); });
  });
}

test('warm claim, cold create, commands, the pod as made, delete', async () => {
  const k = await startCluster();
  let s;
  try {
    s = await sandboxd(k, { K8S_SANDBOX_WARM_POOL_SIZE: '2' });
    await until(() => k.warmReady().length === 2, { what: 'two warm pods', timeoutMs: 30000 });
    await sleep(300); // the stand-in has it Ready: so does sandboxd's cache, a moment later
    const warmNames = k.warmReady().map((p) => p.metadata.name);

    // the pod sandboxd makes: restricted (the stand-in would have refused it),
    // Kubernetes' schema, our lock-down rules
    const wp = k.warmReady()[0];
    assert.deepEqual(restrictedProblems(wp.spec), []);
    assert.deepEqual(await schemaProblems(wp), []);
    assert.deepEqual(lockdownProblems(wp.spec), []);
    assert.equal(wp.spec.containers[0].resources.limits.cpu, wp.spec.containers[0].resources.requests.cpu);
    assert.equal(labels(wp)[L.managed], 'tusko-sandboxd');
    const poolDeadline = wp.spec.activeDeadlineSeconds; // (the stand-in's objects are live: copy the number)
    assert.equal(poolDeadline, 31 * 86400);

    // a warm claim: X-Sandbox-Pool warm, one of the warm pods, now claimed
    const a = await s.api.create({ timeout: 600 });
    assert.equal(a.status, 202, a.text);
    assert.equal(a.headers.get('x-sandbox-pool'), 'warm');
    const podA = k.podOf(a.json.id);
    assert.ok(podA, 'a pod labelled with the sandbox id');
    assert.ok(warmNames.includes(podA.metadata.name));
    assert.equal(labels(podA)[L.pool], 'claimed');
    assert.equal(labels(podA)[L.claimer], 'sandboxd');
    // the backstop lowered to its age + the timeout + the grace (24 h)
    assert.ok(podA.spec.activeDeadlineSeconds <= 600 + 86400 + 30, String(podA.spec.activeDeadlineSeconds));
    assert.ok(podA.spec.activeDeadlineSeconds >= 600 + 86400, String(podA.spec.activeDeadlineSeconds));
    assert.ok(podA.spec.activeDeadlineSeconds < poolDeadline);
    const claims = k.api.audit.filter((e) => e.verb === 'PATCH' && e.contentType === 'application/json-patch+json');
    assert.equal(claims.length, 1);
    assert.equal(claims[0].code, 200);
    assert.match(claims[0].body, /"op":"test","path":"\/metadata\/labels\/sandbox.tusko.io~1pool","value":"warm"/);

    // a command through the proxy reaches execd in that pod (its own workspace)
    const r = await s.api.exec(a.json.id, 'echo hello-$((6*7)); pwd');
    assert.equal(r.status, 200, r.text);
    assert.equal(r.stdout.split('\n')[0], 'hello-42');
    const entry = k.kubelet.procs.get(`${NS}/${podA.metadata.name}`);
    assert.ok(r.stdout.split('\n')[1].startsWith(fs.realpathSync(k.dir) + '/pod-' + podA.metadata.name), r.stdout);
    // the entrypoint runs as a background command of that execd (a child of it)
    const ps = await s.api.exec(a.json.id, 'ps -o args= --ppid $PPID');
    assert.match(ps.stdout, /tail -f \/dev\/null|'tail' '-f' '\/dev\/null'/);
    // the pool is topped up to 2 again
    await until(() => k.warmReady().length === 2, { what: 'the pool refilled', timeoutMs: 30000 });
    await sleep(300); // the stand-in has it Ready: so does sandboxd's cache, a moment later

    // with env: a cold pod carries it; so does one with other limits
    const b = await s.api.create({ timeout: 600, env: { GREETING: 'from-env' } });
    assert.equal(b.status, 202, b.text);
    assert.equal(b.headers.get('x-sandbox-pool'), 'cold');
    const podB = k.podOf(b.json.id);
    assert.ok(!warmNames.includes(podB.metadata.name));
    assert.equal((await s.api.exec(b.json.id, 'echo $GREETING')).stdout, 'from-env');
    const c = await s.api.create({ timeout: 600, resourceLimits: { cpu: '500m', memory: '256Mi' } });
    assert.equal(c.status, 202, c.text);
    assert.equal(c.headers.get('x-sandbox-pool'), 'cold');
    const podC = k.podOf(c.json.id);
    assert.equal(podC.spec.containers[0].resources.limits.cpu, '500m');
    assert.equal(podC.spec.containers[0].resources.limits.memory, String(256 << 20));

    // each sandbox's token is its own pod's: A's token does not open B's execd
    const tokA = await s.api.token(a.json.id);
    const ipB = podB.status.podIP;
    assert.equal((await fetch(`http://${ipB}:44772/ping`, { headers: { 'X-EXECD-ACCESS-TOKEN': tokA } })).status, 401);
    assert.equal((await fetch(`http://${ipB}:44772/ping`, { headers: { 'X-EXECD-ACCESS-TOKEN': await s.api.token(b.json.id) } })).status, 200);

    // a real client sees the labels as sandboxd set them
    const cfg = path.join(k.dir, 'kc.json');
    fs.writeFileSync(cfg, JSON.stringify({ apiVersion: 'v1', kind: 'Config',
      clusters: [{ name: 's', cluster: { server: k.api.url, 'certificate-authority': k.ca.ca } }],
      users: [{ name: 'u', user: { token: 'tok-test' } }],
      contexts: [{ name: 'c', context: { cluster: 's', user: 'u', namespace: NS } }], 'current-context': 'c' }));
    const kc = await runAsync('kubectl', ['--kubeconfig', cfg, 'get', 'pods', '-l', `${L.pool}=claimed`, '-o', 'json']);
    assert.equal(kc.status, 0, kc.stderr);
    const listed = JSON.parse(kc.stdout).items.map((p) => p.metadata.labels[L.id]).sort();
    assert.deepEqual(listed, [a.json.id, b.json.id, c.json.id].sort());

    // delete: the pod goes from the API and its execd stops
    assert.equal((await s.api.del(a.json.id)).status, 204);
    await until(() => !k.podOf(a.json.id), { what: 'the pod gone', timeoutMs: 15000 });
    await until(() => entry.exited, { what: 'its execd stopped' });
    for (const id of [b.json.id, c.json.id]) assert.equal((await s.api.del(id)).status, 204);
    // pause is not something a Pod can do
    const d = await s.api.create({ timeout: 600 });
    const pz = await s.api.call('POST', `/v1/sandboxes/${d.json.id}/pause`);
    assert.equal(pz.status, 501, pz.text);
    assert.equal((await s.api.get(d.json.id)).json.status.state, 'Running');
    assert.equal((await s.api.del(d.json.id)).status, 204);
  } finally {
    await s?.stop();
    await k.close();
  }
});

test('a pod deleted under a sandbox, or dead, marks it Failed', async () => {
  const k = await startCluster({ firstHost: 60 });
  let s;
  try {
    // K8S_SANDBOX_ENABLED=true chooses the kubernetes runtime whatever SANDBOX_RUNTIME says
    s = await sandboxd(k, { K8S_SANDBOX_WARM_POOL_SIZE: '0', SANDBOX_RUNTIME: 'native', K8S_SANDBOX_ENABLED: 'true' });
    assert.match(s.log(), /msg="listening" .*runtime=kubernetes pool=0/);
    const a = await s.api.create({ timeout: 600 });
    assert.equal(a.status, 202, a.text);
    assert.equal(a.headers.get('x-sandbox-pool'), 'cold');
    const b = await s.api.create({ timeout: 600 });
    const podA = k.podOf(a.json.id), podB = k.podOf(b.json.id);
    // someone deletes A's pod through the API (kubectl delete, an eviction)
    assert.equal((await k.call('DELETE', `/api/v1/namespaces/${NS}/pods/${podA.metadata.name}`, { gracePeriodSeconds: 0 })).code, 200);
    const ga = await until(async () => {
      const g = await s.api.get(a.json.id);
      return g.json?.status?.state === 'Failed' && g.json;
    }, { what: 'A Failed', timeoutMs: 15000 });
    assert.equal(ga.status.reason, 'runtime_error');
    // B's execd dies (the node OOM-killed it): the pod is Failed, so is the sandbox
    k.kubelet.procs.get(`${NS}/${podB.metadata.name}`).child.kill('SIGKILL');
    await until(async () => (await s.api.get(b.json.id)).json?.status?.state === 'Failed', { what: 'B Failed', timeoutMs: 15000 });
    // and its dead pod is deleted by sandboxd, not left behind
    await until(() => !k.podOf(b.json.id), { what: 'B\'s pod deleted', timeoutMs: 15000 });
    // the proxy no longer reaches it
    assert.equal((await s.api.call('POST', `/v1/sandboxes/${a.json.id}/proxy/44772/command`, { command: 'true' })).status, 404);
  } finally {
    await s?.stop();
    await k.close();
  }
});

test('a restart takes its pods back by label, reuses the warm ones and deletes an orphan', async () => {
  const k = await startCluster({ firstHost: 90 });
  const stateDir = tmpdir('sbxd-k8s-restart-');
  let s;
  try {
    s = await sandboxd(k, { K8S_SANDBOX_WARM_POOL_SIZE: '1' }, { stateDir });
    await until(() => k.warmReady().length === 1, { what: 'a warm pod', timeoutMs: 30000 });
    await sleep(300); // the stand-in has it Ready: so does sandboxd's cache, a moment later
    const a = await s.api.create({ timeout: 600 });
    assert.equal(a.status, 202, a.text);
    assert.equal((await s.api.exec(a.json.id, 'echo kept > f')).status, 200);
    const podA = k.podOf(a.json.id).metadata.name;
    await until(() => k.warmReady().length === 1, { what: 'the pool refilled', timeoutMs: 30000 });
    await sleep(300); // the stand-in has it Ready: so does sandboxd's cache, a moment later
    const warmBefore = k.warmReady().map((p) => p.metadata.name);
    await s.kill9();
    // a pod claimed by this instance for a sandbox it never recorded (a crash
    // between the claim and its record), and one of another instance
    const tmpl = labels(k.pods().find((p) => p.metadata.name === podA))[L.template];
    const orphanLabels = { [L.managed]: 'tusko-sandboxd', [L.service]: 'default', [L.template]: tmpl,
      [L.pool]: 'claimed', [L.claimer]: 'sandboxd', [L.id]: crypto.randomUUID() };
    const pod = (name, lab) => ({ apiVersion: 'v1', kind: 'Pod', metadata: { name, labels: lab },
      spec: { securityContext: { runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } },
        containers: [{ name: 'sandbox', image: 'x', env: [{ name: 'EXECD_ACCESS_TOKEN', value: 'a'.repeat(32) }],
          securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } } }] } });
    assert.equal((await k.call('POST', `/api/v1/namespaces/${NS}/pods`, pod('orphan-1', orphanLabels))).code, 201);
    assert.equal((await k.call('POST', `/api/v1/namespaces/${NS}/pods`, pod('other-1', { ...orphanLabels, [L.claimer]: 'sandboxd-b' }))).code, 201);

    s = await sandboxd(k, { K8S_SANDBOX_WARM_POOL_SIZE: '1' }, { stateDir });
    const g = await s.api.get(a.json.id);
    assert.equal(g.status, 200, g.text);
    assert.equal(g.json.status.state, 'Running');
    const r = await s.api.exec(a.json.id, 'cat f');
    assert.equal(r.stdout, 'kept');
    assert.equal(k.podOf(a.json.id).metadata.name, podA);
    await until(() => !k.pods().some((p) => p.metadata.name === 'orphan-1'), { what: 'the orphan deleted', timeoutMs: 15000 });
    assert.ok(k.pods().some((p) => p.metadata.name === 'other-1'), 'another instance\'s pod is left alone');
    // the warm pod is reused, not replaced
    await sleep(1500);
    assert.deepEqual(k.warmReady().map((p) => p.metadata.name), warmBefore);
    const b = await s.api.create({ timeout: 600 });
    assert.equal(b.headers.get('x-sandbox-pool'), 'warm');
    assert.equal(k.podOf(b.json.id).metadata.name, warmBefore[0]);
    assert.equal((await s.api.exec(b.json.id, 'echo ok')).stdout, 'ok');
    for (const id of [a.json.id, b.json.id]) assert.equal((await s.api.del(id)).status, 204);
  } finally {
    await s?.stop();
    await k.close();
  }
});

test('the cluster\'s quota is a 503 that says so', async () => {
  const k = await startCluster({ quotaPods: 2, firstHost: 130 });
  const stateDir = tmpdir('sbxd-k8s-quota-');
  let s;
  try {
    s = await sandboxd(k, { K8S_SANDBOX_WARM_POOL_SIZE: '0' }, { stateDir });
    const ids = [];
    for (let i = 0; i < 2; i++) {
      const r = await s.api.create({ timeout: 600 });
      assert.equal(r.status, 202, r.text);
      ids.push(r.json.id);
    }
    const r = await s.api.create({ timeout: 600 });
    assert.equal(r.status, 503, r.text);
    assert.equal(r.json.code, 'CAPACITY');
    assert.match(r.json.message, /quota is used up.*exceeded quota/);
    // sandboxd serves on, and a freed slot is used again
    assert.equal((await s.api.del(ids[0])).status, 204);
    await until(() => k.pods().length < 2, { what: 'the pod gone' });
    const again = await s.api.create({ timeout: 600 });
    assert.equal(again.status, 202, again.text);
    // K8S_SANDBOX_POOL_MAX, sandboxd's own cap, says so too
    await s.stop();
    s = await sandboxd(k, { K8S_SANDBOX_WARM_POOL_SIZE: '0', K8S_SANDBOX_POOL_MAX: '2' }, { stateDir });
    const capped = await s.api.create({ timeout: 600 });
    assert.equal(capped.status, 503, capped.text);
    assert.match(capped.json.message, /K8S_SANDBOX_POOL_MAX \(2\)/);
  } finally {
    await s?.stop();
    await k.close();
  }
});

test('two sandboxd racing for one warm pod: one claim wins, the other gets 422 and goes cold', async () => {
  // watch events reach both caches 300 ms late: both see the pod as warm
  const k = await startCluster({ watchDelayMs: 300, firstHost: 160 });
  let a, b;
  try {
    a = await sandboxd(k, { K8S_SANDBOX_WARM_POOL_SIZE: '1', K8S_SANDBOX_INSTANCE: 'sandboxd-a' });
    b = await sandboxd(k, { K8S_SANDBOX_WARM_POOL_SIZE: '0', K8S_SANDBOX_INSTANCE: 'sandboxd-b' });
    const seen = new Set();
    for (let round = 0; round < 3; round++) {
      await until(() => k.warmReady().length === 1, { what: 'one warm pod', timeoutMs: 30000 });
      await sleep(400); // both caches have it Ready
      const before = k.api.audit.length;
      const [ra, rb] = await Promise.all([a.api.create({ timeout: 600 }), b.api.create({ timeout: 600 })]);
      assert.equal(ra.status, 202, ra.text);
      assert.equal(rb.status, 202, rb.text);
      const how = [ra.headers.get('x-sandbox-pool'), rb.headers.get('x-sandbox-pool')].sort();
      assert.deepEqual(how, ['cold', 'warm']);
      const pa = k.podOf(ra.json.id), pb = k.podOf(rb.json.id);
      assert.notEqual(pa.metadata.name, pb.metadata.name);
      assert.equal(labels(pa)[L.claimer], 'sandboxd-a');
      assert.equal(labels(pb)[L.claimer], 'sandboxd-b');
      for (const p of [pa, pb]) { assert.ok(!seen.has(p.metadata.name)); seen.add(p.metadata.name); }
      const claims = k.api.audit.slice(before).filter((e) => e.verb === 'PATCH');
      assert.deepEqual(claims.map((e) => e.code).sort(), [200, 422]);
      // both work, each on its own pod
      assert.equal((await a.api.exec(ra.json.id, 'echo a')).stdout, 'a');
      assert.equal((await b.api.exec(rb.json.id, 'echo b')).stdout, 'b');
      assert.equal((await a.api.del(ra.json.id)).status, 204);
      assert.equal((await b.api.del(rb.json.id)).status, 204);
    }
  } finally {
    await a?.stop();
    await b?.stop();
    await k.close();
  }
});

test('the API server away: sandboxd serves on, creates are 503, and the watch resumes when it is back', async () => {
  const k = await startCluster({ firstHost: 190 });
  let s;
  try {
    s = await sandboxd(k, { K8S_SANDBOX_WARM_POOL_SIZE: '1' });
    await until(() => k.warmReady().length === 1, { what: 'a warm pod', timeoutMs: 30000 });
    await sleep(300); // the stand-in has it Ready: so does sandboxd's cache, a moment later
    const a = await s.api.create({ timeout: 600 });
    assert.equal(a.status, 202, a.text);
    await k.stopApi();
    const r = await s.api.create({ timeout: 600 });
    assert.equal(r.status, 503, r.text);
    assert.equal(r.json.code, 'UNAVAILABLE');
    assert.match(r.json.message, /did not answer in time: .*Kubernetes API (PATCH|POST) .*connect/);
    assert.equal((await fetch(`${s.url}/healthz`)).status, 200);
    // no verdict on a sandbox while the API server cannot be asked
    await sleep(1500);
    assert.equal((await s.api.get(a.json.id)).json.status.state, 'Running');
    assert.equal(s.exited(), null);
    // back, empty: the list shows A's pod gone (Failed), the pool is refilled
    await k.startApi();
    await until(async () => (await s.api.get(a.json.id)).json?.status?.state === 'Failed', { what: 'A Failed', timeoutMs: 20000 });
    await until(() => k.warmReady().length === 1, { what: 'the pool refilled', timeoutMs: 30000 });
    await sleep(300); // the stand-in has it Ready: so does sandboxd's cache, a moment later
    assert.ok(k.api.audit.some((e) => e.verb === 'GET' && !e.query.watch && e.path.endsWith('/pods')), 'listed again');
    assert.ok(k.api.audit.some((e) => e.verb === 'WATCH'), 'watching again');
    const b = await s.api.create({ timeout: 600 });
    assert.equal(b.status, 202, b.text);
    assert.equal(b.headers.get('x-sandbox-pool'), 'warm');
    assert.equal((await s.api.exec(b.json.id, 'echo back')).stdout, 'back');
  } finally {
    await s?.stop();
    await k.close();
  }
});

test('a watch from a version the server dropped (410) lists again and keeps the cache true', async () => {
  const k = await startCluster({ firstHost: 220 });
  let s;
  try {
    s = await sandboxd(k, { K8S_SANDBOX_WARM_POOL_SIZE: '1' });
    await until(() => k.warmReady().length === 1, { what: 'a warm pod', timeoutMs: 30000 });
    await sleep(300); // the stand-in has it Ready: so does sandboxd's cache, a moment later
    const first = k.warmReady()[0].metadata.name;
    await sleep(1200); // sandboxd's cursor is the latest version (a bookmark)
    k.api.noBookmarks = true;
    // a change sandboxd does not watch moves the version on; then every older
    // version is dropped and the watch is cut: sandboxd resumes from a version
    // now too old
    const other = { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'elsewhere' },
      spec: { securityContext: { runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } },
        containers: [{ name: 'c', image: 'x', securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } } }] } };
    assert.equal((await k.call('POST', '/api/v1/namespaces/other/pods', other)).code, 201);
    const before = k.api.audit.length;
    k.api.compact();
    for (const end of [...k.api._ends]) end();
    // what it does next: a watch (answered with ERROR 410), then a list
    await until(() => k.api.audit.slice(before).some((e) => e.verb === 'GET' && !e.query.watch && e.path.endsWith('/pods')), { what: 'a list after the 410' });
    const seen = k.api.audit.slice(before).map((e) => e.verb);
    assert.equal(seen[0], 'WATCH');
    k.api.noBookmarks = false;
    // the cache follows the server again: the warm pod deleted by someone else is replaced
    assert.equal((await k.call('DELETE', `/api/v1/namespaces/${NS}/pods/${first}`, { gracePeriodSeconds: 0 })).code, 200);
    await until(() => k.warmReady().length === 1 && k.warmReady()[0].metadata.name !== first, { what: 'a new warm pod', timeoutMs: 30000 });
    await sleep(300); // the stand-in has it Ready: so does sandboxd's cache, a moment later
    const a = await s.api.create({ timeout: 600 });
    assert.equal(a.headers.get('x-sandbox-pool'), 'warm');
    assert.notEqual(k.podOf(a.json.id).metadata.name, first);
  } finally {
    await s?.stop();
    await k.close();
  }
});

test('24 creates at once take 24 distinct pods; expiry deletes the pod', async () => {
  const k = await startCluster({ firstHost: 10 });
  let s;
  try {
    s = await sandboxd(k, { K8S_SANDBOX_WARM_POOL_SIZE: '12', SANDBOX_MIN_TIMEOUT: '1', K8S_SANDBOX_DEADLINE_GRACE: '30s' });
    await until(() => k.warmReady().length === 12, { what: '12 warm pods', timeoutMs: 60000 });
    await sleep(300); // the stand-in has it Ready: so does sandboxd's cache, a moment later
    const rs = await Promise.all(Array.from({ length: 24 }, () => s.api.create({ timeout: 600 })));
    for (const r of rs) assert.equal(r.status, 202, r.text);
    const names = rs.map((r) => k.podOf(r.json.id).metadata.name);
    assert.equal(new Set(names).size, 24);
    const warm = rs.filter((r) => r.headers.get('x-sandbox-pool') === 'warm').length;
    assert.ok(warm >= 1 && warm <= 12, String(warm));
    // one sandboxd never races itself: every claim it sent won
    const claims = k.api.audit.filter((e) => e.verb === 'PATCH');
    assert.equal(claims.length, warm);
    assert.ok(claims.every((e) => e.code === 200));
    await Promise.all(rs.map((r) => s.api.del(r.json.id)));
    // a sandbox with a 2 s timeout: the reaper deletes it and its pod; the
    // pod's deadline is its age + 2 s + the grace (30 s, so the reaper is
    // first). With env it is a cold pod (age 0): 1.9 s left counts as 2, not 1
    // (the deadline was 31 when the pool had no ready pod for it)
    const e = await s.api.create({ timeout: 2, env: { COLD: '1' } });
    assert.equal(e.status, 202, e.text);
    assert.equal(e.headers.get('x-sandbox-pool'), 'cold');
    const pod = k.podOf(e.json.id);
    const age = (Date.now() - Date.parse(pod.status.startTime || pod.metadata.creationTimestamp)) / 1000;
    assert.ok(pod.spec.activeDeadlineSeconds >= 32 && pod.spec.activeDeadlineSeconds <= age + 2 + 30 + 3,
      `${pod.spec.activeDeadlineSeconds} for a pod of ${age} s`);
    await until(async () => (await s.api.get(e.json.id)).json?.status?.state === 'Terminated', { what: 'expired', timeoutMs: 15000 });
    assert.equal((await s.api.get(e.json.id)).json.status.reason, 'ttl_expiry');
    await until(() => !k.podOf(e.json.id), { what: 'its pod deleted', timeoutMs: 15000 });
  } finally {
    await s?.stop();
    await k.close();
  }
});

test('kill -9 between the claim and its answer: the restart deletes the claimed pod and refills the pool', async () => {
  const k = await startCluster({ firstHost: 100 });
  const stateDir = tmpdir('sbxd-k8s-crash-');
  let s;
  try {
    s = await sandboxd(k, { K8S_SANDBOX_WARM_POOL_SIZE: '1' }, { stateDir });
    await until(() => k.warmReady().length === 1, { what: 'a warm pod', timeoutMs: 30000 });
    await sleep(300);
    const pod = k.warmReady()[0].metadata.name;
    k.api.patchDelayMs = 5000;
    const pending = s.api.create({ timeout: 600 }).catch((e) => e);
    // the API server has applied the claim; sandboxd has not heard back
    const claimed = await until(() => {
      const p = k.pods().find((x) => x.metadata.name === pod);
      return p && labels(p)[L.pool] === 'claimed' && p;
    }, { what: 'the claim applied' });
    const id = labels(claimed)[L.id];
    await s.kill9();
    assert.ok((await pending) instanceof Error, 'the create got no answer');
    k.api.patchDelayMs = 0;
    s = await sandboxd(k, { K8S_SANDBOX_WARM_POOL_SIZE: '1' }, { stateDir });
    // no record of that sandbox: its pod is an orphan of this instance
    assert.equal((await s.api.get(id)).status, 404);
    await until(() => !k.pods().some((x) => x.metadata.name === pod), { what: 'the claimed pod deleted', timeoutMs: 15000 });
    await until(() => k.warmReady().length === 1, { what: 'the pool refilled', timeoutMs: 30000 });
    await sleep(300);
    const a = await s.api.create({ timeout: 600 });
    assert.equal(a.status, 202, a.text);
    assert.equal(a.headers.get('x-sandbox-pool'), 'warm');
    assert.equal((await s.api.exec(a.json.id, 'echo fine')).stdout, 'fine');
  } finally {
    await s?.stop();
    await k.close();
  }
});
