// tests/lib/k8s-policy.mjs — checks of Kubernetes objects used by the deploy
// and kubernetes-runtime tests: the schema (kubernetes-models, validators
// generated from Kubernetes' OpenAPI) and the Pod Security Standard
// "restricted" as published (kubernetes.io/docs/concepts/security/
// pod-security-standards/), plus the project's own lock-down rules.
// Each check returns a list of problems (empty: fine), so a test can also
// show that a bad object is caught.

const ALLOWED_VOLUMES = ['configMap', 'csi', 'downwardAPI', 'emptyDir', 'ephemeral',
  'persistentVolumeClaim', 'projected', 'secret'];

// kubernetes-models has one module per API group/version and one class per kind.
export async function schemaProblems(obj) {
  const [group, version] = obj.apiVersion.includes('/') ? obj.apiVersion.split('/') : ['', obj.apiVersion];
  const mod = group ? `kubernetes-models/${group}/${version}` : `kubernetes-models/${version}`;
  let m;
  try {
    m = await import(mod);
  } catch {
    return [`${obj.kind} ${obj.metadata?.name}: no schema for apiVersion ${obj.apiVersion}`];
  }
  const Cls = m[obj.kind];
  if (!Cls) return [`${obj.kind} ${obj.metadata?.name}: no schema for kind ${obj.kind} in ${obj.apiVersion}`];
  try {
    new Cls(obj).validate();
    return [];
  } catch (e) {
    return [`${obj.kind} ${obj.metadata?.name}: ${e.message}`];
  }
}

// The pod spec of a Pod or of a workload's template.
export function podSpecOf(obj) {
  if (obj.kind === 'Pod') return obj.spec;
  if (['Deployment', 'StatefulSet', 'DaemonSet', 'ReplicaSet', 'Job'].includes(obj.kind)) return obj.spec?.template?.spec;
  if (obj.kind === 'CronJob') return obj.spec?.jobTemplate?.spec?.template?.spec;
  return null;
}

// Pod Security Standard "restricted" (which includes "baseline").
export function restrictedProblems(spec, what = 'pod') {
  const p = [];
  const psc = spec.securityContext || {};
  for (const k of ['hostNetwork', 'hostPID', 'hostIPC']) if (spec[k]) p.push(`${what}: ${k}`);
  for (const v of spec.volumes || []) {
    const type = Object.keys(v).find((k) => k !== 'name');
    if (!ALLOWED_VOLUMES.includes(type)) p.push(`${what}: volume ${v.name} of type ${type}`);
  }
  if (psc.runAsUser === 0) p.push(`${what}: runAsUser 0`);
  const ctrs = [...(spec.initContainers || []), ...(spec.containers || []), ...(spec.ephemeralContainers || [])];
  for (const c of ctrs) {
    const sc = c.securityContext || {};
    const n = `${what} container ${c.name}`;
    if (sc.privileged) p.push(`${n}: privileged`);
    if (sc.procMount && sc.procMount !== 'Default') p.push(`${n}: procMount ${sc.procMount}`);
    for (const port of c.ports || []) if (port.hostPort) p.push(`${n}: hostPort ${port.hostPort}`);
    if (sc.allowPrivilegeEscalation !== false) p.push(`${n}: allowPrivilegeEscalation is not false`);
    const nonRoot = sc.runAsNonRoot ?? psc.runAsNonRoot;
    if (nonRoot !== true) p.push(`${n}: runAsNonRoot is not true`);
    if (sc.runAsUser === 0) p.push(`${n}: runAsUser 0`);
    const seccomp = (sc.seccompProfile || psc.seccompProfile || {}).type;
    if (seccomp !== 'RuntimeDefault' && seccomp !== 'Localhost') p.push(`${n}: seccompProfile ${seccomp || 'unset'}`);
    const caps = sc.capabilities || {};
    if (!(caps.drop || []).includes('ALL')) p.push(`${n}: capabilities do not drop ALL`);
    for (const a of caps.add || []) if (a !== 'NET_BIND_SERVICE') p.push(`${n}: adds capability ${a}`);
  }
  return p;
}

// The project's rules beyond "restricted": a read-only root, limits on every
// container, and no service-account token unless asked for by name.
export function lockdownProblems(spec, what = 'pod', { tokenAllowed = false } = {}) {
  const p = [];
  if (spec.automountServiceAccountToken !== false && !tokenAllowed) p.push(`${what}: service-account token mounted`);
  for (const c of spec.containers || []) {
    const n = `${what} container ${c.name}`;
    if (c.securityContext?.readOnlyRootFilesystem !== true) p.push(`${n}: root filesystem writable`);
    const lim = c.resources?.limits || {};
    if (!lim.cpu || !lim.memory) p.push(`${n}: no cpu and memory limits`);
  }
  return p;
}
