// tests/lib/k8s-standin.mjs — a stand-in for kube-apiserver, for tests on
// machines where no real one can run. It serves the core/v1 Pod API the way the
// Kubernetes API documentation describes it (api-concepts, pods, patch, watch)
// over HTTPS with a bearer token, and nothing it was not asked to be:
//
// - discovery: /version, /api, /api/v1, /apis (kubectl asks for them);
//   /openapi/* answer 404, so kubectl runs with --validate=false
// - pods in any namespace: create (generateName, uid, creationTimestamp,
//   resourceVersion from one global counter; 409 AlreadyExists), get (404),
//   list (labelSelector =, ==, !=, in, notin, key, !key; limit and continue;
//   410 for a continue token whose snapshot is gone), watch (JSON lines of
//   ADDED/MODIFIED/DELETED/BOOKMARK; from a resourceVersion, or all objects as
//   ADDED first; an ERROR event with a 410 Status for a version older than the
//   kept history; an object leaving the selector is DELETED for that watch;
//   ends at timeoutSeconds), patch (JSON Patch with test → 422, merge patch and
//   strategic merge patch with a metadata.resourceVersion precondition → 409;
//   the spec is immutable but for activeDeadlineSeconds, which may only be set
//   or lowered → 422), delete (gracePeriodSeconds, preconditions.uid and
//   .resourceVersion → 409; deletionTimestamp then removal after the grace),
//   deletecollection by labelSelector
// - admission: a namespace quota of count/pods (403 "exceeded quota") and,
//   when asked, the Pod Security "restricted" rules (403 "violates
//   PodSecurity") with tests/lib/k8s-policy.mjs
// - a kubelet hook: kubelet(pod, api) is called for each new pod and may set
//   its status (api.setStatus) — the default marks it Running and Ready on
//   127.0.0.1 after readyMs
// - watchDelayMs (settable later as api.watchDelayMs): watch events arrive
//   that much late, in order; api.noBookmarks stops the bookmarks (sent each
//   second otherwise); api.patchDelayMs holds a patch's answer (applied at once)
//
// Every request is kept in `audit` ({verb, path, query, contentType, code}).
// Its behaviour is checked against real clients (kubectl, python3-kubernetes)
// in tests/integration/k8s/standin.test.mjs.
import https from 'node:https';
import crypto from 'node:crypto';
import { restrictedProblems } from './k8s-policy.mjs';

const GITVERSION = 'v1.32.0-tusko-standin';

function status(code, reason, message, details) {
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason,
    ...(details ? { details } : {}), code };
}

// A label selector string → predicate over a labels object.
export function parseSelector(sel) {
  if (!sel) return () => true;
  const reqs = [];
  // split on commas outside parentheses
  let depth = 0, cur = '';
  for (const ch of sel) {
    if (ch === '(') depth++;
    if (ch === ')') depth--;
    if (ch === ',' && depth === 0) { reqs.push(cur); cur = ''; } else cur += ch;
  }
  reqs.push(cur);
  const preds = reqs.map((r) => {
    r = r.trim();
    let m;
    if ((m = r.match(/^([\w./-]+)\s+(in|notin)\s+\(([^)]*)\)$/))) {
      const vals = m[3].split(',').map((v) => v.trim());
      return m[2] === 'in' ? (l) => m[1] in l && vals.includes(l[m[1]]) : (l) => !(m[1] in l) || !vals.includes(l[m[1]]);
    }
    if ((m = r.match(/^([\w./-]+)\s*!=\s*([\w.-]*)$/))) return (l) => l[m[1]] !== m[2];
    if ((m = r.match(/^([\w./-]+)\s*==?\s*([\w.-]*)$/))) return (l) => l[m[1]] === m[2];
    if ((m = r.match(/^!([\w./-]+)$/))) return (l) => !(m[1] in l);
    if ((m = r.match(/^([\w./-]+)$/))) return (l) => m[1] in l;
    throw Object.assign(new Error(`unable to parse requirement: ${r}`), { bad: true });
  });
  return (labels) => preds.every((p) => p(labels || {}));
}

// RFC 6901 pointer → [parent, key]; RFC 6902 operations.
function ptr(doc, path, create = false) {
  if (path === '') return [null, null];
  const parts = path.split('/').slice(1).map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
  let o = doc;
  for (let i = 0; i < parts.length - 1; i++) {
    const k = Array.isArray(o) ? Number(parts[i]) : parts[i];
    if (o[k] === undefined || o[k] === null) {
      if (!create) throw new Error(`doc is missing path: ${path}`);
      o[k] = {};
    }
    o = o[k];
    if (typeof o !== 'object') throw new Error(`doc is missing path: ${path}`);
  }
  return [o, parts[parts.length - 1]];
}
export function applyJsonPatch(doc, ops) {
  if (!Array.isArray(ops)) throw new Error('json patch is not an array');
  for (const op of ops) {
    const [parent, key] = ptr(doc, op.path, false);
    const idx = Array.isArray(parent) ? (key === '-' ? parent.length : Number(key)) : key;
    switch (op.op) {
      case 'test':
        if (JSON.stringify(parent[idx]) !== JSON.stringify(op.value))
          throw new Error(`testing value ${op.path} failed`);
        break;
      case 'add':
        if (Array.isArray(parent)) parent.splice(idx, 0, op.value); else parent[idx] = op.value;
        break;
      case 'replace':
        if (!(idx in parent)) throw new Error(`replace operation does not apply: doc is missing key: ${op.path}`);
        parent[idx] = op.value;
        break;
      case 'remove':
        if (!(idx in parent)) throw new Error(`remove operation does not apply: doc is missing key: ${op.path}`);
        if (Array.isArray(parent)) parent.splice(idx, 1); else delete parent[idx];
        break;
      default:
        throw new Error(`Unexpected kind: ${op.op}`);
    }
  }
  return doc;
}
export function applyMergePatch(doc, patch) {
  if (patch === null || typeof patch !== 'object' || Array.isArray(patch)) return patch;
  if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) doc = {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete doc[k];
    else doc[k] = applyMergePatch(doc[k], v);
  }
  return doc;
}

const clone = (o) => structuredClone(o);
// query booleans as clients send them: true, 1, True (python)
const truthy = (v) => v !== null && /^(true|1)$/i.test(v);
const now = () => new Date(Math.floor(Date.now() / 1000) * 1000).toISOString().replace('.000Z', 'Z');

export async function startStandin({ cert, key, tokens = [], quotaPods = Infinity, enforceRestricted = false,
  kubelet, readyMs = 20, historyMax = 1000, port = 0, watchDelayMs = 0 } = {}) {
  let rv = 1000;
  const pods = new Map(); // ns/name → pod
  const history = []; // {rv, type, obj}
  const watchers = new Set();
  const listSnapshots = new Map(); // continue token → {rv, items}
  const audit = [];
  const timers = new Set();
  let accepted = new Set(tokens);

  const later = (ms, fn) => {
    const t = setTimeout(() => { timers.delete(t); fn(); }, ms);
    timers.add(t);
  };
  const lastLabels = new Map(); // ns/name → labels at its last event
  function emit(type, pod) {
    const k = `${pod.metadata.namespace}/${pod.metadata.name}`;
    const ev = { rv: Number(pod.metadata.resourceVersion), type, obj: clone(pod), prevLabels: lastLabels.get(k) || {} };
    if (type === 'DELETED') lastLabels.delete(k); else lastLabels.set(k, clone(pod.metadata.labels || {}));
    history.push(ev);
    if (history.length > historyMax) history.shift();
    // watchDelayMs: events reach watches late (in order), as from a slow
    // watch cache, so clients act on a stale view (races become certain)
    if (api.watchDelayMs) later(api.watchDelayMs, () => { for (const w of watchers) w.send(ev); });
    else for (const w of watchers) w.send(ev);
  }
  function bump(pod) {
    pod.metadata.resourceVersion = String(++rv);
  }

  const api = {
    pods, audit, watchDelayMs,
    get resourceVersion() { return String(rv); },
    setTokens(list) { accepted = new Set(list); },
    compact() { history.length = 0; }, // every older version is then "too old"
    // the kubelet's status writes (and only them) change status
    setStatus(ns, name, st) {
      const p = pods.get(`${ns}/${name}`);
      if (!p) return false;
      p.status = { ...p.status, ...st };
      bump(p);
      emit('MODIFIED', p);
      return true;
    },
    pod(ns, name) { return pods.get(`${ns}/${name}`); },
  };

  const defaultKubelet = (pod) => later(readyMs, () => {
    const t = now();
    api.setStatus(pod.metadata.namespace, pod.metadata.name, {
      phase: 'Running', podIP: '127.0.0.1', podIPs: [{ ip: '127.0.0.1' }], hostIP: '127.0.0.1', startTime: t,
      conditions: [{ type: 'Ready', status: 'True', lastTransitionTime: t }],
      containerStatuses: (pod.spec.containers || []).map((c) => ({ name: c.name, ready: true, restartCount: 0,
        image: c.image, imageID: '', started: true, state: { running: { startedAt: t } } })),
    });
  });
  const runKubelet = kubelet || defaultKubelet;

  function removePod(k) {
    const p = pods.get(k);
    if (!p) return;
    pods.delete(k);
    bump(p);
    emit('DELETED', p);
  }

  function deletePod(p, opts, res) {
    const k = `${p.metadata.namespace}/${p.metadata.name}`;
    const pre = opts.preconditions || {};
    if (pre.uid && pre.uid !== p.metadata.uid)
      return [409, status(409, 'Conflict', `Operation cannot be fulfilled on Pod "${p.metadata.name}": Precondition failed: UID in precondition: ${pre.uid}, UID in object meta: ${p.metadata.uid}`, { name: p.metadata.name, kind: 'pods' })];
    if (pre.resourceVersion && pre.resourceVersion !== p.metadata.resourceVersion)
      return [409, status(409, 'Conflict', `Operation cannot be fulfilled on Pod "${p.metadata.name}": Precondition failed: ResourceVersion in precondition: ${pre.resourceVersion}, ResourceVersion in object meta: ${p.metadata.resourceVersion}`, { name: p.metadata.name, kind: 'pods' })];
    let grace = opts.gracePeriodSeconds ?? p.spec.terminationGracePeriodSeconds ?? 30;
    // a pod that never ran has nothing to stop
    if (!p.status?.phase || p.status.phase === 'Pending' && !p.status.startTime) grace = 0;
    if (grace === 0) {
      removePod(k);
      return [200, clone(p)];
    }
    if (!p.metadata.deletionTimestamp) {
      p.metadata.deletionTimestamp = new Date(Date.now() + grace * 1000).toISOString().replace(/\.\d+Z$/, 'Z');
      p.metadata.deletionGracePeriodSeconds = grace;
      bump(p);
      emit('MODIFIED', p);
      if (p._onDelete) p._onDelete();
      later(grace * 1000, () => removePod(k));
    }
    return [200, clone(p)];
  }

  function validatePod(pod) {
    const causes = [];
    if (!pod.metadata?.name && !pod.metadata?.generateName) causes.push({ reason: 'FieldValueRequired', message: 'name or generateName is required', field: 'metadata.name' });
    const ctrs = pod.spec?.containers;
    if (!Array.isArray(ctrs) || ctrs.length === 0) causes.push({ reason: 'FieldValueRequired', message: 'Required value', field: 'spec.containers' });
    for (const [i, c] of (ctrs || []).entries()) {
      if (!c.name) causes.push({ reason: 'FieldValueRequired', message: 'Required value', field: `spec.containers[${i}].name` });
      if (!c.image) causes.push({ reason: 'FieldValueRequired', message: 'Required value', field: `spec.containers[${i}].image` });
    }
    const ads = pod.spec?.activeDeadlineSeconds;
    if (ads !== undefined && !(Number.isInteger(ads) && ads > 0))
      causes.push({ reason: 'FieldValueInvalid', message: 'must be between 1 and 2147483647, inclusive', field: 'spec.activeDeadlineSeconds' });
    return causes;
  }
  const invalid = (name, causes) => [422, status(422, 'Invalid',
    `Pod "${name}" is invalid: ${causes.map((c) => `${c.field}: ${c.message}`).join(', ')}`, { name, kind: 'Pod', causes })];

  function createPod(ns, body) {
    if (body?.kind && body.kind !== 'Pod') return [400, status(400, 'BadRequest', `the API version in the data (${body.apiVersion}) does not match the expected API version (v1)`)];
    const pod = clone(body || {});
    pod.apiVersion = 'v1';
    pod.kind = 'Pod';
    pod.metadata = pod.metadata || {};
    pod.spec = pod.spec || {};
    const causes = validatePod(pod);
    if (causes.length) return invalid(pod.metadata.name || pod.metadata.generateName, causes);
    if (pod.metadata.namespace && pod.metadata.namespace !== ns)
      return [400, status(400, 'BadRequest', 'the namespace of the provided object does not match the namespace sent on the request')];
    if (!pod.metadata.name) pod.metadata.name = pod.metadata.generateName + crypto.randomBytes(3).toString('hex').slice(0, 5);
    const k = `${ns}/${pod.metadata.name}`;
    if (pods.has(k)) return [409, status(409, 'AlreadyExists', `pods "${pod.metadata.name}" already exists`, { name: pod.metadata.name, kind: 'pods' })];
    if (enforceRestricted) {
      const probs = restrictedProblems(pod.spec, 'pod');
      if (probs.length) return [403, status(403, 'Forbidden', `pods "${pod.metadata.name}" is forbidden: violates PodSecurity "restricted:latest": ${probs.join('; ')}`, { name: pod.metadata.name, kind: 'pods' })];
    }
    const used = [...pods.values()].filter((p) => p.metadata.namespace === ns).length;
    if (used + 1 > quotaPods)
      return [403, status(403, 'Forbidden', `pods "${pod.metadata.name}" is forbidden: exceeded quota: tusko-sandboxes, requested: count/pods=1, used: count/pods=${used}, limited: count/pods=${quotaPods}`, { name: pod.metadata.name, kind: 'pods' })];
    pod.metadata.namespace = ns;
    pod.metadata.uid = crypto.randomUUID();
    pod.metadata.creationTimestamp = now();
    delete pod.metadata.resourceVersion;
    delete pod.metadata.deletionTimestamp;
    pod.spec.restartPolicy = pod.spec.restartPolicy || 'Always';
    pod.spec.terminationGracePeriodSeconds = pod.spec.terminationGracePeriodSeconds ?? 30;
    pod.status = { phase: 'Pending', qosClass: 'BestEffort' };
    bump(pod);
    pods.set(k, pod);
    emit('ADDED', pod);
    runKubelet(pod, api);
    return [201, clone(pod)];
  }

  function patchPod(p, ctype, body) {
    const name = p.metadata.name;
    let next;
    try {
      if (ctype === 'application/json-patch+json') next = applyJsonPatch(clone(p), JSON.parse(body));
      else if (ctype === 'application/merge-patch+json' || ctype === 'application/strategic-merge-patch+json') {
        const patch = JSON.parse(body);
        const want = patch?.metadata?.resourceVersion;
        if (want !== undefined && want !== p.metadata.resourceVersion)
          return [409, status(409, 'Conflict', `Operation cannot be fulfilled on pods "${name}": the object has been modified; please apply your changes to the latest version and try again`, { name, kind: 'pods' })];
        next = applyMergePatch(clone(p), patch);
      } else return [415, status(415, 'UnsupportedMediaType', `the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml`)];
    } catch (e) {
      if (e instanceof SyntaxError) return [400, status(400, 'BadRequest', `error decoding patch: ${e.message}`)];
      return [422, status(422, 'Invalid', 'the server rejected our request due to an error in our request', { causes: [{ message: e.message }] })];
    }
    // what a patch may not change
    for (const f of ['name', 'namespace', 'uid', 'creationTimestamp'])
      if (next.metadata?.[f] !== p.metadata[f]) return invalid(name, [{ reason: 'FieldValueInvalid', message: 'field is immutable', field: `metadata.${f}` }]);
    const a = { ...p.spec }, b = { ...next.spec };
    delete a.activeDeadlineSeconds; delete b.activeDeadlineSeconds;
    if (JSON.stringify(a) !== JSON.stringify(b))
      return invalid(name, [{ reason: 'FieldValueForbidden', message: 'pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)', field: 'spec' }]);
    const was = p.spec.activeDeadlineSeconds, will = next.spec.activeDeadlineSeconds;
    if (was !== undefined && (will === undefined || will > was))
      return invalid(name, [{ reason: 'FieldValueInvalid', message: 'must be less than or equal to previous value', field: 'spec.activeDeadlineSeconds' }]);
    const causes = validatePod(next);
    if (causes.length) return invalid(name, causes);
    next.status = p.status; // the status subresource is the kubelet's
    next.metadata.resourceVersion = p.metadata.resourceVersion;
    if (JSON.stringify(next) === JSON.stringify(p)) return [200, clone(p)]; // no-op: no new version
    Object.keys(p).forEach((k) => { if (!k.startsWith('_')) delete p[k]; });
    Object.assign(p, next);
    bump(p);
    emit('MODIFIED', p);
    return [200, clone(p)];
  }

  function list(ns, q) {
    const match = parseSelector(q.get('labelSelector'));
    const limit = Number(q.get('limit') || 0);
    let snap;
    const cont = q.get('continue');
    if (cont) {
      snap = listSnapshots.get(cont);
      if (!snap) return [410, status(410, 'Expired', 'The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.')];
      listSnapshots.delete(cont);
    } else {
      snap = { rv: String(rv), items: [...pods.values()].filter((p) => (!ns || p.metadata.namespace === ns) && match(p.metadata.labels))
        .sort((x, y) => (x.metadata.namespace + '/' + x.metadata.name).localeCompare(y.metadata.namespace + '/' + y.metadata.name)).map(clone) };
    }
    let items = snap.items, meta = { resourceVersion: snap.rv };
    if (limit > 0 && items.length > limit) {
      const token = crypto.randomBytes(12).toString('base64url');
      listSnapshots.set(token, { rv: snap.rv, items: items.slice(limit) });
      items = items.slice(0, limit);
      meta = { resourceVersion: snap.rv, continue: token, remainingItemCount: snap.items.length - limit };
    }
    return [200, { kind: 'PodList', apiVersion: 'v1', metadata: meta, items }];
  }

  function watch(ns, q, req, res) {
    const match = parseSelector(q.get('labelSelector'));
    const fieldName = (q.get('fieldSelector') || '').match(/^metadata\.name=(.+)$/)?.[1];
    const inScope = (o) => (!ns || o.metadata.namespace === ns) && (!fieldName || o.metadata.name === fieldName);
    const from = q.get('resourceVersion');
    const bookmarks = truthy(q.get('allowWatchBookmarks'));
    res.writeHead(200, { 'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked', 'Cache-Control': 'no-cache' });
    const line = (type, object) => res.write(JSON.stringify({ type, object }) + '\n');
    // as the watch cache does, each event knows the object's labels before it,
    // so a watch with a selector sees an object entering it as ADDED and one
    // leaving it as DELETED
    const w = {
      send(ev) {
        if (!inScope(ev.obj)) return;
        const now = match(ev.obj.metadata.labels);
        if (ev.type === 'DELETED') { if (now) line('DELETED', ev.obj); return; }
        const before = ev.type === 'ADDED' ? false : match(ev.prevLabels);
        if (now && !before) line('ADDED', ev.obj);
        else if (now) line(ev.type, ev.obj);
        else if (before) line('DELETED', ev.obj);
      },
    };
    if (!from || from === '0') {
      for (const p of [...pods.values()].filter((x) => inScope(x) && match(x.metadata.labels))) line('ADDED', p);
    } else {
      const n = Number(from);
      const oldest = history.length ? history[0].rv : rv + 1;
      if (!Number.isFinite(n) || (n < oldest - 1 && n < rv)) {
        line('ERROR', status(410, 'Expired', `too old resource version: ${from} (${oldest - 1})`));
        res.end();
        return;
      }
      for (const ev of history) if (ev.rv > n) w.send(ev);
    }
    watchers.add(w);
    const t = Number(q.get('timeoutSeconds') || 1800);
    const end = () => { watchers.delete(w); clearTimeout(tm); clearInterval(bm); if (!res.writableEnded) res.end(); };
    const tm = setTimeout(end, t * 1000);
    const bm = bookmarks ? setInterval(() => !api.noBookmarks && line('BOOKMARK', { kind: 'Pod', apiVersion: 'v1', metadata: { resourceVersion: String(rv), annotations: { 'k8s.io/initial-events-end': 'true' } } }), 1000) : null;
    api._ends = api._ends || new Set();
    api._ends.add(end);
    req.on('close', end);
    res.on('close', end);
  }

  function age(ts) {
    const s = Math.max(0, Math.round((Date.now() - Date.parse(ts)) / 1000));
    return s < 120 ? `${s}s` : s < 7200 ? `${Math.floor(s / 60)}m` : `${Math.floor(s / 3600)}h`;
  }
  function table(obj) {
    const items = obj.kind === 'PodList' ? obj.items : [obj];
    return { kind: 'Table', apiVersion: 'meta.k8s.io/v1', metadata: { resourceVersion: obj.metadata.resourceVersion },
      columnDefinitions: [
        { name: 'Name', type: 'string', format: 'name', description: 'Name', priority: 0 },
        { name: 'Ready', type: 'string', format: '', description: 'ready containers', priority: 0 },
        { name: 'Status', type: 'string', format: '', description: 'phase or reason', priority: 0 },
        { name: 'Restarts', type: 'string', format: '', description: 'restarts', priority: 0 },
        { name: 'Age', type: 'string', format: '', description: 'age', priority: 0 },
        { name: 'IP', type: 'string', format: '', description: 'pod IP', priority: 1 }],
      rows: items.map((p) => {
        const cs = p.status?.containerStatuses || [];
        const st = p.metadata.deletionTimestamp ? 'Terminating' : p.status?.reason || p.status?.phase || 'Pending';
        return { cells: [p.metadata.name, `${cs.filter((c) => c.ready).length}/${(p.spec.containers || []).length}`, st,
          String(cs.reduce((a, c) => a + (c.restartCount || 0), 0)), age(p.metadata.creationTimestamp), p.status?.podIP || '<none>'],
        object: { kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1', metadata: p.metadata } };
      }) };
  }

  function discovery(p) {
    if (p === '/version') return { major: '1', minor: '32', gitVersion: GITVERSION, gitCommit: 'standin', gitTreeState: 'clean', buildDate: '2026-01-01T00:00:00Z', goVersion: 'go1.23', compiler: 'gc', platform: 'linux/amd64' };
    if (p === '/api') return { kind: 'APIVersions', versions: ['v1'], serverAddressByClientCIDRs: [{ clientCIDR: '0.0.0.0/0', serverAddress: '127.0.0.1' }] };
    if (p === '/apis') return { kind: 'APIGroupList', apiVersion: 'v1', groups: [] };
    if (p === '/api/v1') return { kind: 'APIResourceList', groupVersion: 'v1', resources: [
      { name: 'pods', singularName: 'pod', namespaced: true, kind: 'Pod', verbs: ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch'], shortNames: ['po'], categories: ['all'] },
      { name: 'pods/status', singularName: '', namespaced: true, kind: 'Pod', verbs: ['get'] },
    ] };
    return null;
  }

  async function handle(req, res) {
    const u = new URL(req.url, 'https://x');
    const q = u.searchParams;
    const chunks = [];
    for await (const c of req) { chunks.push(c); if (chunks.reduce((a, b) => a + b.length, 0) > 3 << 20) break; }
    const body = Buffer.concat(chunks).toString('utf8');
    // kubectl asks for server-side printing (as=Table); other clients get the objects
    const asTable = /as=Table/.test(req.headers.accept || '');
    const send = (code, obj) => {
      if (asTable && code === 200 && (obj.kind === 'PodList' || obj.kind === 'Pod')) obj = table(obj);
      audit.push({ verb: req.method, path: u.pathname, query: Object.fromEntries(q), contentType: req.headers['content-type'] || '', code, body });
      const s = JSON.stringify(obj);
      res.writeHead(code, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(s) });
      res.end(s);
    };
    const auth = req.headers.authorization || '';
    if (!auth.startsWith('Bearer ') || !accepted.has(auth.slice(7))) return send(401, status(401, 'Unauthorized', 'Unauthorized'));
    const d = req.method === 'GET' && discovery(u.pathname);
    if (d) return send(200, d);
    if (u.pathname.startsWith('/openapi/')) return send(404, status(404, 'NotFound', 'the server could not find the requested resource'));
    let m = u.pathname.match(/^\/api\/v1(?:\/namespaces\/([a-z0-9-]+))?\/pods(?:\/([a-z0-9.-]+))?(\/status)?$/);
    if (!m) return send(404, status(404, 'NotFound', 'the server could not find the requested resource'));
    const [, ns, name, sub] = m;
    let parsed = null;
    if (body && req.method !== 'PATCH') {
      try { parsed = JSON.parse(body); } catch (e) { return send(400, status(400, 'BadRequest', `error decoding body: ${e.message}`)); }
    }
    if (!name) {
      if (req.method === 'GET') {
        if (truthy(q.get('watch'))) {
          audit.push({ verb: 'WATCH', path: u.pathname, query: Object.fromEntries(q), contentType: '', code: 200 });
          try { return watch(ns, q, req, res); } catch (e) { return send(400, status(400, 'BadRequest', e.message)); }
        }
        try { return send(...list(ns, q)); } catch (e) { return send(400, status(400, 'BadRequest', e.message)); }
      }
      if (!ns) return send(405, status(405, 'MethodNotAllowed', 'the server does not allow this method on the requested resource'));
      if (req.method === 'POST') return send(...createPod(ns, parsed));
      if (req.method === 'DELETE') {
        let match;
        try { match = parseSelector(q.get('labelSelector')); } catch (e) { return send(400, status(400, 'BadRequest', e.message)); }
        const gone = [];
        for (const p of [...pods.values()]) if (p.metadata.namespace === ns && match(p.metadata.labels)) gone.push(deletePod(p, parsed || {})[1]);
        return send(200, { kind: 'PodList', apiVersion: 'v1', metadata: { resourceVersion: String(rv) }, items: gone });
      }
      return send(405, status(405, 'MethodNotAllowed', 'the server does not allow this method on the requested resource'));
    }
    const p = pods.get(`${ns}/${name}`);
    if (!p) return send(404, status(404, 'NotFound', `pods "${name}" not found`, { name, kind: 'pods' }));
    if (req.method === 'GET') return send(200, clone(p));
    if (sub) return send(405, status(405, 'MethodNotAllowed', 'the server does not allow this method on the requested resource'));
    if (req.method === 'PATCH') {
      const r = patchPod(p, (req.headers['content-type'] || '').split(';')[0].trim(), body);
      // api.patchDelayMs: the patch is applied at once, its answer sent late
      // (a client that dies meanwhile never learns it won)
      if (api.patchDelayMs) return later(api.patchDelayMs, () => send(...r));
      return send(...r);
    }
    if (req.method === 'DELETE') return send(...deletePod(p, parsed || {}));
    return send(405, status(405, 'MethodNotAllowed', 'the server does not allow this method on the requested resource'));
  }

  const server = https.createServer({ cert, key }, (req, res) => {
    handle(req, res).catch((e) => { if (!res.headersSent) { res.writeHead(500); res.end(String(e)); } });
  });
  // TLS connections accepted (a client that keeps its connections makes few)
  api.connections = 0;
  server.on('secureConnection', () => { api.connections++; });
  await new Promise((r) => server.listen(port, '127.0.0.1', r));
  api.url = `https://127.0.0.1:${server.address().port}`;
  api.close = async () => {
    for (const t of timers) clearTimeout(t);
    for (const e of api._ends || []) e();
    server.closeAllConnections?.();
    await new Promise((r) => server.close(r));
    pods.clear(); // its objects are gone with it (a kubelet stops their processes)
  };
  return api;
}

// A CA and a server certificate for 127.0.0.1 with openssl, in dir.
export function makeTestCA(dir, execFileSync) {
  const o = (args) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  o(['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '2',
    '-subj', '/CN=tusko-test-ca', '-keyout', 'ca.key', '-out', 'ca.crt']);
  o(['req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-subj', '/CN=kube-apiserver',
    '-keyout', 'server.key', '-out', 'server.csr']);
  const fs = { ext: 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' };
  execFileSync('sh', ['-c', `printf '%s' "$1" > ext.cnf`, 'sh', fs.ext], { cwd: dir });
  o(['x509', '-req', '-in', 'server.csr', '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-days', '2',
    '-extfile', 'ext.cnf', '-out', 'server.crt']);
  return { ca: `${dir}/ca.crt`, cert: `${dir}/server.crt`, key: `${dir}/server.key` };
}
