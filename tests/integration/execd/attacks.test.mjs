// The path-attack table: every path that tries to leave the workspace — '..'
// forms, encoded and double-encoded forms, NUL, absolute paths, '~', '$VAR',
// symlinks to /etc, to a parent and to the outside, a symlink loop, magic
// links, very long paths — is refused with 400 naming the rule, by every
// endpoint that takes a path; a racing process swaps a directory for a symlink
// while writes go on. Files planted outside prove that nothing there was read
// or written.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { stopAll, tmpdir } from '../../lib/harness.mjs';
import { H, checkResponse, req, startExecd, stream } from './lib.mjs';

after(stopAll);

let ex, base, WS, OUT, secret, session, snapshotBefore;
const seen = []; // every response body, to prove no secret leaked
const PWN = `/etc/tusko-pwn-${process.pid}`;

function snapshot(dir) {
  const out = {};
  const walk = (d) => {
    for (const n of fs.readdirSync(d).sort()) {
      const p = path.join(d, n);
      const st = fs.lstatSync(p);
      const rel = path.relative(dir, p);
      out[rel] = { mode: st.mode, uid: st.uid, size: st.size, mtime: st.mtimeMs };
      if (st.isDirectory()) walk(p);
      else if (st.isFile()) out[rel].sha = crypto.createHash('sha256').update(fs.readFileSync(p)).digest('hex');
    }
  };
  walk(dir);
  return out;
}

before(async () => {
  base = tmpdir('tusko-attack-');
  WS = path.join(base, 'ws');
  OUT = path.join(base, 'outside');
  fs.mkdirSync(path.join(WS, 'real'), { recursive: true });
  fs.mkdirSync(path.join(OUT, 'dir'), { recursive: true });
  secret = 'TOP-SECRET-' + crypto.randomBytes(12).toString('hex');
  fs.writeFileSync(path.join(OUT, 'secret.txt'), secret + '\n');
  fs.writeFileSync(path.join(OUT, 'dir/inner.txt'), secret + ' inner\n');
  fs.chmodSync(path.join(OUT, 'secret.txt'), 0o600);
  fs.writeFileSync(path.join(WS, 'real/ok.txt'), 'fine\n');
  fs.symlinkSync('/etc', path.join(WS, 'etc'));
  fs.symlinkSync('..', path.join(WS, 'up'));
  fs.symlinkSync('../outside', path.join(WS, 'out'));
  fs.symlinkSync(OUT, path.join(WS, 'abs'));
  fs.symlinkSync('/', path.join(WS, 'rootlink'));
  fs.symlinkSync('/proc/self/root', path.join(WS, 'proclink'));
  fs.symlinkSync('../outside/secret.txt', path.join(WS, 'outfile'));
  fs.symlinkSync('loop', path.join(WS, 'loop'));
  snapshotBefore = snapshot(OUT);
  ex = await startExecd({ workspace: WS });
  const s = await req(ex.url, '/session', { json: {} });
  session = s.json.session_id;
});

after(() => {
  fs.rmSync(base, { recursive: true, force: true });
});

const S = 'secret.txt';
const rootRel = (p) => p.replace(/^\//, ''); // "/a/b" -> "a/b", for a path under a symlink to "/"

// [name, path, rule] — paths that name outside/secret.txt: every endpoint is tried.
const rw = () => [
  ['dot-dot', `../outside/${S}`, /climbs out/],
  ['absolute outside', `${OUT}/${S}`, /outside the workspace/],
  ['absolute via the root and ..', `${WS}/../outside/${S}`, /climbs out/],
  ['.. after a real directory', `real/../../outside/${S}`, /climbs out/],
  ['./..', `./../outside/${S}`, /climbs out/],
  ['.. between dots', `real/./../../outside/${S}`, /climbs out/],
  ['doubled slashes', `..//outside//${S}`, /climbs out/],
  ['absolute with the root twice', `${WS}/real/../../outside/${S}`, /climbs out/],
  ['a sibling that shares the prefix', `${WS}-evil/../outside/${S}`, /outside the workspace/],
  ['symlink to the outside dir', `out/${S}`, /symlink/],
  ['absolute symlink to the outside dir', `abs/${S}`, /symlink/],
  ['symlink to the parent', `up/outside/${S}`, /symlink/],
  ['symlink to /', `rootlink/${rootRel(OUT)}/${S}`, /symlink/],
  ['magic link /proc/self/root', `proclink/${rootRel(OUT)}/${S}`, /symlink/],
  ['symlink loop', `loop/${S}`, /symlink/],
  ['percent-encoded dots (decoded once)', `%2e%2e/outside/${S}`, /percent-escape/],
  ['percent-encoded slashes', `%2E%2E%2Foutside%2F${S}`, /percent-escape/],
  ['mixed encoding', `..%2foutside%2f${S}`, /percent-escape/],
  ['backslashes', `..\\outside\\${S}`, /backslash/],
  ['tilde', `~/../outside/${S}`, /'~'/],
  ['$HOME', `$HOME/../outside/${S}`, /'\$'/],
  ['${PWD}', `\${PWD}/../outside/${S}`, /'\$'/],
  ['$(command)', `$(echo ..)/outside/${S}`, /'\$'/],
  ['NUL byte', `real/ok.txt\u0000/../../outside/${S}`, /NUL/],
  ['control character', `real/\n../../outside/${S}`, /control character/],
  ['a 300-byte component', 'a'.repeat(300) + `/../../outside/${S}`, /longer than 255/],
  ['a path over 4096 bytes', 'x/'.repeat(2100) + '../'.repeat(2101) + `outside/${S}`, /longer than 4096/],
];

// Read-only targets outside (never written to, even by mistake).
const ro = () => [
  ['/etc/passwd', '/etc/passwd', /outside the workspace/],
  ['/etc', '/etc', /outside the workspace/],
  ['/', '/', /outside the workspace/],
  ['symlink to /etc', 'etc/passwd', /symlink/],
  // the link itself (its own metadata is inside and may be shown): never through it
  ['the /etc symlink itself as a directory', 'etc', /outside the workspace|symlink/, ['download', 'search', 'list']],
  ['/proc/self/environ', '/proc/self/environ', /outside the workspace/],
  ['/proc/1/root', '/proc/1/root/etc/passwd', /outside the workspace/],
  ['symlink to / then etc', 'rootlink/etc/passwd', /symlink/],
  ['~root', '~root/.bashrc', /'~'/],
  ['~ alone', '~', /'~'/],
  ['$HOME alone', '$HOME', /'\$'/],
  ['//etc/passwd', '//etc/passwd', /outside the workspace/],
  ['/./etc/passwd', '/./etc/passwd', /outside the workspace/],
  ['deep climb from the root', `${WS}/../../../../etc/passwd`, /climbs out/],
  ['deep climb', '../../../../../../etc/passwd', /climbs out/],
];

// Raw query strings (sent as is: the server decodes them exactly once).
const raw = [
  ['%2e%2e%2f', `%2e%2e%2foutside%2f${S}`, /climbs out/],
  ['..%2F', `..%2Foutside%2F${S}`, /climbs out/],
  ['double-encoded', `%252e%252e%252foutside%252f${S}`, /percent-escape/],
  ['overlong UTF-8 dots', `%c0%ae%c0%ae%2foutside%2f${S}`, /UTF-8/],
  ['3-byte overlong dots', `%e0%80%ae%e0%80%ae/outside/${S}`, /UTF-8/],
  ['encoded NUL', `real%2fok.txt%00.png`, /NUL/],
  ['encoded backslash', `..%5coutside%5c${S}`, /backslash/],
  ['encoded absolute', '%2fetc%2fpasswd', /outside the workspace/],
];

const swapName = (p, n) => p.replace(S, n);

async function expect400(what, p, r, rule) {
  seen.push(r.text || '');
  assert.equal(r.status, 400, `${what} with ${JSON.stringify(p).slice(0, 120)}: ${r.status} ${r.text.slice(0, 300)}`);
  assert.ok(r.json && typeof r.json.message === 'string' && r.json.message.length > 0, `${what}: no message`);
  if (rule) assert.match(r.json.message, rule, `${what} with ${JSON.stringify(p).slice(0, 80)}`);
}

async function upload(p, data = 'pwned') {
  const form = new FormData();
  form.append('metadata', new Blob([JSON.stringify({ path: p })], { type: 'application/json' }), 'metadata');
  form.append('file', new Blob([data]), 'f');
  const res = await fetch(ex.url + '/files/upload', { method: 'POST', headers: H, body: form });
  const text = await res.text();
  let json = null;
  try {
    json = JSON.parse(text);
  } catch {
    /* not JSON */
  }
  return { status: res.status, text, json };
}

const readOps = {
  info: (p, enc) => req(ex.url, `/files/info?path=${enc(p)}`),
  download: (p, enc) => req(ex.url, `/files/download?path=${enc(p)}`),
  search: (p, enc) => req(ex.url, `/files/search?path=${enc(p)}`),
  list: (p, enc) => req(ex.url, `/directories/list?path=${enc(p)}`),
};
const urlWriteOps = {
  deleteFile: (p, enc) => req(ex.url, `/files?path=${enc(p)}`, { method: 'DELETE' }),
  deleteDir: (p, enc) => req(ex.url, `/directories?path=${enc(swapName(p, 'dir'))}`, { method: 'DELETE' }),
};
const jsonOps = {
  upload: (p) => upload(p),
  uploadNew: (p) => upload(swapName(p, 'evil.txt')),
  mkdir: (p) => req(ex.url, '/directories', { json: { [swapName(p, 'evildir')]: { mode: 777 } } }),
  replace: (p) => req(ex.url, '/files/replace', { json: { [p]: { old: 'TOP', new: 'PWN' } } }),
  permissions: (p) => req(ex.url, '/files/permissions', { json: { [p]: { mode: 777 } } }),
  mvSrc: (p) => req(ex.url, '/files/mv', { json: [{ src: p, dest: 'stolen.txt' }] }),
  mvDest: (p) => req(ex.url, '/files/mv', { json: [{ src: 'real/ok.txt', dest: swapName(p, 'evil.txt') }] }),
};
const cwdOps = {
  commandCwd: (p) => req(ex.url, '/command', { json: { command: `cat ${S}; touch evil.txt`, cwd: swapName(p, 'dir') } }),
  sessionCwd: (p) => req(ex.url, '/session', { json: { cwd: swapName(p, 'dir') } }),
  sessionRunCwd: (p) => req(ex.url, `/session/${session}/run`, { json: { command: `cat ${S}`, cwd: swapName(p, 'dir') } }),
};

let counted = 0;

describe('path attacks', () => {
  test(`every endpoint refuses every path that leaves the workspace (${rw().length + ro().length + raw.length + 1} cases)`, async () => {
    const enc = encodeURIComponent;
    for (const [name, p, rule] of rw()) {
      for (const [op, f] of Object.entries({ ...readOps, ...urlWriteOps })) {
        await expect400(`${name}: ${op}`, p, await f(p, enc), op === 'info' ? rule : null);
      }
      for (const [op, f] of Object.entries({ ...jsonOps, ...cwdOps })) {
        await expect400(`${name}: ${op}`, p, await f(p), null);
      }
      counted++;
    }
    for (const [name, p, rule, only] of ro()) {
      for (const [op, f] of Object.entries(readOps)) {
        if (only && !only.includes(op)) continue;
        await expect400(`${name}: ${op}`, p, await f(p, enc), op === 'download' ? rule : null);
      }
      for (const [op, f] of Object.entries(cwdOps)) await expect400(`${name}: ${op}`, p, await f(p), null);
      counted++;
    }
    const asIs = (p) => p;
    for (const [name, p, rule] of raw) {
      for (const [op, f] of Object.entries({ ...readOps, ...urlWriteOps })) {
        await expect400(`${name} (raw): ${op}`, p, await f(p, asIs), op === 'download' ? rule : null);
      }
      counted++;
    }
    // A final symlink pointing outside: reading or changing through it is refused;
    // replacing or deleting the link itself acts on the link, never its target.
    for (const [op, f] of Object.entries({ download: readOps.download, search: readOps.search, list: readOps.list, replace: jsonOps.replace, permissions: jsonOps.permissions })) {
      await expect400(`final symlink: ${op}`, 'outfile', await f('outfile', enc), op === 'download' ? /outside the workspace|symlink/ : null);
    }
    const mv = await req(ex.url, '/files/mv', { json: [{ src: 'real/ok.txt', dest: 'outfile' }] });
    await expect400('final symlink: mv over it', 'outfile', mv, /already exists/);
    counted++;
    assert.ok(counted >= 40, `only ${counted} cases`);
  });

  test('responses use the error schema', async () => {
    const r = await req(ex.url, `/files/info?path=${encodeURIComponent('../x')}`);
    checkResponse('GET', '/files/info', r);
    const d = await req(ex.url, `/files/download?path=${encodeURIComponent('/etc/passwd')}`);
    checkResponse('GET', '/files/download', d);
    const u = await upload('../x');
    checkResponse('POST', '/files/upload', u);
  });

  test('writing over a final symlink replaces the link, never its target', async () => {
    const r = await upload('outfile', 'replaced the link');
    assert.equal(r.status, 200, r.text);
    assert.ok(!fs.lstatSync(path.join(WS, 'outfile')).isSymbolicLink());
    assert.equal(fs.readFileSync(path.join(OUT, S), 'utf8'), secret + '\n');
    fs.rmSync(path.join(WS, 'outfile'));
    fs.symlinkSync('../outside/secret.txt', path.join(WS, 'outfile'));
    const del = await req(ex.url, '/files?path=outfile', { method: 'DELETE' });
    assert.equal(del.status, 200);
    assert.ok(!fs.existsSync(path.join(WS, 'outfile')));
    assert.ok(fs.existsSync(path.join(OUT, S)));
    const dd = await req(ex.url, '/directories?path=out', { method: 'DELETE' });
    assert.equal(dd.status, 200); // removes the symlink "out", not the directory it names
    assert.ok(fs.existsSync(path.join(OUT, 'dir/inner.txt')));
    fs.symlinkSync('../outside', path.join(WS, 'out'));
  });

  test('a symlink swapped in by a racing process during writes leads nowhere outside', async () => {
    const swap = path.join(WS, 'swap');
    fs.mkdirSync(swap);
    fs.writeFileSync(path.join(swap, 'victim.txt'), 'TOP\n');
    const stop = path.join(base, 'stop-racer');
    // The racer: swap "swap" between a real directory and a symlink to the
    // outside directory as fast as it can, until told to stop.
    const racer = spawn(process.execPath, ['-e', `
      const fs = require('fs');
      const [swap, out, stop] = process.argv.slice(1);
      let i = 0, flips = 0;
      while (!fs.existsSync(stop)) {
        try { fs.renameSync(swap, swap + '-real-' + (i++)); } catch {}
        try { fs.symlinkSync(out, swap); flips++; } catch {}
        try { fs.unlinkSync(swap); } catch {}
        try { fs.mkdirSync(swap); fs.writeFileSync(swap + '/victim.txt', 'TOP\\n'); } catch {}
      }
      console.log(flips);
    `, swap, OUT, stop], { stdio: ['ignore', 'pipe', 'inherit'] });
    let flips = '';
    racer.stdout.on('data', (d) => (flips += d));
    const exited = new Promise((r) => racer.on('exit', r));
    const statuses = {};
    for (let i = 0; i < 100; i++) {
      const rs = [
        await upload(`swap/f-${i}.txt`, 'racing upload'),
        await req(ex.url, '/directories', { json: { [`swap/d-${i}/e`]: { mode: 755 } } }),
        await req(ex.url, '/files/replace', { json: { 'swap/victim.txt': { old: 'TOP', new: 'PWN' } } }),
        await req(ex.url, '/files/permissions', { json: { 'swap/victim.txt': { mode: 777 } } }),
        await req(ex.url, '/files/mv', { json: [{ src: 'swap/victim.txt', dest: `swap/moved-${i}.txt` }] }),
        await req(ex.url, `/files/download?path=swap/${S}`),
        await req(ex.url, `/files?path=swap/${S}`, { method: 'DELETE' }),
      ];
      for (const r of rs) {
        statuses[r.status] = (statuses[r.status] || 0) + 1;
        seen.push(r.text || '');
      }
    }
    fs.writeFileSync(stop, '');
    await exited;
    assert.ok(Number(flips) > 0, 'the racer never swapped');
    // both outcomes happened: some writes landed (inside), some were refused
    assert.ok(statuses[200] > 0 && statuses[400] > 0, JSON.stringify(statuses));
  });

  test('nothing outside the workspace was read or written', async () => {
    assert.deepEqual(snapshot(OUT), snapshotBefore);
    assert.ok(!fs.existsSync(PWN));
    assert.ok(!fs.existsSync(path.join(WS, 'stolen.txt')));
    for (const body of seen) {
      assert.ok(!body.includes(secret), 'a response contained the planted secret');
      assert.ok(!body.includes('root:x:0:0'), 'a response contained /etc/passwd');
    }
    // and the daemon still works normally
    const r = await stream(ex.url, '/command', { command: 'cat real/ok.txt' });
    assert.ok(r.events.some((e) => e.type === 'stdout' && e.text === 'fine'));
  });
});
