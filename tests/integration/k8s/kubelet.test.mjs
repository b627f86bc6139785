// The stand-in's process kubelet (tests/lib/k8s-kubelet.mjs): each pod created
// through the API runs a real tusko-execd on its own loopback address, with
// the pod's env (here its access token); Ready and the pod IP appear once
// execd answers; a deleted pod's process goes (at once when Terminating); a
// process that dies leaves the pod Failed; a pod past its
// activeDeadlineSeconds is killed and marked Failed/DeadlineExceeded.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { BUILD, tmpdir, sleep } from '../../lib/harness.mjs';
import { startStandin, makeTestCA } from '../../lib/k8s-standin.mjs';
import { processKubelet } from '../../lib/k8s-kubelet.mjs';
import { apiCall } from '../../lib/k8s-cluster.mjs';

const NS = 'tusko-sandboxes';
const PORT = 44772;

const call = (api, ca, method, p, body) => apiCall(api.url, ca, 'tok', method, p, body);
const pod = (name, extra = {}) => ({ apiVersion: 'v1', kind: 'Pod', metadata: { name },
  spec: { containers: [{ name: 'sandbox', image: 'tusko-sandbox:test',
    env: [{ name: 'EXECD_ACCESS_TOKEN', value: `tok-${name}` }] }], ...extra } });

async function until(fn, ms = 15000) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error('timed out');
    await sleep(50);
  }
}

test('each pod runs execd on its own loopback address, and goes with the pod', async () => {
  const dir = tmpdir('tusko-k8sk-');
  const ca = makeTestCA(dir, execFileSync);
  const kubelet = processKubelet({ execd: path.join(BUILD, 'tusko-execd'), dir, port: PORT });
  const api = await startStandin({ cert: fs.readFileSync(ca.cert), key: fs.readFileSync(ca.key),
    tokens: ['tok'], kubelet });
  const caPem = fs.readFileSync(ca.ca);
  try {
    for (const n of ['p1', 'p2']) assert.equal((await call(api, caPem, 'POST', `/api/v1/namespaces/${NS}/pods`, pod(n))).code, 201);
    const ips = [];
    for (const n of ['p1', 'p2']) {
      const st = await until(async () => {
        const r = await call(api, caPem, 'GET', `/api/v1/namespaces/${NS}/pods/${n}`);
        const ready = (r.body.status.conditions || []).some((c) => c.type === 'Ready' && c.status === 'True');
        return ready && r.body.status;
      });
      assert.equal(st.phase, 'Running');
      ips.push(st.podIP);
    }
    assert.notEqual(ips[0], ips[1]);
    for (const [i, ip] of ips.entries()) {
      assert.match(ip, /^127\.\d+\.\d+\.\d+$/);
      assert.equal((await fetch(`http://${ip}:${PORT}/healthz`)).status, 200);
      // the pod's env reached execd: its own token, not the other pod's
      assert.equal((await fetch(`http://${ip}:${PORT}/ping`)).status, 401);
      assert.equal((await fetch(`http://${ip}:${PORT}/ping`, { headers: { 'X-EXECD-ACCESS-TOKEN': `tok-p${2 - i}` } })).status, 401);
      assert.equal((await fetch(`http://${ip}:${PORT}/ping`, { headers: { 'X-EXECD-ACCESS-TOKEN': `tok-p${i + 1}` } })).status, 200);
    }
    // delete p1: its execd goes, p2's stays
    const entry = kubelet.procs.get(`${NS}/p1`);
    const del = await call(api, caPem, 'DELETE', `/api/v1/namespaces/${NS}/pods/p1`, { gracePeriodSeconds: 0 });
    assert.equal(del.code, 200, JSON.stringify(del.body));
    await until(() => entry.exited);
    await assert.rejects(fetch(`http://${ips[0]}:${PORT}/healthz`));
    assert.equal((await fetch(`http://${ips[1]}:${PORT}/healthz`)).status, 200);
    // a graceful delete: the process stops while the pod is Terminating
    const e2 = kubelet.procs.get(`${NS}/p2`);
    const del2 = await call(api, caPem, 'DELETE', `/api/v1/namespaces/${NS}/pods/p2`, { gracePeriodSeconds: 30 });
    assert.equal(del2.code, 200);
    assert.ok(del2.body.metadata.deletionTimestamp);
    await until(() => e2.exited);
    assert.equal((await call(api, caPem, 'GET', `/api/v1/namespaces/${NS}/pods/p2`)).code, 200); // still Terminating
    // a process that dies on its own (an OOM kill, say): the pod is Failed, Ready False
    assert.equal((await call(api, caPem, 'POST', `/api/v1/namespaces/${NS}/pods`, pod('p4'))).code, 201);
    await until(async () => (await call(api, caPem, 'GET', `/api/v1/namespaces/${NS}/pods/p4`)).body.status.podIP);
    kubelet.procs.get(`${NS}/p4`).child.kill('SIGKILL');
    const dead = await until(async () => {
      const r = await call(api, caPem, 'GET', `/api/v1/namespaces/${NS}/pods/p4`);
      return r.body.status.phase === 'Failed' && r.body.status;
    });
    assert.ok(dead.conditions.some((c) => c.type === 'Ready' && c.status === 'False'));
    assert.equal(dead.containerStatuses[0].state.terminated.exitCode, 137);
    // the deadline backstop
    assert.equal((await call(api, caPem, 'POST', `/api/v1/namespaces/${NS}/pods`, pod('p3', { activeDeadlineSeconds: 1 }))).code, 201);
    const failed = await until(async () => {
      const r = await call(api, caPem, 'GET', `/api/v1/namespaces/${NS}/pods/p3`);
      return r.body.status.phase === 'Failed' && r.body.status;
    });
    assert.equal(failed.reason, 'DeadlineExceeded');
    await until(() => kubelet.procs.get(`${NS}/p3`).exited);
  } finally {
    kubelet.stop();
    await api.close();
  }
});
