// The tests' S3 servers: s3rver (npm, pinned in tests/package-lock.json) for
// functional round-trips, and the verifying stand-in (s3-standin.mjs) for
// signatures, aborts and failures. Plus an async runner of `tusko s3`.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

import S3rver from 's3rver';

import { BUILD, ROOT, sanitizerReport, tmpdir } from './harness.mjs';

export async function startS3rver({ bucket = 'snaps' } = {}) {
  const directory = tmpdir('tusko-s3rver-');
  const s = new S3rver({ address: '127.0.0.1', port: 0, directory, silent: true, configureBuckets: [{ name: bucket }] });
  const a = await s.run();
  const url = `http://127.0.0.1:${a.port}`;
  return {
    url,
    bucket,
    accessKey: 'S3RVER',
    secretKey: 'S3RVER',
    directory,
    // the tests' own client: s3rver serves anonymous GETs
    get: async (key) => {
      const r = await fetch(`${url}/${bucket}/${key.split('/').map(encodeURIComponent).join('/')}`);
      return { status: r.status, headers: r.headers, body: Buffer.from(await r.arrayBuffer()) };
    },
    close: async () => {
      await s.close();
      fs.rmSync(directory, { recursive: true, force: true });
    },
  };
}

// the S3_* settings of a store
export function s3Env(s, extra = {}) {
  return { S3_ENDPOINT: s.url, S3_BUCKET: s.bucket, S3_ACCESS_KEY_ID: s.accessKey, S3_SECRET_ACCESS_KEY: s.secretKey, S3_REGION: s.region || 'us-east-1', ...extra };
}

// runs `tusko s3 ...` without blocking the event loop (the servers are in this process)
export function tuskoS3(args, env, { timeoutMs = 120000 } = {}) {
  return new Promise((resolve, reject) => {
    execFile(path.join(BUILD, 'tusko'), ['s3', ...args], {
      cwd: ROOT,
      env: { PATH: process.env.PATH, HOME: process.env.HOME || '/root', LANG: 'C.UTF-8', LSAN_OPTIONS: `suppressions=${path.join(ROOT, 'tests/lsan.supp')}:print_suppressions=0`, ...env },
      encoding: 'utf8',
      timeout: timeoutMs,
      maxBuffer: 512 << 20,
    }, (err, stdout, stderr) => {
      const report = sanitizerReport(stdout + stderr);
      if (report) return reject(new Error(`tusko s3: sanitizer report:\n${report}`));
      resolve({ code: err ? (err.code ?? 1) : 0, stdout, stderr });
    });
  });
}
