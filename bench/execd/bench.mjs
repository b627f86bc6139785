// Prints a table of tusko-execd timings (medians and p95 over N runs).
import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { startProgram, stopAll, tmpdir } from '../../tests/lib/harness.mjs';
import { printTable, stats } from '../lib/table.mjs';

const TOKEN = 'bench-token-0123456789';
const H = { 'X-EXECD-ACCESS-TOKEN': TOKEN };
const rows = [];

function row(what, xs, unit = 'ms', note = '') {
  const st = stats(xs);
  rows.push([what, st.med.toFixed(2), st.p95.toFixed(2), unit, String(st.n), note]);
}
// Throughput from times: the median speed and the speed of the p95 (slow) time.
function rowSpeed(what, ms, mib, note = '') {
  const st = stats(ms);
  rows.push([what, (mib / (st.med / 1000)).toFixed(1), (mib / (st.p95 / 1000)).toFixed(1), 'MiB/s', String(st.n), note]);
}
async function time(fn) {
  const t = process.hrtime.bigint();
  await fn();
  return Number(process.hrtime.bigint() - t) / 1e6;
}
async function drain(res) {
  const r = res.body.getReader();
  for (;;) if ((await r.read()).done) break;
}

const ws = tmpdir('tusko-bench-execd-');
const env = { EXECD_LISTEN: '127.0.0.1:0', EXECD_WORKSPACE: ws, EXECD_ACCESS_TOKEN: TOKEN };

// start-up: until the listening line
const starts = [];
for (let i = 0; i < 10; i++) {
  const t = process.hrtime.bigint();
  const p = await startProgram('tusko-execd', { env });
  starts.push(Number(process.hrtime.bigint() - t) / 1e6);
  await p.stop();
}
row('start-up to the listening line', starts, 'ms', 'harness polls every 20 ms');

const ex = await startProgram('tusko-execd', { env });
const U = ex.url;

const ping = [];
for (let i = 0; i < 300; i++) ping.push(await time(async () => drain(await fetch(U + '/ping', { headers: H }))));
row('GET /ping', ping);

const post = (p, json) => fetch(U + p, { method: 'POST', headers: { ...H, 'content-type': 'application/json' }, body: JSON.stringify(json) });
const cmd = [];
for (let i = 0; i < 150; i++) cmd.push(await time(async () => drain(await post('/command', { command: 'true' }))));
row('POST /command "true" (streamed, to the end)', cmd);
const local = [];
for (let i = 0; i < 150; i++) local.push(await time(async () => spawnSync('/bin/bash', ['-c', 'true'])));
row('  baseline: spawnSync bash -c true in node', local);

const sid = (await (await post('/session', {})).json()).session_id;
const sess = [];
for (let i = 0; i < 150; i++) sess.push(await time(async () => drain(await post(`/session/${sid}/run`, { command: 'true' }))));
row('POST /session/{id}/run "true"', sess, 'ms', 'one long-lived bash');

const lines = [];
for (let i = 0; i < 5; i++) lines.push(await time(async () => drain(await post('/command', { command: 'seq 1 100000' }))));
row('100 000 stdout lines streamed', lines, 'ms', '1 event per line');

const ctxT = [];
let ctx;
for (let i = 0; i < 3; i++) {
  ctxT.push(await time(async () => {
    ctx = (await (await post('/code/context', { language: 'python' })).json()).id;
  }));
  if (i < 2) await fetch(U + `/code/contexts/${ctx}`, { method: 'DELETE', headers: H });
}
row('POST /code/context (kernel ready)', ctxT, 'ms', 'ipykernel start');
const code = [];
for (let i = 0; i < 50; i++) code.push(await time(async () => drain(await post('/code', { context: { id: ctx }, code: '1+1' }))));
row('POST /code "1+1"', code);

const big = crypto.randomBytes(64 * 1024 * 1024);
const up = [];
for (let i = 0; i < 3; i++) {
  up.push(await time(async () => {
    const form = new FormData();
    form.append('metadata', new Blob([JSON.stringify({ path: 'big.bin' })]), 'metadata');
    form.append('file', new Blob([big]), 'big.bin');
    await drain(await fetch(U + '/files/upload', { method: 'POST', headers: H, body: form }));
  }));
}
rowSpeed('upload 64 MiB (multipart, streamed to disk)', up, 64);
const down = [];
for (let i = 0; i < 3; i++) down.push(await time(async () => drain(await fetch(U + '/files/download?path=big.bin', { headers: H }))));
rowSpeed('download 64 MiB', down, 64);
const cp = [];
for (let i = 0; i < 3; i++) cp.push(await time(async () => fs.copyFileSync(path.join(ws, 'big.bin'), path.join(ws, 'copy.bin'))));
rowSpeed('  baseline: local file copy 64 MiB', cp, 64);

await stopAll();
fs.rmSync(ws, { recursive: true, force: true });

printTable(`tusko-execd on ${os.cpus().length} CPUs (${os.cpus()[0].model.trim()}), build/ (-O2)`, rows);
console.log('(MiB/s rows: "p95" is the speed of the 95th-percentile time, the slow end)');
