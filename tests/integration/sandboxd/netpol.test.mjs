// A sandbox's own networkPolicy on the egress proxy, and the egress API's
// /policy (GET, PATCH, DELETE) on its egress endpoint (port 18080) with
// OPENSANDBOX-EGRESS-AUTH: the rules narrow what the operator's list admits
// (loopback pages allowed by EGRESS_ALLOW here), never widen it, and a change
// holds from the next connection. Our stand-in for upstream's two internet-bound
// networkPolicy tests (pypi.org and www.github.com), against loopback servers.
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';

import { stopAll } from '../../lib/harness.mjs';
import { KEY, RUNTIME, startSandboxd } from './sbx.mjs';

after(stopAll);

const EGRESS_PORT = 18080;

// A GET through the sandbox's proxy (urllib, NO_PROXY dropped: the targets here
// are the host's loopback): the status and the proxy's X-Tusko-Egress code.
async function curl(api, id, url) {
  const r = await api.exec(id, `env -u NO_PROXY -u no_proxy python3 - <<'PY'
import json, urllib.request, urllib.error
try:
    with urllib.request.urlopen(${JSON.stringify(url)}, timeout=10) as r:
        print(json.dumps({'status': r.status, 'egress': None}))
except urllib.error.HTTPError as e:
    print(json.dumps({'status': e.code, 'egress': e.headers.get('X-Tusko-Egress')}))
except Exception as e:
    print(json.dumps({'status': 0, 'egress': None, 'error': str(e)}))
PY`);
  const out = JSON.parse(r.stdout.trim().split('\n').pop() || '{}');
  return { ...out, raw: r.stdout + r.stderr };
}

describe(`networkPolicy and /policy (${RUNTIME})`, () => {
  let s, api, id, pageA, pageB, trap, pa, pb, tp;
  let trapConnections = 0;
  before(async () => {
    const page = (name) => http.createServer((req, res) => res.end(`${name} ${req.url}`));
    pageA = page('A');
    pageB = page('B');
    await new Promise((r) => pageA.listen(0, '127.0.0.1', r));
    await new Promise((r) => pageB.listen(0, '127.0.0.1', r));
    pa = pageA.address().port;
    pb = pageB.address().port;
    trap = net.createServer((c) => {
      trapConnections++;
      c.destroy();
    });
    await new Promise((r) => trap.listen(0, '127.0.0.1', r));
    tp = trap.address().port;
    s = await startSandboxd({
      env: { EGRESS_ALLOW: `127.0.0.1:${pa},127.0.0.1:${pb},localhost:${pa},localhost:${pb}`, EGRESS_ALLOWED_PORTS: String(tp) },
    });
    api = s.api;
    const c = await api.create({
      networkPolicy: { defaultAction: 'deny', egress: [{ action: 'allow', target: 'localhost' }] },
    });
    assert.equal(c.status, 202, c.text);
    id = c.json.id;
  });
  after(async () => {
    if (id) await api.del(id);
    await s?.stop();
    pageA?.close();
    pageB?.close();
    trap?.close();
  });

  async function egressEndpoint(sid) {
    const r = await api.call('GET', `/v1/sandboxes/${sid}/endpoints/${EGRESS_PORT}?use_server_proxy=true`);
    assert.equal(r.status, 200, r.text);
    assert.ok(r.json.endpoint.endsWith(`/v1/sandboxes/${sid}/proxy/${EGRESS_PORT}`), r.json.endpoint);
    assert.ok(r.json.headers['OPENSANDBOX-EGRESS-AUTH'], JSON.stringify(r.json.headers));
    assert.equal(r.json.headers['X-EXECD-ACCESS-TOKEN'], undefined);
    return r.json;
  }
  async function policy(sid, method, body, auth) {
    const ep = await egressEndpoint(sid);
    const headers = { 'OPEN-SANDBOX-API-KEY': KEY };
    if (auth !== null) headers['OPENSANDBOX-EGRESS-AUTH'] = auth ?? ep.headers['OPENSANDBOX-EGRESS-AUTH'];
    if (body !== undefined) headers['content-type'] = 'application/json';
    const res = await fetch(`http://${ep.endpoint}/policy`, { method, headers, body: body !== undefined ? JSON.stringify(body) : undefined });
    const text = await res.text();
    return { status: res.status, json: text ? JSON.parse(text) : null, text };
  }

  test('the create request\'s policy decides: the allowed name passes, the rest is refused by "policy"', async () => {
    let r = await curl(api, id, `http://localhost:${pa}/a`);
    assert.equal(r.status, 200, r.raw);
    r = await curl(api, id, `http://127.0.0.1:${pb}/b`); // admitted by the operator, not by the policy
    assert.equal(r.status, 403, r.raw);
    assert.equal(r.egress, 'policy');
  });

  test('GET /policy answers the policy, with the egress endpoint\'s header only', async () => {
    const g = await policy(id, 'GET');
    assert.equal(g.status, 200, g.text);
    assert.deepEqual(g.json, {
      status: 'ok',
      mode: 'deny_all',
      enforcementMode: 'proxy',
      policy: { defaultAction: 'deny', egress: [{ action: 'allow', target: 'localhost' }] },
    });
    assert.equal((await policy(id, 'GET', undefined, null)).status, 401);
    assert.equal((await policy(id, 'GET', undefined, 'wrong-token')).status, 401);
    // the execd token is not the egress one
    const execdToken = await api.token(id);
    assert.equal((await policy(id, 'GET', undefined, execdToken)).status, 401);
  });

  test('PATCH puts its rules first and holds from the next connection; DELETE removes by target', async () => {
    // first match decides: the name's deny before the CIDR's allow (which
    // would also match localhost, every address of it being inside)
    let p = await policy(id, 'PATCH', [
      { action: 'deny', target: 'localhost' },
      { action: 'allow', target: '127.0.0.0/8' },
    ]);
    assert.equal(p.status, 200, p.text);
    assert.equal(p.json.status, 'ok');
    const g = await policy(id, 'GET');
    assert.deepEqual(g.json.policy.egress, [
      { action: 'deny', target: 'localhost' },
      { action: 'allow', target: '127.0.0.0/8' },
    ]);
    let r = await curl(api, id, `http://127.0.0.1:${pb}/b`);
    assert.equal(r.status, 200, r.raw);
    r = await curl(api, id, `http://localhost:${pa}/a`);
    assert.equal(r.status, 403, r.raw);
    assert.equal(r.egress, 'policy');
    p = await policy(id, 'DELETE', ['127.0.0.0/8', 'not-there.example']);
    assert.equal(p.status, 200, p.text);
    assert.deepEqual((await policy(id, 'GET')).json.policy.egress, [{ action: 'deny', target: 'localhost' }]);
    r = await curl(api, id, `http://127.0.0.1:${pb}/b`);
    assert.equal(r.status, 403, r.raw); // the default again
    for (const bad of [[], [{ action: 'allow' }], { action: 'allow', target: 'x.com' }, [{ action: 'allow', target: 'bad host' }]]) {
      assert.equal((await policy(id, 'PATCH', bad)).status, 400, JSON.stringify(bad));
    }
    assert.equal((await policy(id, 'DELETE', [])).status, 400);
  });

  test('a policy never admits what the operator\'s checks refuse', async () => {
    const c = await api.create({
      networkPolicy: { defaultAction: 'allow', egress: [{ action: 'allow', target: '127.0.0.1' }] },
    });
    assert.equal(c.status, 202, c.text);
    try {
      const r = await curl(api, c.json.id, `http://127.0.0.1:${tp}/`);
      assert.equal(r.status, 403, r.raw);
      assert.equal(r.egress, 'blocked_address');
      assert.equal(trapConnections, 0);
      // a sandbox without a policy: the operator's list alone
      const ok = await curl(api, c.json.id, `http://127.0.0.1:${pa}/`);
      assert.equal(ok.status, 200, ok.raw);
    } finally {
      await api.del(c.json.id);
    }
  });

  test('a sandbox without a policy gets one by PATCH; bad policies at create are 400', async () => {
    const c = await api.create({});
    assert.equal(c.status, 202, c.text);
    try {
      assert.equal((await policy(c.json.id, 'GET')).json.policy.defaultAction, 'allow');
      assert.equal((await curl(api, c.json.id, `http://127.0.0.1:${pa}/`)).status, 200);
      assert.equal((await policy(c.json.id, 'PATCH', [{ action: 'deny', target: '127.0.0.1' }])).status, 200);
      const r = await curl(api, c.json.id, `http://127.0.0.1:${pa}/`);
      assert.equal(r.status, 403, r.raw);
      assert.equal(r.egress, 'policy');
    } finally {
      await api.del(c.json.id);
    }
    for (const np of [{ defaultAction: 'maybe' }, { egress: [{ action: 'allow', target: 'a b' }] }, { egress: 'x' }, { other: 1 }]) {
      const b = await api.create({ networkPolicy: np });
      assert.equal(b.status, 400, `${JSON.stringify(np)}: ${b.text}`);
    }
  });
});

describe('networkPolicy without a way out (SANDBOX_NETWORK=none)', () => {
  test('a policy that allows anything is 400; deny-all is accepted', async () => {
    const s = await startSandboxd({ env: { SANDBOX_NETWORK: 'none' } });
    try {
      const bad = await s.api.create({ networkPolicy: { defaultAction: 'deny', egress: [{ action: 'allow', target: 'pypi.org' }] } });
      assert.equal(bad.status, 400, bad.text);
      assert.match(bad.json.message, /SANDBOX_NETWORK=none/);
      const ok = await s.api.create({ networkPolicy: { defaultAction: 'deny' } });
      assert.equal(ok.status, 202, ok.text);
      await s.api.del(ok.json.id);
    } finally {
      await s.stop();
    }
  });
});
