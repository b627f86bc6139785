// A sandbox's way out (SANDBOX_NETWORK=proxy, the default): code in a real
// sandbox reaches an allowed loopback page of the host only through the
// checking proxy sandboxd serves in its namespace; refused addresses are
// answered 403 and a trap listener on the host's loopback sees nothing; direct
// connections and DNS fail; each sandbox has its own byte cap.
// SANDBOX_NETWORK=none keeps the old behaviour: no proxy, nothing out.
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';

import { stopAll, tmpdir } from '../../lib/harness.mjs';
import { RUNTIME, removeStateDir, startSandboxd } from './sbx.mjs';

after(stopAll);


// Runs Python in the sandbox and returns the JSON it prints last.
async function py(api, id, code, env = '') {
  const r = await api.exec(id, `${env} python3 - <<'PY'\nimport json, os, socket, errno, urllib.request, urllib.error\n${code}\nPY`);
  assert.equal(r.status, 200, r.text);
  assert.equal(r.exitCode, 0, `python failed: ${r.stdout} ${r.stderr}`);
  return JSON.parse(r.stdout.trim().split('\n').pop());
}

// urllib through the proxy of the environment (NO_PROXY dropped: the targets
// here are the host's loopback, which a real target would not be).
const FETCH = `
def fetch(url):
    try:
        with urllib.request.urlopen(url, timeout=15) as r:
            return {'status': r.status, 'body': r.read().decode()}
    except urllib.error.HTTPError as e:
        return {'status': e.code, 'egress': e.headers.get('X-Tusko-Egress'), 'body': e.read().decode()}
    except Exception as e:
        return {'error': type(e).__name__ + ': ' + str(e)}
`;
const VIA_PROXY = 'env -u NO_PROXY -u no_proxy';

// A raw CONNECT to the proxy on the sandbox's loopback, then one HTTP request
// through the tunnel.
const TUNNEL = `
def tunnel(target, host_header):
    s = socket.create_connection(('127.0.0.1', 3128), timeout=15)
    s.sendall(f'CONNECT {target} HTTP/1.1\\r\\nHost: {target}\\r\\n\\r\\n'.encode())
    head = b''
    while b'\\r\\n\\r\\n' not in head:
        b = s.recv(1)
        if not b:
            break
        head += b
    status = head.split(b' ')[1].decode() if head else ''
    if status != '200':
        return {'status': status, 'head': head.decode(errors='replace')}
    s.sendall(f'GET /tunnel HTTP/1.1\\r\\nHost: {host_header}\\r\\nConnection: close\\r\\n\\r\\n'.encode())
    data = b''
    while True:
        b = s.recv(65536)
        if not b:
            break
        data += b
    return {'status': status, 'inner': data.decode(errors='replace')}
`;

describe(`sandbox egress through the checking proxy (${RUNTIME})`, () => {
  let sbx, api, id, id2, page, trap, pagePort, trapPort;
  let trapConnections = 0;
  const seen = [];
  before(async () => {
    page = http.createServer((req, res) => {
      seen.push(req.url);
      if (req.url === '/big') {
        res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': 1 << 20 });
        res.end(Buffer.alloc(1 << 20, 120));
        return;
      }
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end(`hello from the host page ${req.url}`);
    });
    await new Promise((r) => page.listen(0, '127.0.0.1', r));
    pagePort = page.address().port;
    trap = net.createServer((c) => {
      trapConnections++;
      c.destroy();
    });
    await new Promise((r) => trap.listen(0, '127.0.0.1', r));
    trapPort = trap.address().port;
    sbx = await startSandboxd({
      env: {
        SANDBOX_WORKSPACE_SIZE: '64m',
        SANDBOX_TMP_SIZE: '32m',
        EGRESS_ALLOW: `127.0.0.1:${pagePort}`,
        // the trap's port is allowed as a port: what refuses it is the address rule
        EGRESS_ALLOWED_PORTS: String(trapPort),
        EGRESS_MAX_BYTES: '256K',
      },
    });
    api = sbx.api;
    for (const slot of [0, 1]) {
      const c = await api.create({ resourceLimits: { memory: '256Mi', pids: '64', cpu: '1' } });
      assert.equal(c.status, 202, c.text);
      if (slot === 0) id = c.json.id;
      else id2 = c.json.id;
    }
  });
  after(async () => {
    if (id) await api.del(id);
    if (id2) await api.del(id2);
    await sbx?.stop();
    page?.close();
    trap?.close();
  });

  test('the proxy settings are in the sandbox environment', async () => {
    const r = await api.exec(id, 'echo "$HTTP_PROXY|$HTTPS_PROXY|$http_proxy|$https_proxy|$NO_PROXY"');
    assert.equal(r.stdout.trim(), 'http://127.0.0.1:3128|http://127.0.0.1:3128|http://127.0.0.1:3128|http://127.0.0.1:3128|localhost,127.0.0.1,::1');
  });

  test('an allowed loopback page of the host is reached through the proxy (HTTP and CONNECT)', async () => {
    const res = await py(api, id, `${FETCH}${TUNNEL}
print(json.dumps({'http': fetch('http://127.0.0.1:${pagePort}/hello?x=1'), 'connect': tunnel('127.0.0.1:${pagePort}', '127.0.0.1:${pagePort}')}))`, VIA_PROXY);
    assert.deepEqual(res.http, { status: 200, body: 'hello from the host page /hello?x=1' });
    assert.equal(res.connect.status, '200');
    assert.match(res.connect.inner, /^HTTP\/1\.1 200 OK\r\n[\s\S]*\r\nhello from the host page \/tunnel\r\n/);
    assert.ok(seen.includes('/hello?x=1') && seen.includes('/tunnel'));
  });

  test('loopback, private, link-local and metadata addresses are refused and the trap sees nothing', async () => {
    const res = await py(api, id, `${FETCH}${TUNNEL}
out = {}
for name, url in [('loopback', 'http://127.0.0.1:${trapPort}/'), ('loopback_odd', 'http://2130706433:${trapPort}/'),
                  ('localhost', 'http://localhost:${trapPort}/'), ('v6_loopback', 'http://[::1]:${trapPort}/'),
                  ('metadata', 'http://169.254.169.254/latest/meta-data/'), ('private', 'http://10.0.0.1/'),
                  ('private192', 'http://192.168.0.1/'), ('link_local', 'http://169.254.1.1/')]:
    out[name] = fetch(url)
for name, target in [('t_loopback', '127.0.0.1:${trapPort}'), ('t_mapped', '[::ffff:127.0.0.1]:${trapPort}'),
                     ('t_metadata', '169.254.169.254:443'), ('t_private', '172.16.0.1:443'),
                     ('t_port', '127.0.0.1:22')]:
    out[name] = tunnel(target, 'x')
print(json.dumps(out))`, VIA_PROXY);
    for (const k of ['loopback', 'loopback_odd', 'localhost', 'v6_loopback', 'metadata', 'private', 'private192', 'link_local']) {
      assert.equal(res[k].status, 403, `${k}: ${JSON.stringify(res[k])}`);
      assert.equal(res[k].egress, 'blocked_address', k);
    }
    assert.match(res.metadata.body, /169\.254\.169\.254 is link-local .*cloud metadata/);
    assert.match(res.loopback.body, /127\.0\.0\.1 is loopback/);
    for (const k of ['t_loopback', 't_mapped', 't_metadata', 't_private', 't_port']) {
      assert.equal(res[k].status, '403', `${k}: ${JSON.stringify(res[k])}`);
    }
    assert.match(res.t_port.head, /X-Tusko-Egress: (blocked_address|bad_port)/);
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(trapConnections, 0, 'a refused request reached the trap');
  });

  test('direct connections and DNS are impossible', async () => {
    const res = await py(api, id, `
out = {}
for name, addr in [('host_page', ('127.0.0.1', ${pagePort})), ('trap', ('127.0.0.1', ${trapPort})), ('outside', ('10.0.2.2', 80))]:
    try:
        socket.create_connection(addr, timeout=3).close()
        out[name] = 'connected'
    except OSError as e:
        out[name] = errno.errorcode.get(e.errno, str(e))
try:
    socket.getaddrinfo('example.com', 80)
    out['dns'] = 'resolved'
except socket.gaierror as e:
    out['dns'] = 'failed'
print(json.dumps(out))`);
    assert.deepEqual(res, { host_page: 'ECONNREFUSED', trap: 'ECONNREFUSED', outside: 'ENETUNREACH', dns: 'failed' });
    assert.equal(trapConnections, 0);
  });

  test('each sandbox has its own byte cap', async () => {
    const big = `${FETCH}
r = fetch('http://127.0.0.1:${pagePort}/big')
after = fetch('http://127.0.0.1:${pagePort}/hello')
print(json.dumps({'big': {k: (v if k != 'body' else len(v)) for k, v in r.items()}, 'after': after}))`;
    const res = await py(api, id, big, VIA_PROXY);
    // 1 MiB asked for, 256 KiB allowed: the body is cut short, then the sandbox is refused
    assert.ok(res.big.error && /IncompleteRead|RemoteDisconnected|ConnectionReset/.test(res.big.error), JSON.stringify(res.big));
    assert.equal(res.after.status, 403);
    assert.equal(res.after.egress, 'byte_cap');
    // the other sandbox's cap is its own
    const res2 = await py(api, id2, `${FETCH}
print(json.dumps(fetch('http://127.0.0.1:${pagePort}/second')))`, VIA_PROXY);
    assert.deepEqual(res2, { status: 200, body: 'hello from the host page /second' });
  });

  test('after kill -9 of sandboxd the way out is made again for the sandboxes found', async () => {
    const stateDir = tmpdir('sbxd-');
    const env = { SANDBOX_WORKSPACE_SIZE: '64m', SANDBOX_TMP_SIZE: '32m', EGRESS_ALLOW: `127.0.0.1:${pagePort}`, EGRESS_ALLOWED_PORTS: String(trapPort) };
    const s1 = await startSandboxd({ stateDir, env });
    const c = await s1.api.create({ resourceLimits: { memory: '256Mi', pids: '64', cpu: '1' } });
    assert.equal(c.status, 202, c.text);
    const rid = c.json.id;
    const probe = `${FETCH}
print(json.dumps({'ok': fetch('http://127.0.0.1:${pagePort}/restart'), 'trap': fetch('http://127.0.0.1:${trapPort}/')}))`;
    let res = await py(s1.api, rid, probe, VIA_PROXY);
    assert.equal(res.ok.status, 200);
    await s1.kill9();
    // the old process's listener is gone with it: nothing answers in the meantime
    const s2 = await startSandboxd({ stateDir, env });
    res = await py(s2.api, rid, probe, VIA_PROXY);
    assert.deepEqual(res.ok, { status: 200, body: 'hello from the host page /restart' });
    assert.equal(res.trap.status, 403);
    assert.equal(res.trap.egress, 'blocked_address');
    assert.equal(trapConnections, 0);
    assert.equal((await s2.api.del(rid)).status, 204);
    await s2.stop();
    removeStateDir(stateDir);
  });
});

describe(`SANDBOX_NETWORK=none (${RUNTIME})`, () => {
  let sbx, api, id;
  before(async () => {
    sbx = await startSandboxd({ env: { SANDBOX_NETWORK: 'none', SANDBOX_WORKSPACE_SIZE: '64m', SANDBOX_TMP_SIZE: '32m' } });
    api = sbx.api;
    const c = await api.create({ resourceLimits: { memory: '256Mi', pids: '64', cpu: '1' } });
    assert.equal(c.status, 202, c.text);
    id = c.json.id;
  });
  after(async () => {
    if (id) await api.del(id);
    await sbx?.stop();
  });

  test('no proxy in the environment and nothing listens on 3128', async () => {
    const res = await py(api, id, `
out = {'env': os.environ.get('HTTP_PROXY', '')}
try:
    socket.create_connection(('127.0.0.1', 3128), timeout=3).close()
    out['proxy'] = 'connected'
except OSError as e:
    out['proxy'] = errno.errorcode.get(e.errno, str(e))
print(json.dumps(out))`);
    assert.deepEqual(res, { env: '', proxy: 'ECONNREFUSED' });
  });
});
