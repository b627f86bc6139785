// bench/snapshot: MB/s of a snapshot (POST /api/sessions/{id}/snapshots) and a
// restore of a 200 MiB workspace (100 MiB random bytes, 100 MiB of text, 200
// files) against s3rver on loopback, beside `tar czf` of the same tree in the
// same sandbox plus `curl --aws-sigv4 -T` of the archive to the same store;
// tusko's peak RSS before and after. Target: within 1.5x of tar czf + curl.
import { execFile } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

import { printTable } from '../lib/table.mjs';
import { stopAll, tmpdir } from '../../tests/lib/harness.mjs';
import { s3Env, startS3rver } from '../../tests/lib/s3.mjs';
import { KEY, startSandboxd } from '../../tests/integration/sandboxd/sbx.mjs';
import { api, makeUser, newSession, startModels, startTusko, turn } from '../../tests/integration/agent/lib.mjs';

const MIB = 1024 * 1024;
const RUNS = Number(process.env.RUNS || 3);
const call = (name, args) => ({ steps: [{ tool_calls: [{ name, arguments: args }] }, { text: '{{tool_result}}' }] });
const fill =
  'mkdir -p data text && for i in $(seq 1 100); do head -c 1048576 /dev/urandom > data/r$i.bin; done && ' +
  'for i in $(seq 1 100); do yes "line $i of a text file that compresses well enough" | head -c 1048576 > text/t$i.txt; done && du -sm .';
const SC = {
  fill: call('execute_command', { command: fill }),
  touch: call('execute_command', { command: 'date > stamp.txt' }),
  tarczf: call('execute_command', { command: 's=$(date +%s%N); tar czf /tmp/base.tgz -C /workspace --exclude=./stamp.txt . ; e=$(date +%s%N); echo "TARMS $(( (e - s) / 1000000 )) SIZE $(stat -c %s /tmp/base.tgz)"' }),
};
const hwm = (pid) => Number(/VmHWM:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) / 1024;
const run = (cmd, args) => new Promise((res, rej) => execFile(cmd, args, { maxBuffer: 1 << 20 }, (e, so, se) => (e ? rej(new Error(se || e.message)) : res(so))));

const ms = await startModels({ scenarios: SC });
const sbx = await startSandboxd({ env: { SANDBOX_WARM_POOL_SIZE: '0' } });
const rv = await startS3rver();
const stack = await startTusko(ms, { env: { OPENSANDBOX_URL: sbx.url, OPENSANDBOX_API_KEY: KEY, ...s3Env(rv), SNAPSHOT_KEEP_LAST: '100' }, tag: 'bench-snapshot' });
const base = stack.tusko.url;
const pid = stack.tusko.proc.pid;
const u = makeUser(stack.pg);
const sid = await newSession(base, u);
for (let i = 0; i < 100 && !/snapshots on/.test(stack.tusko.log()); i++) await new Promise((r) => setTimeout(r, 50));
await turn(base, u, sid, '#scenario:fill', {}, { timeoutMs: 300000 });
const rss0 = hwm(pid);

const snapMs = [], restoreMs = [], tarMs = [], curlMs = [];
let bytes = 0, archive = 0;
for (let i = 0; i < RUNS; i++) {
  await turn(base, u, sid, '#scenario:touch');
  let t = performance.now();
  const s = await api(base, `/api/sessions/${sid}/snapshots`, { method: 'POST', headers: u.auth });
  if (s.status !== 201) throw new Error(`snapshot: ${s.status} ${s.text}`);
  snapMs.push(performance.now() - t);
  archive = s.json.bytes;
  t = performance.now();
  const r = await api(base, `/api/sessions/${sid}/snapshots/${s.json.id}/restore`, { method: 'POST', json: { confirm: true }, headers: u.auth });
  if (r.status !== 200) throw new Error(`restore: ${r.status} ${r.text}`);
  restoreMs.push(performance.now() - t);
  bytes = r.json.bytes;
  // the baseline: tar czf in the sandbox, then curl of the same archive
  const tz = await turn(base, u, sid, '#scenario:tarczf', {}, { timeoutMs: 300000 });
  const out = tz.events.find((e) => e.event === 'tool_end').json.result;
  tarMs.push(Number(/TARMS (\d+)/.exec(out)[1]));
  const dir = tmpdir('bench-snap-');
  const f = path.join(dir, 'a.tgz');
  fs.writeFileSync(f, (await rv.get(s.json.key)).body);
  const h = crypto.createHash('sha256').update(fs.readFileSync(f)).digest('hex');
  t = performance.now();
  await run('curl', ['-sf', '--aws-sigv4', 'aws:amz:us-east-1:s3', '-u', 'S3RVER:S3RVER', '-H', `x-amz-content-sha256: ${h}`, '-T', f, `${rv.url}/${rv.bucket}/bench/curl-${i}.tgz`]);
  curlMs.push(performance.now() - t);
  fs.rmSync(dir, { recursive: true, force: true });
}
const rss1 = hwm(pid);
const med = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];
const mbs = (ms_) => ((bytes / MIB) / (ms_ / 1000)).toFixed(1);
const base_ = med(tarMs) + med(curlMs);
printTable(`bench/snapshot: ${(bytes / MIB).toFixed(0)} MiB workspace, archive ${(archive / MIB).toFixed(1)} MiB, ${RUNS} runs, s3rver on loopback`, [
  ['snapshot (API, end to end)', (med(snapMs) / 1000).toFixed(2), (Math.max(...snapMs) / 1000).toFixed(2), 's', String(RUNS), `${mbs(med(snapMs))} MB/s of workspace; ${(med(snapMs) / base_).toFixed(2)}x tar czf + curl`],
  ['tar czf in the sandbox', (med(tarMs) / 1000).toFixed(2), (Math.max(...tarMs) / 1000).toFixed(2), 's', String(RUNS), `${mbs(med(tarMs))} MB/s`],
  ['curl --aws-sigv4 -T the archive', (med(curlMs) / 1000).toFixed(2), (Math.max(...curlMs) / 1000).toFixed(2), 's', String(RUNS), ''],
  ['tar czf + curl', (base_ / 1000).toFixed(2), '-', 's', String(RUNS), `${mbs(base_)} MB/s`],
  ['restore (API, end to end)', (med(restoreMs) / 1000).toFixed(2), (Math.max(...restoreMs) / 1000).toFixed(2), 's', String(RUNS), `${mbs(med(restoreMs))} MB/s`],
  ['tusko peak RSS (VmHWM)', rss1.toFixed(0), '-', 'MiB', '1', `${rss0.toFixed(0)} MiB before the snapshots`],
]);
await stopAll();
await rv.close();
await ms.close();
process.exit(0);
