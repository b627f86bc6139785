// tusko-execd files and directories: streamed multipart upload, download with
// Range, info, search, mv, replace, permissions, directories; caps; metrics.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { stopAll } from '../../lib/harness.mjs';
import { H, check, checkError, checkResponse, req, startExecd, stream, until } from './lib.mjs';

after(stopAll);

let ex;
before(async () => {
  ex = await startExecd();
});

const q = (p) => encodeURIComponent(p);

// One upload request with the SDK's shape: a metadata part (a file part named
// "metadata" holding JSON) before each file part.
export async function upload(base, files, { headers = {} } = {}) {
  const form = new FormData();
  for (const f of files) {
    form.append('metadata', new Blob([JSON.stringify(f.meta)], { type: 'application/json' }), 'metadata');
    form.append('file', new Blob([f.data]), path.basename(f.meta.path || 'x'));
  }
  const res = await fetch(base + '/files/upload', { method: 'POST', headers: { ...H, ...headers }, body: form });
  const text = await res.text();
  let json = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    /* not JSON */
  }
  return { status: res.status, text, json, headers: res.headers };
}

async function rawUpload(base, body, contentType) {
  const res = await fetch(base + '/files/upload', { method: 'POST', headers: { ...H, 'content-type': contentType }, body });
  const text = await res.text();
  return { status: res.status, text, json: text ? JSON.parse(text) : null };
}

describe('upload and download', () => {
  const big = crypto.randomBytes(10 * 1024 * 1024);

  test('a 10 MiB binary file goes up and comes back byte for byte', async () => {
    const r = await upload(ex.url, [{ meta: { path: path.join(ex.ws, 'data/blob.bin'), mode: 640 }, data: big }]);
    assert.equal(r.status, 200, r.text);
    const onDisk = fs.readFileSync(path.join(ex.ws, 'data/blob.bin'));
    assert.ok(onDisk.equals(big));
    assert.equal(fs.statSync(path.join(ex.ws, 'data/blob.bin')).mode & 0o777, 0o640);
    const d = await req(ex.url, `/files/download?path=${q('data/blob.bin')}`);
    assert.equal(d.status, 200);
    assert.equal(d.headers.get('content-type'), 'application/octet-stream');
    assert.equal(Number(d.headers.get('content-length')), big.length);
    assert.match(d.headers.get('content-disposition'), /attachment; filename="blob.bin"/);
    assert.ok(d.buf.equals(big));
    // no temporary files left behind
    assert.deepEqual(fs.readdirSync(path.join(ex.ws, 'data')), ['blob.bin']);
  });

  test('Range requests return exactly the bytes asked for', async () => {
    const cases = [
      ['bytes=0-1023', 0, 1024],
      ['bytes=5000000-5000099', 5000000, 100],
      ['bytes=10485000-', 10485000, big.length - 10485000],
      ['bytes=-777', big.length - 777, 777],
      ['bytes=10485750-99999999', 10485750, big.length - 10485750],
    ];
    for (const [range, off, len] of cases) {
      const d = await req(ex.url, `/files/download?path=${q('data/blob.bin')}`, { headers: { Range: range } });
      assert.equal(d.status, 206, range);
      assert.equal(d.headers.get('content-range'), `bytes ${off}-${off + len - 1}/${big.length}`);
      assert.equal(Number(d.headers.get('content-length')), len);
      assert.ok(d.buf.equals(big.subarray(off, off + len)), range);
    }
    for (const range of ['bytes=20000000-', 'bytes=9-3', 'items=0-1', 'bytes=-0']) {
      const d = await req(ex.url, `/files/download?path=${q('data/blob.bin')}`, { headers: { Range: range } });
      assert.equal(d.status, 416, range);
      assert.equal(d.headers.get('content-range'), `bytes */${big.length}`);
      checkResponse('GET', '/files/download', d);
    }
  });

  test('several files in one request; text and empty files; overwrite', async () => {
    const r = await upload(ex.url, [
      { meta: { path: 'docs/a.txt' }, data: 'alpha\n' },
      { meta: { path: 'docs/deep/b.txt', mode: 600 }, data: 'beta\n' },
      { meta: { path: 'docs/empty' }, data: '' },
    ]);
    assert.equal(r.status, 200, r.text);
    assert.equal(fs.readFileSync(path.join(ex.ws, 'docs/a.txt'), 'utf8'), 'alpha\n');
    assert.equal(fs.readFileSync(path.join(ex.ws, 'docs/deep/b.txt'), 'utf8'), 'beta\n');
    assert.equal(fs.statSync(path.join(ex.ws, 'docs/empty')).size, 0);
    const again = await upload(ex.url, [{ meta: { path: 'docs/a.txt' }, data: 'ALPHA' }]);
    assert.equal(again.status, 200);
    assert.equal(fs.readFileSync(path.join(ex.ws, 'docs/a.txt'), 'utf8'), 'ALPHA');
    const e = await req(ex.url, `/files/download?path=${q('docs/empty')}`);
    assert.equal(e.status, 200);
    assert.equal(e.buf.length, 0);
  });

  test('a streamed (chunked) upload without Content-Length', async () => {
    const boundary = 'tusko-' + crypto.randomBytes(8).toString('hex');
    const chunks = [
      `--${boundary}\r\nContent-Disposition: form-data; name="metadata"; filename="metadata"\r\nContent-Type: application/json\r\n\r\n`,
      JSON.stringify({ path: 'streamed.bin' }),
      `\r\n--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="streamed.bin"\r\n\r\n`,
    ];
    const payload = crypto.randomBytes(3 * 1024 * 1024 + 17);
    const body = new ReadableStream({
      start(c) {
        for (const s of chunks) c.enqueue(Buffer.from(s));
        for (let i = 0; i < payload.length; i += 65537) c.enqueue(payload.subarray(i, i + 65537));
        c.enqueue(Buffer.from(`\r\n--${boundary}--\r\n`));
        c.close();
      },
    });
    const res = await fetch(ex.url + '/files/upload', {
      method: 'POST',
      headers: { ...H, 'content-type': `multipart/form-data; boundary=${boundary}` },
      body,
      duplex: 'half',
    });
    assert.equal(res.status, 200, await res.text());
    assert.ok(fs.readFileSync(path.join(ex.ws, 'streamed.bin')).equals(payload));
  });

  test('malformed uploads are refused with 400 and leave nothing behind', async () => {
    const b = 'XyZ';
    const cases = [
      ['not multipart', 'hello', 'text/plain'],
      ['no boundary', 'x', 'multipart/form-data'],
      ['file before metadata', `--${b}\r\nContent-Disposition: form-data; name="file"; filename="f"\r\n\r\ndata\r\n--${b}--\r\n`, `multipart/form-data; boundary=${b}`],
      ['metadata without file', `--${b}\r\nContent-Disposition: form-data; name="metadata"\r\n\r\n{"path":"lonely.txt"}\r\n--${b}--\r\n`, `multipart/form-data; boundary=${b}`],
      ['bad metadata JSON', `--${b}\r\nContent-Disposition: form-data; name="metadata"\r\n\r\n{nope\r\n--${b}--\r\n`, `multipart/form-data; boundary=${b}`],
      ['metadata without path', `--${b}\r\nContent-Disposition: form-data; name="metadata"\r\n\r\n{"mode":644}\r\n--${b}--\r\n`, `multipart/form-data; boundary=${b}`],
      ['truncated body', `--${b}\r\nContent-Disposition: form-data; name="metadata"\r\n\r\n{"path":"cut.txt"}\r\n--${b}\r\nContent-Disposition: form-data; name="file"\r\n\r\npartial`, `multipart/form-data; boundary=${b}`],
      ['no parts', `--${b}--\r\n`, `multipart/form-data; boundary=${b}`],
      ['header without disposition', `--${b}\r\nContent-Type: text/plain\r\n\r\nx\r\n--${b}--\r\n`, `multipart/form-data; boundary=${b}`],
    ];
    for (const [what, body, ct] of cases) {
      const r = await rawUpload(ex.url, body, ct);
      assert.equal(r.status, 400, `${what}: ${r.text}`);
      checkResponse('POST', '/files/upload', r);
    }
    assert.ok(!fs.existsSync(path.join(ex.ws, 'cut.txt')));
    assert.ok(!fs.existsSync(path.join(ex.ws, 'lonely.txt')));
    assert.ok(!fs.readdirSync(ex.ws).some((n) => n.startsWith('.tusko-upload')));
    const empty = await req(ex.url, '/files/upload', { method: 'POST' });
    assert.equal(empty.status, 400);
  });

  test('uploads over EXECD_MAX_UPLOAD_BYTES answer 413', async () => {
    const small = await startExecd({ env: { EXECD_MAX_UPLOAD_BYTES: '65536' } });
    // Announced too big: answered before the body is sent (as with Expect: 100-continue).
    const u = new URL(small.url);
    const answer = await new Promise((resolve, reject) => {
      const s = net.connect(Number(u.port), u.hostname, () => {
        s.write(`POST /files/upload HTTP/1.1\r\nHost: x\r\nX-EXECD-ACCESS-TOKEN: ${H['X-EXECD-ACCESS-TOKEN']}\r\n` +
          'Content-Type: multipart/form-data; boundary=b\r\nContent-Length: 100000\r\nExpect: 100-continue\r\n\r\n');
      });
      let got = '';
      s.on('data', (d) => {
        got += d;
        if (got.includes('\r\n\r\n') && got.includes('}')) {
          s.destroy();
          resolve(got);
        }
      });
      s.on('error', reject);
    });
    assert.match(answer, /^HTTP\/1\.1 413/);
    checkError(JSON.parse(answer.slice(answer.indexOf('{'))));
    // Streamed without a length: cut off at the cap.
    const payload = crypto.randomBytes(100000);
    const body = new ReadableStream({
      start(c) {
        c.enqueue(Buffer.from('--b\r\nContent-Disposition: form-data; name="metadata"\r\n\r\n{"path":"big.bin"}\r\n--b\r\nContent-Disposition: form-data; name="file"\r\n\r\n'));
        c.enqueue(payload);
        c.enqueue(Buffer.from('\r\n--b--\r\n'));
        c.close();
      },
    });
    const res = await fetch(small.url + '/files/upload', { method: 'POST', headers: { ...H, 'content-type': 'multipart/form-data; boundary=b' }, body, duplex: 'half' }).catch(() => null);
    if (res) assert.equal(res.status, 413);
    assert.ok(!fs.existsSync(path.join(small.ws, 'big.bin')));
    // the partial temporary file goes when the request is over
    await until(() => !fs.readdirSync(small.ws).some((n) => n.startsWith('.tusko-upload')), { what: 'the temporary file to go' });
    const ok = await upload(small.url, [{ meta: { path: 'ok.bin' }, data: crypto.randomBytes(1000) }]);
    assert.equal(ok.status, 200);
    await small.stop();
  });
});

describe('file operations', () => {
  before(() => {
    fs.mkdirSync(path.join(ex.ws, 'proj/src/util'), { recursive: true });
    fs.writeFileSync(path.join(ex.ws, 'proj/README.md'), '# proj\nhost: localhost\n');
    fs.writeFileSync(path.join(ex.ws, 'proj/src/main.py'), 'HOST = "localhost"\nPORT = 8080\nprint(HOST, "localhost")\n');
    fs.writeFileSync(path.join(ex.ws, 'proj/src/util/helpers.py'), 'def f():\n    return 1\n');
    fs.writeFileSync(path.join(ex.ws, 'proj/src/.hidden.py'), '');
    fs.symlinkSync('src', path.join(ex.ws, 'proj/src-link'));
  });

  test('info returns FileInfo for each path asked for', async () => {
    const r = await req(ex.url, `/files/info?path=${q('proj/README.md')}&path=${q(path.join(ex.ws, 'proj/src'))}&path=${q('proj/src-link')}`);
    assert.equal(r.status, 200, r.text);
    checkResponse('GET', '/files/info', r);
    const f = r.json['proj/README.md'];
    assert.equal(f.path, path.join(ex.ws, 'proj/README.md'));
    assert.equal(f.type, 'file');
    assert.equal(f.size, 23);
    assert.equal(f.mode, 644);
    assert.equal(f.owner, 'root');
    assert.equal(r.json[path.join(ex.ws, 'proj/src')].type, 'directory');
    assert.equal(r.json['proj/src-link'].type, 'symlink');
    const missing = await req(ex.url, `/files/info?path=${q('proj/nope')}`);
    assert.equal(missing.status, 404);
    checkResponse('GET', '/files/info', missing);
  });

  test('search matches file names (and paths) under a directory', async () => {
    let r = await req(ex.url, `/files/search?path=${q('proj')}&pattern=${q('*.py')}`);
    checkResponse('GET', '/files/search', r);
    assert.deepEqual(r.json.map((f) => path.relative(ex.ws, f.path)).sort(), ['proj/src/.hidden.py', 'proj/src/main.py', 'proj/src/util/helpers.py']);
    r = await req(ex.url, `/files/search?path=${q('proj')}`);
    assert.equal(r.json.length, 5); // all files (the symlink too), no directories
    r = await req(ex.url, `/files/search?path=${q('proj')}&pattern=${q('**/util/*.py')}`);
    assert.deepEqual(r.json.map((f) => path.basename(f.path)), ['helpers.py']);
    r = await req(ex.url, `/files/search?path=${q('proj')}&pattern=${q('*.nothing')}`);
    assert.deepEqual(r.json, []);
    const nf = await req(ex.url, `/files/search?path=${q('nope')}`);
    assert.equal(nf.status, 404);
    checkResponse('GET', '/files/search', nf);
    const miss = await req(ex.url, '/files/search');
    assert.equal(miss.status, 400);
    checkResponse('GET', '/files/search', miss);
  });

  test('replace changes every occurrence and keeps the mode; verbose counts', async () => {
    fs.chmodSync(path.join(ex.ws, 'proj/src/main.py'), 0o750);
    let r = await req(ex.url, '/files/replace?verbose=true', {
      json: { 'proj/src/main.py': { old: 'localhost', new: '0.0.0.0' }, 'proj/README.md': { old: 'absent', new: 'x' } },
    });
    assert.equal(r.status, 200, r.text);
    checkResponse('POST', '/files/replace', r);
    assert.deepEqual(r.json, { 'proj/src/main.py': { replacedCount: 2 }, 'proj/README.md': { replacedCount: 0 } });
    assert.equal(fs.readFileSync(path.join(ex.ws, 'proj/src/main.py'), 'utf8'), 'HOST = "0.0.0.0"\nPORT = 8080\nprint(HOST, "0.0.0.0")\n');
    assert.equal(fs.statSync(path.join(ex.ws, 'proj/src/main.py')).mode & 0o777, 0o750);
    r = await req(ex.url, '/files/replace', { json: { 'proj/README.md': { old: 'localhost', new: 'example' } } });
    assert.equal(r.status, 200);
    assert.equal(r.text, '');
    assert.match(fs.readFileSync(path.join(ex.ws, 'proj/README.md'), 'utf8'), /host: example/);
    for (const body of [{ 'proj/README.md': { old: '', new: 'x' } }, { 'proj/README.md': { new: 'x' } }, []]) {
      const bad = await req(ex.url, '/files/replace', { json: body });
      assert.equal(bad.status, 400, JSON.stringify(body));
      checkResponse('POST', '/files/replace', bad);
    }
    const nf = await req(ex.url, '/files/replace', { json: { 'proj/none.txt': { old: 'a', new: 'b' } } });
    assert.equal(nf.status, 404);
  });

  test('mv renames and moves, creating the destination directory', async () => {
    let r = await req(ex.url, '/files/mv', { json: [{ src: 'proj/src/util/helpers.py', dest: 'proj/lib/helpers.py' }, { src: path.join(ex.ws, 'proj/README.md'), dest: 'proj/README.txt' }] });
    assert.equal(r.status, 200, r.text);
    assert.ok(fs.existsSync(path.join(ex.ws, 'proj/lib/helpers.py')));
    assert.ok(!fs.existsSync(path.join(ex.ws, 'proj/src/util/helpers.py')));
    assert.ok(fs.existsSync(path.join(ex.ws, 'proj/README.txt')));
    r = await req(ex.url, '/files/mv', { json: [{ src: 'proj/README.txt', dest: 'proj/src/main.py' }] });
    assert.equal(r.status, 400);
    checkResponse('POST', '/files/mv', r);
    assert.match(r.json.message, /already exists/);
    r = await req(ex.url, '/files/mv', { json: [{ src: 'proj/ghost', dest: 'proj/ghost2' }] });
    assert.equal(r.status, 404);
    checkResponse('POST', '/files/mv', r);
    r = await req(ex.url, '/files/mv', { json: [{ src: 'proj/src', dest: 'proj/src/inside' }] });
    assert.equal(r.status, 400);
  });

  test('permissions set mode, owner and group', async () => {
    fs.writeFileSync(path.join(ex.ws, 'perm.sh'), '#!/bin/sh\n');
    let r = await req(ex.url, '/files/permissions', { json: { 'perm.sh': { mode: 751, owner: 'nobody', group: 'nogroup' } } });
    assert.equal(r.status, 200, r.text);
    const st = fs.statSync(path.join(ex.ws, 'perm.sh'));
    assert.equal(st.mode & 0o777, 0o751);
    assert.equal(st.uid, 65534);
    const info = await req(ex.url, `/files/info?path=perm.sh`);
    assert.equal(info.json['perm.sh'].mode, 751);
    assert.equal(info.json['perm.sh'].owner, 'nobody');
    for (const body of [{ 'perm.sh': { mode: 789 } }, { 'perm.sh': { mode: 644, owner: 'no-such-user-x' } }, { 'perm.sh': 'rw' }]) {
      r = await req(ex.url, '/files/permissions', { json: body });
      assert.equal(r.status, 400, JSON.stringify(body));
      checkResponse('POST', '/files/permissions', r);
    }
  });

  test('delete removes files (not directories) and ignores missing ones', async () => {
    fs.writeFileSync(path.join(ex.ws, 'del1'), '');
    fs.writeFileSync(path.join(ex.ws, 'del2'), '');
    let r = await req(ex.url, `/files?path=del1&path=del2&path=never-there`, { method: 'DELETE' });
    assert.equal(r.status, 200);
    assert.ok(!fs.existsSync(path.join(ex.ws, 'del1')) && !fs.existsSync(path.join(ex.ws, 'del2')));
    r = await req(ex.url, `/files?path=proj`, { method: 'DELETE' });
    assert.equal(r.status, 400);
    checkError(r.json);
    assert.ok(fs.existsSync(path.join(ex.ws, 'proj')));
  });
});

describe('directories', () => {
  test('create (mkdir -p with mode), list with depth in lexical order, remove', async () => {
    let r = await req(ex.url, '/directories', { json: { 'tree/b/x': { mode: 700 }, [path.join(ex.ws, 'tree/a')]: { mode: 755 } } });
    assert.equal(r.status, 200, r.text);
    assert.equal(fs.statSync(path.join(ex.ws, 'tree/b/x')).mode & 0o777, 0o700);
    fs.writeFileSync(path.join(ex.ws, 'tree/a/file.txt'), 'x');
    fs.writeFileSync(path.join(ex.ws, 'tree/c.txt'), 'y');
    fs.symlinkSync('/etc', path.join(ex.ws, 'tree/etc-link'));
    r = await req(ex.url, `/directories/list?path=tree`);
    checkResponse('GET', '/directories/list', r);
    assert.deepEqual(r.json.map((e) => path.basename(e.path)), ['a', 'b', 'c.txt', 'etc-link']);
    assert.deepEqual(r.json.map((e) => e.type), ['directory', 'directory', 'file', 'symlink']);
    r = await req(ex.url, `/directories/list?path=tree&depth=2`);
    assert.deepEqual(r.json.map((e) => path.relative(ex.ws, e.path)), ['tree/a', 'tree/a/file.txt', 'tree/b', 'tree/b/x', 'tree/c.txt', 'tree/etc-link']);
    r = await req(ex.url, `/directories/list?path=tree&depth=0`);
    assert.deepEqual(r.json, []);
    for (const [p, status] of [['tree/etc-link', 400], ['tree/c.txt', 400], ['tree/none', 404]]) {
      const x = await req(ex.url, `/directories/list?path=${q(p)}`);
      assert.equal(x.status, status, p);
      checkResponse('GET', '/directories/list', x);
    }
    const bad = await req(ex.url, `/directories/list?path=tree&depth=-1`);
    assert.equal(bad.status, 400);
    r = await req(ex.url, `/directories?path=tree&path=not-there`, { method: 'DELETE' });
    assert.equal(r.status, 200);
    assert.ok(!fs.existsSync(path.join(ex.ws, 'tree')));
    assert.ok(fs.existsSync('/etc/passwd')); // the symlink was removed, not followed
    const root = await req(ex.url, `/directories?path=${q(ex.ws)}`, { method: 'DELETE' });
    assert.equal(root.status, 400);
    checkError(root.json);
    assert.ok(fs.existsSync(ex.ws));
  });
});

describe('metrics', () => {
  test('GET /metrics and /metrics/watch match the Metrics schema', async () => {
    const r = await req(ex.url, '/metrics');
    checkResponse('GET', '/metrics', r);
    assert.ok(r.json.cpu_count >= 1);
    assert.ok(r.json.mem_total_mib > r.json.mem_used_mib);
    assert.ok(r.json.cpu_used_pct >= 0 && r.json.cpu_used_pct <= 100);
    assert.equal(typeof r.json.uptime_s, 'number');
    const w = await stream(ex.url, '/metrics/watch', undefined, {
      method: 'GET',
      validate: false,
      onEvent: (ev, all) => all.length >= 2,
    });
    assert.equal(w.events.length, 2);
    for (const ev of w.events) check('/components/schemas/Metrics', ev, 'metrics event');
    assert.ok(w.events[1].timestamp > w.events[0].timestamp);
  });
});
