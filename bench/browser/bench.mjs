// Prints a table of tusko-browserd timings (medians and p95 over N runs) and
// the memory of idle sessions.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { sleep, stopAll, tmpdir } from '../../tests/lib/harness.mjs';
import { printTable, stats } from '../lib/table.mjs';
import { browsers, chromium, startBrowserd } from '../../tests/integration/browserd/brd.mjs';

const rows = [];
function row(what, xs, unit = 'ms', note = '') {
  const st = stats(xs);
  rows.push([what, st.med.toFixed(1), st.p95.toFixed(1), unit, String(st.n), note]);
}
const now = () => Number(process.hrtime.bigint()) / 1e6;
const PAGE = 'data:text/html,' + encodeURIComponent('<title>bench</title><h1>first navigation</h1><p>done</p>');

async function acquire(s) {
  const t0 = now();
  const c = await s.call('/v1/sessions', { method: 'POST' });
  if (c.status !== 200) throw new Error(`create: ${c.status} ${c.text}`);
  const t1 = now();
  const r = await s.call(`/v1/sessions/${c.json.id}/actions`, { json: { steps: [{ action: 'navigate', url: PAGE }] } });
  if (!r.json?.ok) throw new Error(`navigate: ${r.text}`);
  const ms = now() - t0;
  await s.call(`/v1/sessions/${c.json.id}/release`, { method: 'POST' });
  return { ms, create: t1 - t0, nav: ms - (t1 - t0), pool: c.json.pool };
}

// warm: a pool of 2, refilled before each acquire (the refill is not timed)
const warm = await startBrowserd({ env: { BROWSERD_WARM_POOL_SIZE: '2' } });
const warmMs = [], warmCreate = [], warmNav = [];
for (let i = 0; i < 15; i++) {
  while ((await warm.call('/v1/health')).json.warm < 2) await sleep(20);
  await sleep(1000); // the refilled browser's own start-up work settles
  const a = await acquire(warm);
  if (a.pool !== 'warm') throw new Error('expected a warm session');
  warmMs.push(a.ms);
  warmCreate.push(a.create);
  warmNav.push(a.nav);
}
row('acquire, warm (create + first navigation)', warmMs, 'ms', 'pool of 2, refilled between runs');
row('  of which POST /v1/sessions', warmCreate, 'ms', 'takes a pooled browser');
row('  of which the first navigation', warmNav, 'ms', 'a data: page, its load event');
await warm.stop();

// cold: no pool
const cold = await startBrowserd({ env: { BROWSERD_WARM_POOL_SIZE: '0' } });
const coldMs = [];
for (let i = 0; i < 8; i++) {
  const a = await acquire(cold);
  if (a.pool !== 'cold') throw new Error('expected a cold session');
  coldMs.push(a.ms);
}
row('acquire, cold (launch + first navigation)', coldMs, 'ms', 'namespaces, uid, pipe, page attach');

// bare Chromium: start to the same page's DOM on stdout
const bareMs = [];
for (let i = 0; i < 8; i++) {
  const dir = tmpdir('bench-bare-');
  const t0 = now();
  await new Promise((resolve, reject) => {
    const p = spawn(chromium(), ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', `--user-data-dir=${dir}`, '--dump-dom', PAGE], { stdio: ['ignore', 'pipe', 'ignore'], detached: true });
    let out = '';
    p.stdout.on('data', (d) => {
      out += d;
      if (out.includes('</html>')) {
        bareMs.push(now() - t0);
        process.kill(-p.pid, 'SIGKILL'); // its process group: the browser and its children
      }
    });
    p.on('exit', () => (out.includes('first navigation') ? resolve() : reject(new Error('no DOM from chromium'))));
  });
  fs.rmSync(dir, { recursive: true, force: true, maxRetries: 40, retryDelay: 50 });
}
row('  baseline: bare chromium --headless --dump-dom', bareMs, 'ms', 'start to the DOM on stdout, no isolation');

// scrape throughput through the pool (the pool refills in the background)
const sc = await startBrowserd({ env: { BROWSERD_WARM_POOL_SIZE: '2' } });
while ((await sc.call('/v1/health')).json.warm < 2) await sleep(20);
const scrapeMs = [];
const t0 = now();
for (let i = 0; i < 12; i++) {
  const t = now();
  const r = await sc.call('/v1/scrape', { json: { url: PAGE, format: ['markdown'] } });
  if (r.status !== 200) throw new Error(`scrape: ${r.status}`);
  scrapeMs.push(now() - t);
}
const total = now() - t0;
row('POST /v1/scrape, one after another', scrapeMs, 'ms', `${(12000 / total).toFixed(2)} pages/s (each its own browser)`);
const par = [];
const t1 = now();
await Promise.all([0, 1].map(async () => {
  for (let i = 0; i < 6; i++) {
    const t = now();
    await sc.call('/v1/scrape', { json: { url: PAGE, format: ['markdown'] } });
    par.push(now() - t);
  }
}));
row('POST /v1/scrape, 2 at once', par, 'ms', `${(12000 / (now() - t1)).toFixed(2)} pages/s`);
// actions on one live session: navigate + outline
const sess = (await sc.call('/v1/sessions', { method: 'POST' })).json;
const nav = [];
for (let i = 0; i < 20; i++) {
  const t = now();
  const url = PAGE + encodeURIComponent(`<p>page ${i}</p>`); // a new document each time
  const r = await sc.call(`/v1/sessions/${sess.id}/actions`, { json: { steps: [{ action: 'navigate', url }] } });
  if (!r.json?.ok) throw new Error(`navigate: ${r.text}`);
  nav.push(now() - t);
}
row('navigate + outline on a live session', nav, 'ms', 'actions route, a new data: document each');
await sc.call(`/v1/sessions/${sess.id}/release`, { method: 'POST' });
await sc.stop();

// memory of idle sessions: the PSS of every process of each session's Chromium
function pss(pid) {
  try {
    const m = fs.readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8').match(/^Pss:\s+(\d+) kB/m);
    return m ? Number(m[1]) : 0;
  } catch {
    return 0;
  }
}
const mem = await startBrowserd({ env: { BROWSERD_WARM_POOL_SIZE: '0' } });
const ids = [];
for (let i = 0; i < 3; i++) {
  const id = (await mem.call('/v1/sessions', { method: 'POST' })).json.id;
  await mem.call(`/v1/sessions/${id}/actions`, { json: { steps: [{ action: 'navigate', url: PAGE }] } });
  ids.push(id);
}
await sleep(2000);
// each browser and every process under it (renderers, GPU, network service)
const parent = new Map();
for (const d of fs.readdirSync('/proc')) {
  if (!/^\d+$/.test(d)) continue;
  try {
    const st = fs.readFileSync(`/proc/${d}/stat`, 'utf8');
    parent.set(Number(d), Number(st.slice(st.lastIndexOf(')') + 2).split(' ')[1]));
  } catch {}
}
const under = (root) => [...parent.keys()].filter((p) => {
  for (let q = p, k = 0; q > 1 && k < 64; q = parent.get(q), k++) if (q === root) return true;
  return false;
});
const byProfile = new Map();
let procs = 0;
for (const b of browsers(mem.stateDir).filter((x) => x.main)) {
  const all = under(b.pid);
  procs += all.length;
  byProfile.set(b.profile, all.reduce((a, p) => a + pss(p), 0));
}
row('memory of an idle session (PSS, all its processes)', [...byProfile.values()].map((k) => k / 1024), 'MiB', `${byProfile.size} sessions, ${procs} processes in all`);
await mem.stop();
await stopAll();

printTable(`tusko-browserd on ${os.cpus().length} CPUs (${os.cpus()[0].model.trim()}), build/ (-O2), ${path.basename(chromium())} ${fs.realpathSync(chromium())}`, rows);
const wm = stats(warmMs).med, cm = stats(coldMs).med, bm = stats(bareMs).med;
console.log(`warm acquire p50 ${wm.toFixed(1)} ms (target <= 100); cold p50 ${(cm / bm).toFixed(2)}x the bare start (target <= 1.2x)`);
