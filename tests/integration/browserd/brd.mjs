// Helpers for the tusko-browserd tests: start the service on a free port with
// a fresh state folder, and look at the Chromium processes it runs on the host
// (found by the profile folder on their command line).
import fs from 'node:fs';
import path from 'node:path';

import { api, sleep, startProgram, tmpdir } from '../../lib/harness.mjs';

export const KEY = 'k-browserd-test-key-0123456789abcdef';

export function chromium() {
  if (process.env.BROWSERD_CHROMIUM) return process.env.BROWSERD_CHROMIUM;
  return fs.existsSync('/usr/lib/chromium/chromium') ? '/usr/lib/chromium/chromium' : '/usr/bin/chromium';
}

export async function startBrowserd({ env = {}, stateDir } = {}) {
  stateDir = stateDir || tmpdir('brd-');
  fs.chmodSync(stateDir, 0o711);
  const p = await startProgram('tusko-browserd', {
    env: {
      BROWSERD_API_KEY: KEY,
      BROWSERD_LISTEN: '127.0.0.1:0',
      BROWSERD_STATE_DIR: stateDir,
      BROWSERD_CHROMIUM: chromium(),
      BROWSERD_WARM_POOL_SIZE: '0',
      ...env,
    },
  });
  p.stateDir = stateDir;
  p.call = (pth, opts = {}) => api(p.url, pth, { ...opts, headers: { 'steel-api-key': KEY, ...(opts.headers || {}) } });
  return p;
}

// Host processes whose command line names a profile under stateDir:
// [{ pid, main }] where main is the browser process itself (not a --type= child).
export function browsers(stateDir) {
  const out = [];
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    let cmd;
    try {
      cmd = fs.readFileSync(`/proc/${d}/cmdline`, 'utf8').split('\0');
    } catch {
      continue;
    }
    if (!cmd.some((a) => a.startsWith(`--user-data-dir=${stateDir}/`))) continue;
    out.push({ pid: Number(d), main: !cmd.some((a) => a.startsWith('--type=')), profile: cmd.find((a) => a.startsWith('--user-data-dir=')).slice(16) });
  }
  return out;
}

export function profiles(stateDir) {
  const d = path.join(stateDir, 'profiles');
  return fs.existsSync(d) ? fs.readdirSync(d).filter((n) => !n.endsWith('.log')) : [];
}

export async function until(fn, ms = 15000, what = 'condition') {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}
