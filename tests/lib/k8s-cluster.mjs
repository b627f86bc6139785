// tests/lib/k8s-cluster.mjs — a stand-in "cluster" for tusko-sandboxd's
// kubernetes runtime: the stand-in API server (k8s-standin.mjs) over TLS with
// a CA made here and a bearer token in a file, enforcing Pod Security
// "restricted", with the process kubelet (k8s-kubelet.mjs) running a real
// tusko-execd per pod on its own loopback address. env() is what sandboxd
// needs to use it. Kubernetes itself is not here: no scheduler, no CNI, no
// container runtime (docs/TESTING.md).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import path from 'node:path';
import { BUILD, tmpdir } from './harness.mjs';
import { startStandin, makeTestCA } from './k8s-standin.mjs';
import { processKubelet } from './k8s-kubelet.mjs';

export const NS = 'tusko-sandboxes';
export const L = {
  managed: 'app.kubernetes.io/managed-by', service: 'sandbox.tusko.io/service', pool: 'sandbox.tusko.io/pool',
  id: 'sandbox.tusko.io/id', claimer: 'sandbox.tusko.io/claimer', template: 'sandbox.tusko.io/template',
};

// One request to the stand-in over HTTPS (verified against caPem): {code, body}.
export function apiCall(url, caPem, token, method, p, body, ctype = 'application/json') {
  return new Promise((resolve, reject) => {
    const u = new URL(url + p);
    const data = body === undefined ? '' : JSON.stringify(body);
    const req = https.request({ host: u.hostname, port: u.port, path: u.pathname + u.search, method, ca: caPem,
      headers: { authorization: `Bearer ${token}`, 'content-type': ctype, 'content-length': Buffer.byteLength(data) } },
    (res) => {
      let d = '';
      res.on('data', (c) => { d += c; });
      res.on('end', () => resolve({ code: res.statusCode, body: d ? JSON.parse(d) : null }));
    });
    req.on('error', reject);
    req.end(data);
  });
}

export async function startCluster({ quotaPods = Infinity, watchDelayMs = 0, firstHost = 10 } = {}) {
  const dir = tmpdir('tusko-k8s-cluster-');
  const ca = makeTestCA(dir, execFileSync);
  const tokenFile = path.join(dir, 'token');
  fs.writeFileSync(tokenFile, 'tok-sandboxd\n', { mode: 0o600 });
  const kubelet = processKubelet({ execd: path.join(BUILD, 'tusko-execd'), dir, firstHost });
  const start = (port = 0) => startStandin({ cert: fs.readFileSync(ca.cert), key: fs.readFileSync(ca.key),
    tokens: ['tok-sandboxd', 'tok-test'], kubelet, quotaPods, enforceRestricted: true, watchDelayMs, port });
  let api = await start();
  const url = api.url;
  const pods = () => [...api.pods.values()].filter((p) => p.metadata.namespace === NS);
  const isReady = (p) => !p.metadata.deletionTimestamp && p.status?.phase === 'Running' &&
    (p.status.conditions || []).some((c) => c.type === 'Ready' && c.status === 'True');
  return {
    get api() { return api; }, dir, ca, kubelet, pods, isReady,
    // the API server goes away (connections refused) ...
    async stopApi() { await api.close(); },
    // ... and comes back on the same address, empty (as after losing etcd):
    // the kubelet then stops every process of the old pods
    async startApi() { api = await start(Number(new URL(url).port)); },
    warm: () => pods().filter((p) => p.metadata.labels?.[L.pool] === 'warm' && !p.metadata.deletionTimestamp),
    warmReady: () => pods().filter((p) => p.metadata.labels?.[L.pool] === 'warm' && isReady(p)),
    podOf: (id) => pods().find((p) => p.metadata.labels?.[L.id] === id),
    env: (extra = {}) => ({
      SANDBOX_RUNTIME: 'kubernetes',
      K8S_API_SERVER: url,
      K8S_CA_FILE: ca.ca,
      K8S_TOKEN_FILE: tokenFile,
      K8S_SANDBOX_NAMESPACE: NS,
      K8S_SANDBOX_IMAGE: 'registry.example/tusko-stack:test',
      ...extra,
    }),
    // a request to the API as a client of our own (token tok-test)
    call: (method, p, body, ctype) => apiCall(url, fs.readFileSync(ca.ca), 'tok-test', method, p, body, ctype),
    async close() {
      kubelet.stop();
      await api.close();
    },
  };
}
