// Helpers for the tusko-sandboxd tests: start the service on a free port with a
// fresh state directory, call its API, run commands in a sandbox through the
// server proxy, and look at what a sandbox holds on the host (its init, cgroups,
// state folder) so tests can prove a deletion leaves nothing behind.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

import { sleep, startProgram, tmpdir } from '../../lib/harness.mjs';
import * as dk from './docker.mjs';

// The runtime these suites run against: the *.docker.test.mjs files set
// SBX_TEST_RUNTIME=docker and import the shared suites; the helpers below that
// look at the host then ask docker.mjs (containers, volumes, their cgroups).
export const RUNTIME = process.env.SBX_TEST_RUNTIME || 'native';
const DOCKER = RUNTIME === 'docker';
// The comm of a sandbox's pid 1, and the host mounts a live sandbox has
// (docker mounts its workspace volume in the host's namespace).
export const INIT_COMM = DOCKER ? 'tusko-execd' : 'sbx-init';
export const HOST_MOUNTS = DOCKER ? 1 : 0;
// test() options for what only the native runtime has (user namespaces, ...).
export const NATIVE_ONLY = DOCKER ? { skip: 'native runtime only' } : {};

export const KEY = 'k-sandboxd-test-key-0123456789abcdef';
export const EXECD_PORT = 44772;

export function imageDir() {
  const d = process.env.SANDBOX_IMAGE_DIR;
  if (!d || !fs.existsSync(d))
    throw new Error('SANDBOX_IMAGE_DIR is not set or missing: tests/setup.d/10-sandbox-image.sh builds the image (images/sandbox/build.sh)');
  return d;
}

// Starts tusko-sandboxd. Returns the harness handle plus stateDir and a client.
export async function startSandboxd({ env = {}, stateDir } = {}) {
  const own = !stateDir;
  stateDir = stateDir || tmpdir('sbxd-');
  const p = await startProgram('tusko-sandboxd', {
    env: {
      SANDBOXD_API_KEY: KEY,
      SANDBOXD_LISTEN: '127.0.0.1:0',
      SANDBOXD_STATE_DIR: stateDir,
      SANDBOX_IMAGE_DIR: imageDir(),
      SANDBOX_WARM_POOL_SIZE: '0',
      SANDBOX_RUNTIME: RUNTIME,
      ...(DOCKER ? dk.env() : {}),
      ...env,
    },
  });
  p.stateDir = stateDir;
  p.api = client(p.url);
  if (own) {
    // a folder made here goes with a clean stop (after its sandboxes were deleted)
    const stop = p.stop.bind(p);
    p.stop = async (...a) => {
      const r = await stop(...a);
      removeStateDir(stateDir);
      return r;
    };
  }
  return p;
}

// Removes a state folder whose sandboxes are all gone (a live one keeps it).
export function removeStateDir(stateDir) {
  const sb = path.join(stateDir, 'sandboxes');
  if (fs.existsSync(sb) && fs.readdirSync(sb).length) return;
  fs.rmSync(stateDir, { recursive: true, force: true });
}

export function client(base, key = KEY) {
  const tokens = new Map();
  async function call(method, p, json, headers = {}) {
    const h = { ...headers };
    if (key !== null) h['OPEN-SANDBOX-API-KEY'] = key;
    let body;
    if (json !== undefined) {
      h['content-type'] = 'application/json';
      body = JSON.stringify(json);
    }
    const res = await fetch(base + p, { method, headers: h, body });
    const text = await res.text();
    let parsed = null;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch {
      parsed = null;
    }
    return { status: res.status, headers: res.headers, text, json: parsed };
  }
  const api = {
    base,
    call,
    create: (body = {}) =>
      call('POST', '/v1/sandboxes', { image: { uri: 'tusko-sandbox' }, entrypoint: ['tail', '-f', '/dev/null'], ...body }),
    get: (id) => call('GET', `/v1/sandboxes/${id}`),
    del: (id) => call('DELETE', `/v1/sandboxes/${id}`),
    list: (qs = '') => call('GET', `/v1/sandboxes${qs}`),
    async token(id) {
      if (!tokens.has(id)) {
        const r = await call('GET', `/v1/sandboxes/${id}/endpoints/${EXECD_PORT}?use_server_proxy=true`);
        assert.equal(r.status, 200, r.text);
        tokens.set(id, r.json.headers['X-EXECD-ACCESS-TOKEN']);
      }
      return tokens.get(id);
    },
    // Runs a command through the server proxy; resolves when the stream ends.
    async exec(id, command, opts = {}) {
      const token = await api.token(id);
      const res = await fetch(`${base}/v1/sandboxes/${id}/proxy/${EXECD_PORT}/command`, {
        method: 'POST',
        headers: { 'OPEN-SANDBOX-API-KEY': key, 'X-EXECD-ACCESS-TOKEN': token, 'content-type': 'application/json' },
        body: JSON.stringify({ command, ...opts }),
      });
      const text = await res.text();
      if (res.status !== 200) return { status: res.status, text, stdout: '', stderr: '', events: [] };
      return { status: 200, ...parseEvents(text) };
    },
    // Starts a command and returns an async iterator of its events as they come.
    async stream(id, command, opts = {}) {
      const token = await api.token(id);
      const res = await fetch(`${base}/v1/sandboxes/${id}/proxy/${EXECD_PORT}/command`, {
        method: 'POST',
        headers: { 'OPEN-SANDBOX-API-KEY': key, 'X-EXECD-ACCESS-TOKEN': token, 'content-type': 'application/json' },
        body: JSON.stringify({ command, ...opts }),
      });
      assert.equal(res.status, 200);
      return eventIterator(res.body);
    },
  };
  return api;
}

// execd frames events as bare JSON objects separated by blank lines (or SSE data: lines).
export function parseEvents(text) {
  const events = [];
  for (const block of text.split(/\n\n+/)) {
    const line = block.trim().replace(/^data:\s*/, '');
    if (!line.startsWith('{')) continue;
    try {
      events.push(JSON.parse(line));
    } catch {
      /* partial */
    }
  }
  const out = (t) => events.filter((e) => e.type === t).map((e) => e.text).join('\n');
  const err = events.find((e) => e.type === 'error');
  return {
    events,
    stdout: out('stdout'),
    stderr: out('stderr'),
    complete: events.some((e) => e.type === 'execution_complete'),
    exitCode: err ? Number(err.error?.evalue) : events.some((e) => e.type === 'execution_complete') ? 0 : null,
  };
}

async function* eventIterator(body) {
  const dec = new TextDecoder();
  let buf = '';
  for await (const chunk of body) {
    buf += dec.decode(chunk, { stream: true });
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const block = buf.slice(0, i).trim().replace(/^data:\s*/, '');
      buf = buf.slice(i + 2);
      if (block.startsWith('{')) yield JSON.parse(block);
    }
  }
}

// Polls fn until it returns a truthy value (or throws after timeoutMs).
export async function until(fn, { timeoutMs = 15000, stepMs = 25, what = 'condition' } = {}) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(stepMs);
  }
}

// ---------- what a sandbox holds on the host ----------

export function record(stateDir, id) {
  const p = path.join(stateDir, 'sandboxes', id, 'sandbox.json');
  return fs.existsSync(p) ? JSON.parse(fs.readFileSync(p, 'utf8')) : null;
}

// Pool members that are started and ready to hand out.
export function poolReady(stateDir) {
  const dir = path.join(stateDir, 'sandboxes');
  let n = 0;
  for (const id of fs.existsSync(dir) ? fs.readdirSync(dir) : []) {
    let r = null;
    try {
      r = record(stateDir, id);
    } catch {
      /* being replaced */
    }
    if (r && r.pool && r.runtime) n++;
  }
  return n;
}

export function initPid(stateDir, id) {
  const r = record(stateDir, id);
  const pid = r && r.runtime ? r.runtime.pid : null;
  if (DOCKER && pid) dk.remember(id, pid); // its cgroups, to check them after deletion
  return pid;
}

export function alive(pid) {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  // a zombie counts as gone
  try {
    const st = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !/\) Z /.test(st);
  } catch {
    return false;
  }
}

export function pidns(pid) {
  try {
    return fs.readlinkSync(`/proc/${pid}/ns/pid`);
  } catch {
    return null;
  }
}

// Host processes inside a pid namespace.
export function processesIn(ns) {
  let n = 0;
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      if (fs.readlinkSync(`/proc/${d}/ns/pid`) === ns && !/\) Z /.test(fs.readFileSync(`/proc/${d}/stat`, 'utf8'))) n++;
    } catch {
      /* gone meanwhile */
    }
  }
  return n;
}

const CGROUP_CONTROLLERS = ['memory', 'pids', 'cpu', 'freezer'];

// Every cgroup folder named id under any tusko-sandboxd.* group (v1 and v2).
export function cgroupsOf(id) {
  if (DOCKER) return dk.cgroupsOf(id);
  const found = [];
  const roots = [];
  for (const c of CGROUP_CONTROLLERS) roots.push(`/sys/fs/cgroup/${c}`);
  roots.push('/sys/fs/cgroup', '/sys/fs/cgroup/unified');
  for (const r of roots) {
    let groups = [];
    try {
      groups = fs.readdirSync(r).filter((g) => g.startsWith('tusko-sandboxd.'));
    } catch {
      continue;
    }
    for (const g of groups) if (fs.existsSync(path.join(r, g, id))) found.push(path.join(r, g, id));
  }
  return found;
}

export function cgroupFile(id, ctrl, file) {
  if (DOCKER) return dk.cgroupFile(id, ctrl, file);
  for (const g of fs.readdirSync(`/sys/fs/cgroup/${ctrl}`).filter((x) => x.startsWith('tusko-sandboxd.'))) {
    const p = path.join(`/sys/fs/cgroup/${ctrl}`, g, id, file);
    if (fs.existsSync(p)) return fs.readFileSync(p, 'utf8').trim();
  }
  return null;
}

// Host mounts, without a Docker engine's own (overlays, volumes, netns): an
// engine on this machine (ours for the docker runtime, or anyone's) mounts and
// unmounts those as its containers come and go; a docker sandbox's own are
// counted by footprint().
export function hostMounts() {
  return dk.withoutEngineMounts(fs.readFileSync('/proc/self/mountinfo', 'utf8').trim().split('\n'));
}

// Everything the host holds for a sandbox, for before/after comparisons; GONE
// is what it is once the sandbox is deleted (docker: container and volume too).
export const GONE = DOCKER ? dk.GONE : { dir: false, cgroups: 0, processes: 0, mounts: 0 };
export function footprint(stateDir, id, ns) {
  if (DOCKER) return dk.footprint(stateDir, id, ns, processesIn);
  return {
    dir: fs.existsSync(path.join(stateDir, 'sandboxes', id)),
    cgroups: cgroupsOf(id).length,
    processes: ns ? processesIn(ns) : 0,
    mounts: hostMounts().filter((l) => l.includes(id)).length,
  };
}

// A half-made sandbox's leftover in the runtime (native: a stray cgroup beside
// refId's; docker: a labelled container and volume), and how many remain.
export function plantLeftover(refId, id) {
  if (DOCKER) return dk.plantLeftover(refId, id);
  const group = fs.readdirSync('/sys/fs/cgroup/pids').find((g) => g.startsWith('tusko-sandboxd.') && fs.existsSync(`/sys/fs/cgroup/pids/${g}/${refId}`));
  fs.mkdirSync(`/sys/fs/cgroup/pids/${group}/${id}`);
}
export function leftovers(id) {
  return DOCKER ? dk.leftovers(id) : cgroupsOf(id).length;
}
