// tusko-execd start-up and shut-down: no kernel starts before a code context is
// asked for; a unix socket listener works; SIGTERM with commands, a session, a
// kernel and a metrics watch all running ends them, exits 0 with a clean
// sanitizer log, and leaves no process and no runtime files behind.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { after, describe, test } from 'node:test';

import { stopAll, tmpdir } from '../../lib/harness.mjs';
import { TOKEN, pidAlive, req, startExecd, stream, texts, until } from './lib.mjs';

after(stopAll);

function childrenOf(pid) {
  // every descendant of pid, from /proc
  const kids = new Map();
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const st = fs.readFileSync(`/proc/${d}/stat`, 'utf8');
      const ppid = Number(st.slice(st.lastIndexOf(')') + 2).split(' ')[1]);
      if (!kids.has(ppid)) kids.set(ppid, []);
      kids.get(ppid).push(Number(d));
    } catch {
      /* gone */
    }
  }
  const out = [];
  const walk = (p) => {
    for (const c of kids.get(p) || []) {
      out.push(c);
      walk(c);
    }
  };
  walk(pid);
  return out;
}

describe('lifecycle', () => {
  test('no Python kernel runs until a code context is asked for', async () => {
    const ex = await startExecd();
    const r = await stream(ex.url, '/command', { command: 'echo up' });
    assert.deepEqual(texts(r.events, 'stdout'), ['up']);
    const kids = childrenOf(ex.proc.pid);
    assert.deepEqual(kids, [], `execd has children at rest: ${kids}`);
    await ex.stop();
  });

  test('the access token is not left in execd\'s environment block', async () => {
    const ex = await startExecd();
    const envBlock = fs.readFileSync(`/proc/${ex.proc.pid}/environ`, 'latin1');
    assert.ok(envBlock.includes('EXECD_ACCESS_TOKEN='));
    assert.ok(!envBlock.includes(TOKEN));
    assert.equal((await req(ex.url, '/ping')).status, 200); // the token still works
    await ex.stop();
  });

  test('serves on a unix socket', async () => {
    const dir = tmpdir('tusko-execd-sock-');
    const sock = path.join(dir, 'execd.sock');
    const ex = await startExecd({ env: { EXECD_LISTEN: `unix:${sock}` } });
    assert.equal(ex.url, `unix:${sock}`);
    assert.equal(fs.statSync(sock).mode & 0o777, 0o600);
    const status = await new Promise((resolve, reject) => {
      const rq = http.request({ socketPath: sock, path: '/ping', headers: { 'X-EXECD-ACCESS-TOKEN': TOKEN } }, (res) => {
        res.resume();
        resolve(res.statusCode);
      });
      rq.on('error', reject);
      rq.end();
    });
    assert.equal(status, 200);
    await ex.stop();
    assert.ok(!fs.existsSync(sock));
    fs.rmSync(dir, { recursive: true, force: true });
  });

  test('SIGTERM with everything running: a clean exit, nothing left behind', async () => {
    const tmp = tmpdir('tusko-execd-tmp-');
    const ex = await startExecd({ env: { TMPDIR: tmp } });
    // a background command, a session running a command, a foreground stream,
    // a live kernel and a metrics watch
    const bg = await stream(ex.url, '/command', { command: 'sleep 300 & sleep 300', background: true });
    assert.equal(bg.status, 200);
    const sid = (await req(ex.url, '/session', { json: {} })).json.session_id;
    const ctx = (await req(ex.url, '/code/context', { json: { language: 'python' } })).json.id;
    const k = await stream(ex.url, '/code', { context: { id: ctx }, code: 'import os; print(os.getpid())' });
    const kernelPid = Number(texts(k.events, 'stdout')[0]);
    assert.ok(pidAlive(kernelPid));
    let fgStarted, sessStarted, watchStarted;
    const fgSeen = new Promise((r) => (fgStarted = r));
    const sessSeen = new Promise((r) => (sessStarted = r));
    const watchSeen = new Promise((r) => (watchStarted = r));
    const fg = stream(ex.url, '/command', { command: 'echo go; sleep 300' }, { onEvent: (e) => e.type === 'stdout' && fgStarted() });
    const ss = stream(ex.url, `/session/${sid}/run`, { command: 'echo go; sleep 300' }, { onEvent: (e) => e.type === 'stdout' && sessStarted() });
    const mw = stream(ex.url, '/metrics/watch', undefined, { method: 'GET', validate: false, onEvent: () => watchStarted() });
    await Promise.all([fgSeen, sessSeen, watchSeen]);
    const before = childrenOf(ex.proc.pid);
    assert.ok(before.length >= 5, `children: ${before}`);
    const runDirs = fs.readdirSync(tmp).filter((n) => n.startsWith('tusko-execd-'));
    assert.equal(runDirs.length, 1);
    const exit = await ex.stop(); // throws on a sanitizer report in the log
    assert.equal(exit.code, 0, JSON.stringify(exit));
    await Promise.all([fg, ss, mw]);
    await until(() => before.every((p) => !pidAlive(p)), { what: 'every child of execd to be gone' });
    assert.deepEqual(fs.readdirSync(tmp), []);
    fs.rmSync(tmp, { recursive: true, force: true });
  });
});
