// sandboxd's Kubernetes client (src/sandboxd/k8s.c) against the stand-in API
// server: its unit binary's live tests run with K8S_TEST_* pointing here —
// TLS verified against a CA made here (and refused with the system's roots),
// the token file read again when it rotates and after a 401, create, list by
// label, the JSON Patch claim (200, then 422), a merge patch, delete with a uid
// precondition (409, then 200), 404, a watch from the list's version with the
// selector exit as DELETED, and ERROR 410 for a version the server dropped.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { BUILD, tmpdir } from '../../lib/harness.mjs';
import { startStandin, makeTestCA } from '../../lib/k8s-standin.mjs';

test('the C client against the stand-in', async () => {
  const dir = tmpdir('tusko-k8sc-');
  const ca = makeTestCA(dir, execFileSync);
  // no kubelet: no status writes, so the watch sees exactly the client's changes
  const api = await startStandin({ cert: fs.readFileSync(ca.cert), key: fs.readFileSync(ca.key),
    tokens: ['tok-good'], kubelet: () => {} });
  try {
    api.compact(); // versions before now are gone: watching from 1 is a 410
    const bin = path.join(BUILD, 'tests/sandboxd/test_k8s');
    const r = await new Promise((resolve) => {
      const c = spawn(bin, [], { env: { ...process.env, K8S_TEST_SERVER: api.url, K8S_TEST_CA: ca.ca,
        K8S_TEST_DIR: dir, K8S_TEST_OLD_RV: '1' }, stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      c.stdout.on('data', (d) => { out += d; });
      c.stderr.on('data', (d) => { out += d; });
      const t = setTimeout(() => c.kill('SIGKILL'), 60000);
      c.on('close', (code) => { clearTimeout(t); resolve({ code, out }); });
    });
    assert.equal(r.code, 0, r.out);
    assert.doesNotMatch(r.out, /skipped/);
    // what the stand-in saw: the claim's media type, and one 422
    const patches = api.audit.filter((a) => a.verb === 'PATCH');
    assert.ok(patches.some((a) => a.contentType === 'application/json-patch+json' && a.code === 422));
    assert.ok(patches.some((a) => a.contentType === 'application/merge-patch+json' && a.code === 200));
    assert.ok(api.audit.some((a) => a.code === 401));
    // the client keeps its connections (tk_httpc_share): far fewer TLS
    // handshakes than requests
    assert.ok(api.connections * 3 < api.audit.length, `${api.connections} connections for ${api.audit.length} requests`);
  } finally {
    await api.close();
  }
});
