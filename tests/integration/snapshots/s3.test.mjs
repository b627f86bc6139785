// lib/s3 through `tusko s3` against two real HTTP servers on loopback:
// s3rver (npm) for round-trips read back with the test's own client, and the
// verifying stand-in (tests/lib/s3-standin.mjs) where every request's SigV4
// signature is recomputed and its x-amz-content-sha256 checked against the
// body: single and multipart uploads, keys that need encoding, listings
// over pages, retries on 5xx within the bound, a failing part aborted with no
// object left, a wrong secret refused with the store's code, never logged.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { tmpdir } from '../../lib/harness.mjs';
import { s3Env, startS3rver, tuskoS3 } from '../../lib/s3.mjs';
import { startS3Standin } from '../../lib/s3-standin.mjs';

const sha = (b) => crypto.createHash('sha256').update(b).digest('hex');

describe('s3 client', () => {
  let rv, st, dir;
  before(async () => {
    rv = await startS3rver();
    st = await startS3Standin({ bucket: 'snaps', accessKey: 'AKIDTUSKOTEST', secretKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYzEXAMPLEKEY' });
    dir = tmpdir('tusko-s3-');
  });
  after(async () => {
    await rv.close();
    await st.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  const file = (name, buf) => {
    const p = path.join(dir, name);
    fs.writeFileSync(p, buf);
    return p;
  };
  const env = (s, extra) => s3Env(s, { S3_PART_SIZE: '5', S3_MULTIPART_THRESHOLD: '6', ...extra });

  test('check: one ListObjectsV2 max-keys=1 under the prefix', async () => {
    st.requests.length = 0;
    const r = await tuskoS3(['check'], env(st, { S3_PREFIX: 'tusko' }));
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^ok: bucket snaps answers/);
    assert.equal(st.requests.length, 1);
    assert.deepEqual(st.requests[0].query, { 'list-type': '2', 'max-keys': '1', prefix: 'tusko/' });
    assert.equal(st.requests[0].ok, true);
    const off = await tuskoS3(['check'], { S3_BUCKET: 'snaps' });
    assert.equal(off.code, 2);
    assert.match(off.stderr, /S3_ENDPOINT is not set/);
  });

  test('s3rver: a small and a multipart object round-trip byte for byte', async () => {
    const small = crypto.randomBytes(1000);
    const big = crypto.randomBytes(13 * 1024 * 1024 + 12345); // three parts of 5 MiB
    let r = await tuskoS3(['put', 'tusko/u1/c1/small.bin', file('small', small)], env(rv));
    assert.equal(r.code, 0, r.stderr);
    r = await tuskoS3(['put', 'tusko/u1/c1/big.bin', file('big', big)], env(rv));
    assert.equal(r.code, 0, r.stderr);
    const s = await rv.get('tusko/u1/c1/small.bin');
    assert.equal(s.status, 200);
    assert.ok(s.body.equals(small));
    const b = await rv.get('tusko/u1/c1/big.bin');
    assert.equal(b.status, 200);
    assert.equal(sha(b.body), sha(big));
    // and back through our own GetObject
    r = await tuskoS3(['get', 'tusko/u1/c1/big.bin', path.join(dir, 'big.out')], env(rv));
    assert.equal(r.code, 0, r.stderr);
    assert.equal(sha(fs.readFileSync(path.join(dir, 'big.out'))), sha(big));
    r = await tuskoS3(['ls', 'tusko/u1/'], env(rv));
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(r.stdout.trim().split('\n').map((l) => [l.split('\t')[0], l.split('\t')[2]]), [
      [String(big.length), 'tusko/u1/c1/big.bin'],
      ['1000', 'tusko/u1/c1/small.bin'],
    ]);
    r = await tuskoS3(['rm', 'tusko/u1/c1/small.bin'], env(rv));
    assert.equal(r.code, 0, r.stderr);
    assert.equal((await rv.get('tusko/u1/c1/small.bin')).status, 404);
  });

  test('stand-in: every request signed right, its payload hash the body\'s, keys encoded', async () => {
    st.requests.length = 0;
    const key = 'tusko/ü ser/a+b=c&d~(1).bin';
    const small = Buffer.from('hello, signed world');
    const big = crypto.randomBytes(11 * 1024 * 1024 + 7);
    let r = await tuskoS3(['put', key, file('s2', small)], env(st));
    assert.equal(r.code, 0, r.stderr);
    r = await tuskoS3(['put', 'tusko/big2.bin', file('b2', big)], env(st));
    assert.equal(r.code, 0, r.stderr);
    assert.ok(st.objects.get(key).body.equals(small));
    assert.equal(sha(st.objects.get('tusko/big2.bin').body), sha(big));
    r = await tuskoS3(['get', key, '-'], env(st));
    assert.equal(r.stdout, small.toString());
    r = await tuskoS3(['ls', 'tusko/'], env(st));
    assert.equal(r.code, 0, r.stderr);
    r = await tuskoS3(['uploads', 'tusko/'], env(st));
    assert.equal(r.code, 0, r.stderr);
    r = await tuskoS3(['rm', key], env(st));
    assert.equal(r.code, 0, r.stderr);
    const kinds = st.requests.map((q) => `${q.method} ${Object.keys(q.query).sort().join(',')}`);
    for (const k of ['PUT ', 'POST uploads', 'PUT partNumber,uploadId', 'POST uploadId', 'GET ', 'GET list-type,max-keys,prefix', 'GET prefix,uploads', 'DELETE '])
      assert.ok(kinds.includes(k), `${k} in ${kinds}`);
    assert.equal(st.requests.filter((q) => q.method === 'PUT' && q.query.partNumber).length, 3);
    for (const q of st.requests) assert.equal(q.ok, true, `${q.method} ${q.path}: ${q.code}`);
  });

  test('a listing over pages follows the continuation token', async () => {
    for (let i = 0; i < 1003; i++) st.objects.set(`pages/k${String(i).padStart(4, '0')}`, { body: Buffer.from('x'), meta: {}, mtime: Date.now(), etag: 'e' });
    const r = await tuskoS3(['ls', 'pages/'], env(st));
    assert.equal(r.code, 0, r.stderr);
    const keys = r.stdout.trim().split('\n').map((l) => l.split('\t')[2]);
    assert.equal(keys.length, 1003);
    assert.equal(keys[1002], 'pages/k1002');
    for (const k of keys) st.objects.delete(k);
  });

  test('5xx answers are retried within S3_MAX_ATTEMPTS', async () => {
    st.failures.push({ when: (q) => q.method === 'PUT', status: 503, code: 'SlowDown', times: 2 });
    let r = await tuskoS3(['put', 'retry/ok.bin', file('r1', 'abc')], env(st, { S3_MAX_ATTEMPTS: '3' }));
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /attempts 3/);
    st.failures.push({ when: (q) => q.method === 'PUT', status: 500, times: 5 });
    r = await tuskoS3(['put', 'retry/no.bin', file('r2', 'abc')], env(st, { S3_MAX_ATTEMPTS: '2' }));
    assert.equal(r.code, 1);
    assert.match(r.stderr, /InternalError \(HTTP 500\)/);
    assert.equal(st.failures.at(-1).times, 3); // two tries, no more
    assert.equal(st.objects.has('retry/no.bin'), false);
    st.failures.length = 0;
    // a 4xx is not retried
    st.requests.length = 0;
    r = await tuskoS3(['put', 'retry/x.bin', file('r3', 'abc')], env(st, { S3_SECRET_ACCESS_KEY: 'wrong', S3_MAX_ATTEMPTS: '4' }));
    assert.equal(st.requests.length, 1);
  });

  test('a part failing every time: the upload is aborted and no object is left', async () => {
    st.requests.length = 0;
    st.failures.push({ when: (q) => q.query.partNumber === '2', status: 500, times: 100 });
    const r = await tuskoS3(['put', 'abort/big.bin', file('b3', crypto.randomBytes(12 * 1024 * 1024))], env(st, { S3_MAX_ATTEMPTS: '3' }));
    st.failures.length = 0;
    assert.equal(r.code, 1);
    assert.match(r.stderr, /InternalError/);
    assert.equal(st.requests.filter((q) => q.query.partNumber === '2').length, 3);
    assert.equal(st.requests.filter((q) => q.query.partNumber === '3').length, 0);
    assert.ok(st.requests.some((q) => q.method === 'DELETE' && q.query.uploadId));
    assert.equal(st.uploads.size, 0);
    assert.equal(st.objects.has('abort/big.bin'), false);
  });

  test('a wrong secret: refused with the store\'s code; the secret is in no output', async () => {
    const r = await tuskoS3(['put', 'w/x.bin', file('w', 'abc')], env(st, { S3_SECRET_ACCESS_KEY: 'not-the-secret-Zq81' }));
    assert.equal(r.code, 1);
    assert.match(r.stderr, /SignatureDoesNotMatch \(HTTP 403\)/);
    assert.ok(!(r.stdout + r.stderr).includes('not-the-secret-Zq81'));
    const c = await tuskoS3(['check'], env(st, { S3_ACCESS_KEY_ID: 'AKIDNOBODY' }));
    assert.equal(c.code, 1);
    assert.match(c.stderr, /InvalidAccessKeyId/);
  });

  test('no server at the endpoint: a network error, retried, then a clear failure', async () => {
    const r = await tuskoS3(['check'], { ...env(st), S3_ENDPOINT: 'http://127.0.0.1:9', S3_MAX_ATTEMPTS: '2' });
    assert.equal(r.code, 1);
    assert.match(r.stderr, /NetworkError/);
  });
});
