// deploy/: the Kubernetes manifests render with kubectl kustomize and are valid
// against Kubernetes' schemas and the restricted Pod Security Standard, with
// the least rights for sandboxd; the Compose file is valid for docker-compose
// and takes its secrets from the env file; the systemd units pass
// systemd-analyze verify. With a Docker engine and the sandbox image, the
// stack's image is built and each program starts in it. What none of this
// shows (a real cluster, `compose up` of Postgres) is in docs/DEPLOY.md.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import { ROOT, tmpdir } from '../../lib/harness.mjs';
import { schemaProblems, podSpecOf, restrictedProblems, lockdownProblems } from '../../lib/k8s-policy.mjs';

const run = (cmd, args, opts = {}) => spawnSync(cmd, args, { encoding: 'utf8', cwd: ROOT, ...opts });

function rendered() {
  const out = execFileSync('kubectl', ['kustomize', 'deploy/kubernetes/base'], { cwd: ROOT, encoding: 'utf8' });
  return YAML.parseAllDocuments(out).map((d) => d.toJSON()).filter(Boolean);
}
const objs = rendered();
const find = (kind, name) => objs.find((o) => o.kind === kind && o.metadata.name === name);

test('kubernetes: every rendered object is valid against the Kubernetes schema', async () => {
  assert.ok(objs.length >= 20, `rendered ${objs.length} objects`);
  const problems = [];
  for (const o of objs) problems.push(...(await schemaProblems(o)));
  assert.deepEqual(problems, []);
  // the check itself catches a wrong field type
  const bad = structuredClone(find('Deployment', 'tusko'));
  bad.spec.template.spec.containers[0].ports[0].containerPort = 'http';
  assert.match((await schemaProblems(bad)).join('\n'), /containerPort must be integer/);
});

test('kubernetes: every workload passes Pod Security "restricted" and the lock-down rules', () => {
  const workloads = objs.filter((o) => podSpecOf(o));
  assert.deepEqual(workloads.map((o) => o.metadata.name).sort(),
    ['postgres', 'tusko', 'tusko-browserd', 'tusko-sandboxd']);
  for (const o of workloads) {
    const spec = podSpecOf(o);
    assert.deepEqual(restrictedProblems(spec, o.metadata.name), []);
    assert.deepEqual(lockdownProblems(spec, o.metadata.name, { tokenAllowed: o.metadata.name === 'tusko-sandboxd' }), []);
  }
  // the checker is not blind: each loosening is reported
  const spec = structuredClone(podSpecOf(find('Deployment', 'tusko')));
  delete spec.securityContext.seccompProfile;
  spec.containers[0].securityContext.capabilities = { add: ['SYS_ADMIN'] };
  spec.volumes.push({ name: 'h', hostPath: { path: '/' } });
  spec.hostNetwork = true;
  const found = restrictedProblems(spec, 'x').join('\n');
  for (const want of ['seccompProfile unset', 'do not drop ALL', 'adds capability SYS_ADMIN', 'type hostPath', 'hostNetwork'])
    assert.ok(found.includes(want), `${want} not reported in ${found}`);
});

test('kubernetes: namespaces enforce "restricted"; sandboxd has pods in the sandbox namespace and nothing else', () => {
  for (const ns of ['tusko', 'tusko-sandboxes'])
    assert.equal(find('Namespace', ns).metadata.labels['pod-security.kubernetes.io/enforce'], 'restricted');
  assert.deepEqual(objs.filter((o) => /^Cluster(Role|RoleBinding)$/.test(o.kind)), []);
  const roles = objs.filter((o) => o.kind === 'Role');
  assert.deepEqual(roles.map((r) => [r.metadata.namespace, r.metadata.name]), [['tusko-sandboxes', 'tusko-sandboxd']]);
  assert.deepEqual(roles[0].rules, [{ apiGroups: [''], resources: ['pods'],
    verbs: ['create', 'get', 'list', 'watch', 'patch', 'delete', 'deletecollection'] }]);
  const bindings = objs.filter((o) => o.kind === 'RoleBinding');
  assert.equal(bindings.length, 1);
  assert.deepEqual(bindings[0].subjects, [{ kind: 'ServiceAccount', name: 'tusko-sandboxd', namespace: 'tusko' }]);
  assert.equal(bindings[0].roleRef.name, 'tusko-sandboxd');
  assert.equal(find('ServiceAccount', 'tusko-sandbox').automountServiceAccountToken, false);
  const sbx = find('Deployment', 'tusko-sandboxd');
  assert.equal(sbx.spec.replicas, 1);
  assert.equal(sbx.spec.strategy.type, 'Recreate');
  assert.equal(sbx.spec.template.spec.serviceAccountName, 'tusko-sandboxd');
  assert.ok(find('Deployment', 'tusko').spec.replicas >= 2);
  assert.ok(find('PodDisruptionBudget', 'tusko'));
});

test('kubernetes: sandboxes are fenced by NetworkPolicy: nothing in or out but sandboxd to execd', () => {
  const pols = objs.filter((o) => o.kind === 'NetworkPolicy' && o.metadata.namespace === 'tusko-sandboxes');
  const deny = pols.find((p) => p.metadata.name === 'sandbox-default-deny');
  assert.deepEqual(deny.spec, { podSelector: {}, policyTypes: ['Ingress', 'Egress'] });
  const allows = pols.filter((p) => p !== deny);
  assert.equal(allows.length, 1);
  assert.deepEqual(allows[0].spec.policyTypes, ['Ingress']);
  assert.deepEqual(allows[0].spec.ingress, [{
    from: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'tusko' } },
      podSelector: { matchLabels: { 'app.kubernetes.io/name': 'tusko-sandboxd' } } }],
    ports: [{ protocol: 'TCP', port: 44772 }] }]);
  // the sandboxd pods are the ones that policy names
  assert.equal(find('Deployment', 'tusko-sandboxd').spec.template.metadata.labels['app.kubernetes.io/name'], 'tusko-sandboxd');
});

test('kubernetes: browserd gets BROWSERD_API_KEY from the operator\'s Secret, tusko all of it (STEEL_API_KEY)', () => {
  const c = podSpecOf(find('Deployment', 'tusko-browserd')).containers[0];
  assert.deepEqual(c.env.find((e) => e.name === 'BROWSERD_API_KEY').valueFrom, { secretKeyRef: { name: 'tusko-secrets', key: 'BROWSERD_API_KEY' } });
  const t = podSpecOf(find('Deployment', 'tusko')).containers[0];
  assert.ok(t.envFrom.some((e) => e.secretRef?.name === 'tusko-secrets'));
  assert.match(find('ConfigMap', 'tusko-config').data.STEEL_URL, /^http:\/\/tusko-browserd\.tusko\.svc:8082$/);
  const doc = fs.readFileSync(path.join(ROOT, 'docs/DEPLOY.md'), 'utf8');
  assert.match(doc, /--from-literal=BROWSERD_API_KEY=… --from-literal=STEEL_API_KEY=<the same key>/);
});

test('kubernetes: no secret value in the manifests; the Secret is the operator\'s', () => {
  assert.deepEqual(objs.filter((o) => o.kind === 'Secret'), []);
  const text = JSON.stringify(objs);
  assert.doesNotMatch(text, /PASSWORD"\s*:\s*"[^"]|API_KEY"\s*:\s*"[^"]/);
});

function composeConfig(env) {
  const dir = tmpdir('tusko-compose-');
  fs.copyFileSync(path.join(ROOT, 'deploy/compose/docker-compose.yml'), path.join(dir, 'docker-compose.yml'));
  if (env !== null) fs.writeFileSync(path.join(dir, '.env'), env);
  return run('docker-compose', ['-f', path.join(dir, 'docker-compose.yml'), '--project-directory', dir, 'config'], { cwd: dir });
}

test('compose: docker-compose config accepts the stack; every service has a health check; secrets only from .env', () => {
  const example = fs.readFileSync(path.join(ROOT, 'deploy/compose/env.example'), 'utf8');
  const env = example.replace(/^POSTGRES_PASSWORD=$/m, 'POSTGRES_PASSWORD=pw-from-env-file')
    .replace(/^SANDBOXD_API_KEY=$/m, 'SANDBOXD_API_KEY=key-from-env-file-0123')
    .replace(/^BROWSERD_API_KEY=$/m, 'BROWSERD_API_KEY=brd-key-from-env-file-0123');
  const r = composeConfig(env);
  assert.equal(r.status, 0, r.stderr);
  const cfg = YAML.parse(r.stdout);
  assert.deepEqual(Object.keys(cfg.services).sort(), ['browserd', 'db', 'sandboxd', 'tusko']);
  for (const [name, s] of Object.entries(cfg.services)) assert.ok(s.healthcheck?.test, `${name} has no healthcheck`);
  assert.equal(cfg.services.tusko.depends_on.db.condition, 'service_healthy');
  assert.equal(cfg.services.sandboxd.environment.SANDBOX_RUNTIME, 'docker');
  assert.match(cfg.services.tusko.environment.DATABASE_URL, /pw-from-env-file@db:5432/);
  // browserd has its key (it refuses to start without one) and tusko the same, for STEEL_URL
  assert.equal(cfg.services.browserd.environment.BROWSERD_API_KEY, 'brd-key-from-env-file-0123');
  assert.equal(cfg.services.tusko.environment.STEEL_API_KEY, 'brd-key-from-env-file-0123');
  assert.equal(cfg.services.tusko.environment.STEEL_URL, 'http://browserd:8082');
  for (const s of ['tusko', 'browserd']) {
    assert.equal(cfg.services[s].read_only, true);
    assert.deepEqual(cfg.services[s].cap_drop, ['ALL']);
    assert.equal(cfg.services[s].user, '10001:10001');
  }
  // the state folder has the same path on both sides (the docker runtime binds it into sandboxes)
  const binds = cfg.services.sandboxd.volumes.map((v) => typeof v === 'string'
    ? { source: v.split(':')[0], target: v.split(':')[1] } : v);
  const bind = binds.find((v) => v.target.includes('tusko-sandboxd'));
  assert.equal(bind.source, bind.target);
  // the model keys and the database password reach tusko alone
  for (const s of ['sandboxd', 'browserd'])
    assert.deepEqual(Object.keys(cfg.services[s].environment).filter((k) => /PASSWORD|OPENAI|ANTHROPIC/.test(k)), [], s);
  const file = fs.readFileSync(path.join(ROOT, 'deploy/compose/docker-compose.yml'), 'utf8');
  assert.doesNotMatch(file, /pw-from-env-file|key-from-env-file/);
  // without the browser key alone it refuses too, naming it
  const nokey = composeConfig(env.replace(/^BROWSERD_API_KEY=.*$/m, 'BROWSERD_API_KEY='));
  assert.notEqual(nokey.status, 0);
  assert.match(nokey.stderr, /BROWSERD_API_KEY/);
  // without the secrets it refuses, naming what is missing
  const none = composeConfig('');
  assert.notEqual(none.status, 0);
  assert.match(none.stderr, /POSTGRES_PASSWORD/);
});

test('systemd: the units pass systemd-analyze verify and carry the hardening', () => {
  const dir = tmpdir('tusko-units-');
  const build = path.join(ROOT, 'build');
  const units = fs.readdirSync(path.join(ROOT, 'deploy/systemd')).filter((f) => f.endsWith('.service'));
  assert.deepEqual(units.sort(), ['tusko-backup.service', 'tusko-browserd.service', 'tusko-execd.service',
    'tusko-sandboxd.service', 'tusko.service']);
  for (const u of units) {
    const text = fs.readFileSync(path.join(ROOT, 'deploy/systemd', u), 'utf8');
    assert.match(text, /^NoNewPrivileges=yes$/m, u);
    // verify checks that ExecStart is executable: point it at this build
    fs.writeFileSync(path.join(dir, u), text.replaceAll('/usr/local/bin/', `${build}/`));
  }
  for (const u of ['tusko.service', 'tusko-browserd.service', 'tusko-backup.service']) {
    const text = fs.readFileSync(path.join(dir, u), 'utf8');
    assert.match(text, /^DynamicUser=yes$/m, u);
    assert.match(text, /^ProtectSystem=strict$/m, u);
    assert.match(text, /^CapabilityBoundingSet=$/m, u);
  }
  const r = run('systemd-analyze', ['verify', ...units.map((u) => path.join(dir, u))]);
  assert.equal(r.status, 0, r.stdout + r.stderr);
  // verify only warns about unknown or misplaced directives: any output fails
  assert.equal((r.stdout + r.stderr).trim(), '');
  // and it is not blind: a misspelt directive fails
  fs.writeFileSync(path.join(dir, 'bad.service'), '[Service]\nExecStart=/bin/true\nProtectSystm=strict\n');
  const bad = run('systemd-analyze', ['verify', path.join(dir, 'bad.service')]);
  assert.match(bad.stdout + bad.stderr, /Unknown key 'ProtectSystm'/);
});

const docker = run('docker', ['info']).status === 0;
test('compose: the stack image builds from the sandbox image and each program starts in it', { skip: !docker && 'no Docker engine' }, () => {
  const tag = 'tusko-stack:deploy-test';
  const b = run('deploy/compose/build-images.sh', ['--tag', tag], { timeout: 600000 });
  assert.equal(b.status, 0, b.stderr);
  try {
    for (const p of ['tusko', 'tusko-sandboxd', 'tusko-execd', 'tusko-browserd']) {
      const r = run('docker', ['run', '--rm', '--network', 'none', '--read-only', '--cap-drop', 'ALL',
        '--user', '10001:10001', tag, `/usr/local/bin/${p}`, '--help']);
      assert.equal(r.status, 0, `${p}: ${r.stdout}${r.stderr}`);
      assert.match(r.stdout + r.stderr, /Usage|usage/);
    }
    const id = run('docker', ['run', '--rm', tag, 'id', 'tusko']);
    assert.match(id.stdout, /uid=10001\(tusko\)/);
  } finally {
    run('docker', ['rmi', '-f', tag]);
  }
});
