// Docker-runtime helpers for the shared sandboxd suites (sbx.mjs delegates to
// these when SBX_TEST_RUNTIME=docker): what a sandbox holds on the host when it
// is a container — its container and workspace volume (asked of the engine with
// the docker CLI, as an operator would: `docker ps -a`, `docker volume ls`), its
// cgroups (found from its process), its mounts (the volume's, under the engine's
// data root) — and a way to plant a half-made leftover for the restart test.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

export const LABEL_SERVICE = 'io.tusko.sandboxd';
export const LABEL_ID = 'io.tusko.sandbox.id';

// The environment tusko-sandboxd needs to reach the engine the tests use.
export function env() {
  return process.env.DOCKER_HOST ? { DOCKER_HOST: process.env.DOCKER_HOST } : {};
}

export function docker(...args) {
  return execFileSync('docker', args, { encoding: 'utf8', env: process.env, stdio: ['ignore', 'pipe', 'pipe'] }).trim();
}

const lines = (s) => (s ? s.split('\n').filter(Boolean) : []);

// `docker ps -a` / `docker volume ls` of one sandbox (by its id label).
export function containersOf(id) {
  return lines(docker('ps', '-aq', '--no-trunc', '--filter', `label=${LABEL_ID}=${id}`));
}
export function volumesOf(id) {
  return lines(docker('volume', 'ls', '-q', '--filter', `label=${LABEL_ID}=${id}`));
}

export function inspect(ref) {
  return JSON.parse(docker('inspect', ref))[0];
}

// Sandbox id → its container's cgroup folders, remembered while it runs so that
// a test can prove they are gone after the container is.
const cgroupDirs = new Map();

function cgroupDirsOfPid(pid) {
  const dirs = [];
  let text = '';
  try {
    text = fs.readFileSync(`/proc/${pid}/cgroup`, 'utf8');
  } catch {
    return dirs;
  }
  for (const l of lines(text)) {
    const [, ctrls, p] = l.split(':');
    if (!p || p === '/') continue;
    if (ctrls === '') {
      // cgroup v2: the unified tree, mounted beside v1 (hybrid) or alone
      for (const root of ['/sys/fs/cgroup/unified', '/sys/fs/cgroup']) dirs.push({ ctrl: '', dir: path.join(root, p) });
      continue;
    }
    for (const c of ctrls.split(',')) {
      const name = c.replace(/^name=/, '');
      dirs.push({ ctrl: name, dir: path.join('/sys/fs/cgroup', name, p) });
    }
  }
  return dirs.filter((d) => fs.existsSync(d.dir));
}

// Finds the sandbox's container (by label) and remembers its cgroups.
export function remember(id, pid) {
  if (cgroupDirs.has(id) && cgroupDirs.get(id).length) return cgroupDirs.get(id);
  if (!pid) {
    const c = containersOf(id)[0];
    if (!c) return cgroupDirs.get(id) || [];
    pid = inspect(c).State.Pid;
  }
  const dirs = pid ? cgroupDirsOfPid(pid) : [];
  if (dirs.length) cgroupDirs.set(id, dirs);
  return dirs;
}

export function cgroupsOf(id) {
  return remember(id)
    .map((d) => d.dir)
    .filter((d) => fs.existsSync(d));
}

export function cgroupFile(id, ctrl, file) {
  const d = remember(id).find((x) => x.ctrl === ctrl);
  const p = d && path.join(d.dir, file);
  return p && fs.existsSync(p) ? fs.readFileSync(p, 'utf8').trim() : null;
}

// Mount lines that are not a Docker engine's (any engine's data root layout:
// overlay2/<id>/merged, volumes/<name>/_data, netns/<id>).
const ENGINE_MOUNT = / \S*\/(overlay2\/[0-9a-f]+\/merged|volumes\/[^ /]+\/_data|netns\/[0-9a-f]+) /;
export function withoutEngineMounts(all) {
  return all.filter((l) => !ENGINE_MOUNT.test(l));
}

export function footprint(stateDir, id, ns, processesIn) {
  return {
    dir: fs.existsSync(path.join(stateDir, 'sandboxes', id)),
    cgroups: cgroupsOf(id).length,
    processes: ns ? processesIn(ns) : 0,
    mounts: fs.readFileSync('/proc/self/mountinfo', 'utf8').split('\n').filter((l) => l.includes(id)).length,
    containers: containersOf(id).length,
    volumes: volumesOf(id).length,
  };
}

export const GONE = { dir: false, cgroups: 0, processes: 0, mounts: 0, containers: 0, volumes: 0 };

// A half-made sandbox as a crash leaves it: a created (never started) container
// and a volume carrying the service's labels, with no record on disk.
export function plantLeftover(refId, id) {
  const tag = inspect(containersOf(refId)[0]).Config.Labels[LABEL_SERVICE];
  const image = inspect(containersOf(refId)[0]).Config.Image;
  const labels = ['--label', `${LABEL_SERVICE}=${tag}`, '--label', `${LABEL_ID}=${id}`];
  docker('volume', 'create', ...labels, `tusko-ws-${id}`);
  docker('create', ...labels, '--network', 'none', '--name', `tusko-${id}`, image, 'true');
}

export function leftovers(id) {
  return containersOf(id).length + volumesOf(id).length + cgroupsOf(id).length;
}
