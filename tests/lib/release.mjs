// A previous release of tusko, built from its commit: for the upgrade test
// (tests/integration/app/upgrade.test.mjs).
//
//   const old = buildRelease(PREVIOUS);   // { commit, tag, dir, bin(name) }
//
// A clone made by CI may carry no tags, so a release is named by its full
// commit id (the tag is beside it, for people). The commit is checked out with
// `git worktree add --detach` in a temporary folder, only its `tusko` is built
// there (`make -j2 build/tusko`, a couple of minutes on 2 cores) and copied
// into TUSKO_RELEASE_CACHE/<commit>/ (default tests/out/release/); the next run
// finds it there and builds nothing. A clone without the commit (a shallow
// one) fetches it from origin first.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

import { OUT, ROOT, tmpdir } from './harness.mjs';

// The release the upgrade test starts from: the one before this build.
export const PREVIOUS = { tag: 'v0.1.0', commit: '6c098528b1ef01fa60d1cf7c80db87cb6c376fc8' };

// tusko alone: the upgrade is of its database (the sandbox service has its own)
const PROGRAMS = ['tusko'];
const CACHE = path.resolve(ROOT, process.env.TUSKO_RELEASE_CACHE || path.join(OUT, 'release'));

function git(args, opts = {}) {
  const r = spawnSync('git', ['-C', ROOT, ...args], { encoding: 'utf8', ...opts });
  return { ok: r.status === 0, out: (r.stdout || '').trim(), err: (r.stderr || '').trim() };
}

export function buildRelease({ commit, tag }) {
  if (!/^[0-9a-f]{40}$/.test(commit)) throw new Error(`a release is pinned by its full commit id, not ${commit}`);
  const dir = path.join(CACHE, commit);
  const bin = (name) => path.join(dir, name);
  const stamp = path.join(dir, 'built');
  if (fs.existsSync(stamp) && PROGRAMS.every((p) => fs.existsSync(bin(p)))) return { commit, tag, dir, bin, cached: true };

  if (!git(['cat-file', '-e', `${commit}^{commit}`]).ok) {
    const f = git(['fetch', '--quiet', 'origin', commit]);
    if (!f.ok) throw new Error(`commit ${commit} (${tag}) is not in this clone and could not be fetched: ${f.err}`);
  }
  const tmp = tmpdir('tusko-release-');
  const src = path.join(tmp, 'src');
  const add = git(['worktree', 'add', '--detach', src, commit]);
  if (!add.ok) throw new Error(`git worktree add ${commit}: ${add.err}`);
  try {
    // the release's own defaults: not this run's sanitizer build or folders
    const env = { ...process.env, MAKEFLAGS: '' };
    for (const k of ['SAN', 'BUILD', 'MAKELEVEL', 'MFLAGS']) delete env[k];
    const m = spawnSync('make', ['-j2', ...PROGRAMS.map((p) => `build/${p}`)], { cwd: src, encoding: 'utf8', env, maxBuffer: 64 << 20 });
    if (m.status !== 0) throw new Error(`make in ${src} (${tag}, ${commit}) failed:\n${(m.stderr || '').slice(-4000)}`);
    fs.rmSync(dir, { recursive: true, force: true });
    fs.mkdirSync(dir, { recursive: true });
    for (const p of PROGRAMS) fs.copyFileSync(path.join(src, 'build', p), bin(p));
    for (const p of PROGRAMS) fs.chmodSync(bin(p), 0o755);
    fs.writeFileSync(stamp, `${tag} ${commit}\n`);
  } finally {
    git(['worktree', 'remove', '--force', src]);
    fs.rmSync(tmp, { recursive: true, force: true });
    git(['worktree', 'prune']);
  }
  return { commit, tag, dir, bin, cached: false };
}
