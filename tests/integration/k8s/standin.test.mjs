// The stand-in API server (tests/lib/k8s-standin.mjs) checked against real
// clients, so it cannot drift from what they expect of kube-apiserver:
// kubectl (the machine's, or Debian's kubernetes-client) and Debian's
// python3-kubernetes run the same Pod scenarios a sandbox runtime needs (create,
// list by label with paging, the JSON Patch claim raced by 16 clients, 409 on a
// stale resourceVersion and a wrong uid precondition, watch from a list's
// version with selector exits, 410 for an expired version, quota 403), over TLS
// verified against a CA made here, with a bearer token that can be rotated.
// This shows the stand-in agrees with real *clients*; that it agrees with a
// real *server* is not shown on these machines (docs/TESTING.md).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { ROOT, tmpdir } from '../../lib/harness.mjs';
import { startStandin, makeTestCA } from '../../lib/k8s-standin.mjs';

const dir = tmpdir('tusko-k8s-');
const ca = makeTestCA(dir, execFileSync);
let api;
const NS = 'tusko-sandboxes';

function kubeconfig(file, { token = 'tok-1', caFile = ca.ca, server = api.url } = {}) {
  const p = path.join(dir, file);
  fs.writeFileSync(p, JSON.stringify({ apiVersion: 'v1', kind: 'Config',
    clusters: [{ name: 's', cluster: { server, 'certificate-authority': caFile } }],
    users: [{ name: 'u', user: { token } }],
    contexts: [{ name: 'c', context: { cluster: 's', user: 'u', namespace: NS } }],
    'current-context': 'c' }));
  return p;
}
// the stand-in runs in this process: clients must run asynchronously
function runAsync(cmd, args, { timeout = 60000 } = {}) {
  return new Promise((resolve) => {
    const c = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '', stderr = '';
    c.stdout.on('data', (d) => { stdout += d; });
    c.stderr.on('data', (d) => { stderr += d; });
    const t = setTimeout(() => c.kill('SIGKILL'), timeout);
    c.on('close', (status) => { clearTimeout(t); resolve({ status, stdout, stderr }); });
  });
}
const kubectl = (cfg, ...args) => runAsync('kubectl', ['--kubeconfig', cfg, ...args], { timeout: 30000 });

before(async () => {
  api = await startStandin({ cert: fs.readFileSync(ca.cert), key: fs.readFileSync(ca.key), tokens: ['tok-1'] });
});
after(async () => { await api.close(); });

test('kubectl: TLS is verified and the token is required', async () => {
  const other = makeTestCA(tmpdir('tusko-k8s-other-'), execFileSync);
  const wrongCA = await kubectl(kubeconfig('wrong-ca.json', { caFile: other.ca }), 'get', 'pods');
  assert.notEqual(wrongCA.status, 0);
  assert.match(wrongCA.stderr, /x509|certificate signed by unknown authority/);
  const wrongTok = await kubectl(kubeconfig('wrong-tok.json', { token: 'nope' }), 'get', 'pods');
  assert.notEqual(wrongTok.status, 0);
  assert.match(wrongTok.stderr, /Unauthorized|must be logged in/);
  // a rotated token: the old one stops working, the new one works
  api.setTokens(['tok-2']);
  try {
    assert.notEqual((await kubectl(kubeconfig('old.json'), 'get', 'pods')).status, 0);
    assert.equal((await kubectl(kubeconfig('new.json', { token: 'tok-2' }), 'get', 'pods')).status, 0);
  } finally {
    api.setTokens(['tok-1']);
  }
});

test('kubectl: create, list by label, the claim patch, conflicts, watch and delete', async () => {
  const cfg = kubeconfig('kc.json');
  const podFile = path.join(dir, 'pod.json');
  fs.writeFileSync(podFile, JSON.stringify({ apiVersion: 'v1', kind: 'Pod',
    metadata: { name: 'kc-1', labels: { 'sandbox.tusko.io/service': 't1', 'sandbox.tusko.io/role': 'pool' } },
    spec: { terminationGracePeriodSeconds: 1, containers: [{ name: 'sandbox', image: 'tusko-sandbox' }] } }));
  let r = await kubectl(cfg, 'create', '--validate=false', '-f', podFile);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /pod\/kc-1 created/);
  r = await kubectl(cfg, 'create', '--validate=false', '-f', podFile);
  assert.match(r.stderr, /Error from server \(AlreadyExists\).*pods "kc-1" already exists/);

  // the watch (list, then watch from its version) sees what follows
  const w = spawn('kubectl', ['--kubeconfig', cfg, 'get', 'pods', '-l', 'sandbox.tusko.io/service=t1', '--watch',
    '--output-watch-events', '-o', 'jsonpath={.type} {.object.metadata.name} {.object.metadata.labels.sandbox\\.tusko\\.io/role}{"\\n"}']);
  let seen = '';
  w.stdout.on('data', (d) => { seen += d; });
  const waitFor = async (re) => {
    for (let i = 0; i < 100 && !re.test(seen); i++) await new Promise((res) => setTimeout(res, 50));
    assert.match(seen, re);
  };
  await waitFor(/ADDED kc-1/);

  r = await kubectl(cfg, 'get', 'pods', '-l', 'sandbox.tusko.io/role=pool', '-o', 'jsonpath={.items[*].metadata.name}');
  assert.equal(r.stdout, 'kc-1');
  // the kubelet of the stand-in made it Running; kubectl's table says so
  await new Promise((res) => setTimeout(res, 100));
  r = await kubectl(cfg, 'get', 'pods');
  assert.match(r.stdout, /kc-1\s+1\/1\s+Running\s+0/);

  const cas = JSON.stringify([
    { op: 'test', path: '/metadata/labels/sandbox.tusko.io~1role', value: 'pool' },
    { op: 'replace', path: '/metadata/labels/sandbox.tusko.io~1role', value: 'sandbox' }]);
  r = await kubectl(cfg, 'patch', 'pod', 'kc-1', '--type=json', '-p', cas);
  assert.equal(r.status, 0, r.stderr);
  r = await kubectl(cfg, 'patch', 'pod', 'kc-1', '--type=json', '-p', cas);
  assert.notEqual(r.status, 0);
  assert.match(r.stderr, /invalid.*testing value \/metadata\/labels\/sandbox.tusko.io~1role failed/i);
  await waitFor(/MODIFIED kc-1 sandbox/);

  const rv = (await kubectl(cfg, 'get', 'pod', 'kc-1', '-o', 'jsonpath={.metadata.resourceVersion}')).stdout;
  r = await kubectl(cfg, 'annotate', 'pod', 'kc-1', 'a=1');
  assert.equal(r.status, 0, r.stderr);
  r = await kubectl(cfg, 'patch', 'pod', 'kc-1', '--type=merge', '-p', JSON.stringify({ metadata: { resourceVersion: rv, annotations: { a: '2' } } }));
  assert.match(r.stderr, /Error from server \(Conflict\): Operation cannot be fulfilled on pods "kc-1": the object has been modified/);

  r = await kubectl(cfg, 'delete', 'pod', 'kc-1', '--wait=false');
  assert.equal(r.status, 0, r.stderr);
  assert.match((await kubectl(cfg, 'get', 'pods')).stdout, /kc-1.*Terminating/);
  await waitFor(/DELETED kc-1/);
  w.kill();
  r = await kubectl(cfg, 'get', 'pod', 'kc-1');
  assert.match(r.stderr, /Error from server \(NotFound\)/);
  // kubectl used the real paths and media types
  const calls = api.audit.map((a) => `${a.verb} ${a.path} ${a.contentType}`.trim());
  for (const want of [`POST /api/v1/namespaces/${NS}/pods application/json`,
    `PATCH /api/v1/namespaces/${NS}/pods/kc-1 application/json-patch+json`,
    `PATCH /api/v1/namespaces/${NS}/pods/kc-1 application/merge-patch+json`,
    `WATCH /api/v1/namespaces/${NS}/pods`, `DELETE /api/v1/namespaces/${NS}/pods/kc-1 application/json`])
    assert.ok(calls.includes(want), `${want} not in ${calls.join('\n')}`);
});

test('python3-kubernetes: the runtime\'s scenario answers as kube-apiserver does', async () => {
  const r = await runAsync('/usr/bin/python3', [path.join(ROOT, 'tests/integration/k8s/standin_client.py'), kubeconfig('py.json'), 'tusko-py']);
  assert.equal(r.status, 0, r.stderr);
  const o = JSON.parse(r.stdout);
  assert.equal(o.created_rv_nonempty, true);
  assert.equal(o.created_uid_nonempty, true);
  assert.deepEqual(o.dup, { status: 409, reason: 'AlreadyExists', message: 'pods "py-a" already exists' });
  assert.deepEqual(o.pool_names, ['py-a', 'py-b']);
  assert.deepEqual(o.not_pool, ['py-c']);
  assert.deepEqual(o.in_set, ['py-c']);
  assert.deepEqual(o.pages, [['py-a', 'py-b'], ['py-c']]);
  assert.equal(o.page_rv_same, true);
  assert.equal(o.missing.status, 404);
  // 16 racing claims of one pod: one wins, fifteen get 422
  assert.deepEqual(o.cas, [200, ...Array(15).fill(422)]);
  assert.deepEqual(o.after_cas, { role: 'sandbox', deadline: 600 });
  assert.equal(o.deadline_up.status, 422);
  assert.match(o.deadline_up.message, /must be less than or equal to previous value/);
  assert.equal(o.deadline_down, 500);
  assert.equal(o.image_change.status, 422);
  assert.match(o.image_change.message, /pod updates may not change fields/);
  assert.equal(o.stale_rv.status, 409);
  assert.equal(o.stale_rv.reason, 'Conflict');
  assert.equal(o.wrong_uid.status, 409);
  assert.match(o.wrong_uid.message, /Precondition failed: UID in precondition/);
  // watch from the list's version: the claim, then the delete; on role=pool the claim is an exit
  assert.deepEqual(o.events, [['MODIFIED', 'py-b', 'sandbox'], ['DELETED', 'py-c', 'sandbox']]);
  assert.deepEqual(o.pool_events, [['DELETED', 'py-b']]);
  assert.equal(o.gone.status, 404);
  assert.equal(o.expired, 410);
});

test('python3-kubernetes: a pod past the namespace quota is 403 "exceeded quota"', async () => {
  const q = await startStandin({ cert: fs.readFileSync(ca.cert), key: fs.readFileSync(ca.key), tokens: ['tok-1'], quotaPods: 1, enforceRestricted: true });
  try {
    const cfg = kubeconfig('q.json', { server: q.url });
    const script = `
import json, sys
from kubernetes import client, config
from kubernetes.client.rest import ApiException
config.load_kube_config(config_file=sys.argv[1])
v1 = client.CoreV1Api()
sc = client.V1SecurityContext(allow_privilege_escalation=False, run_as_non_root=True,
    capabilities=client.V1Capabilities(drop=["ALL"]), seccomp_profile=client.V1SeccompProfile(type="RuntimeDefault"))
def mk(name, sc):
    return client.V1Pod(metadata=client.V1ObjectMeta(name=name),
        spec=client.V1PodSpec(containers=[client.V1Container(name="s", image="i", security_context=sc)]))
out = []
for name, ctx in (("loose", None), ("ok", sc), ("two", sc)):
    try:
        v1.create_namespaced_pod(sys.argv[2], mk(name, ctx)); out.append([name, 201, ""])
    except ApiException as e:
        out.append([name, e.status, json.loads(e.body)["message"]])
print(json.dumps(out))`;
    const r = await runAsync('/usr/bin/python3', ['-c', script, cfg, NS]);
    assert.equal(r.status, 0, r.stderr);
    const [loose, ok, two] = JSON.parse(r.stdout);
    assert.equal(loose[1], 403);
    assert.match(loose[2], /violates PodSecurity "restricted:latest": .*allowPrivilegeEscalation/);
    assert.deepEqual(ok, ['ok', 201, '']);
    assert.equal(two[1], 403);
    assert.match(two[2], /exceeded quota: .*count\/pods=1/);
  } finally {
    await q.close();
  }
});
