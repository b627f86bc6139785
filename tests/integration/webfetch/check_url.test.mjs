// `tusko check-url URL`: the outbound fetch check for operators. It prints the
// verdict (and the addresses a fetch would connect to) without fetching, needs
// no database, honours the SSRF_* settings and refuses bad ones. A bad SSRF_*
// setting also refuses tusko's start-up with the variable named. Only IP
// literals and localhost (from /etc/hosts) are used: no DNS query leaves.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { runProgram, stopAll } from '../../lib/harness.mjs';
import { startTrap } from './lib.mjs';

after(stopAll);

const check = (url, env = {}) => runProgram('tusko', url === undefined ? ['check-url'] : ['check-url', url], { env });

describe('tusko check-url', () => {
  let trap;
  before(async () => {
    trap = await startTrap('127.0.0.1');
  });
  after(async () => {
    await trap.close();
  });

  const refused = [
    ['http://169.254.169.254/latest/meta-data/', 'blocked_address', /^169\.254\.169\.254 is link-local \(169\.254\.0\.0\/16\): a cloud metadata service/],
    ['http://127.0.0.1/', 'blocked_address', /^127\.0\.0\.1 is loopback \(127\.0\.0\.0\/8\)$/],
    ['http://2130706433/', 'blocked_address', /^127\.0\.0\.1 is loopback/],
    ['http://0x7f.1/', 'blocked_address', /^127\.0\.0\.1 is loopback/],
    ['http://[::ffff:10.0.0.1]/', 'blocked_address', /10\.0\.0\.1/],
    ['http://localhost/', 'blocked_address', /^localhost resolves to (127\.0\.0\.1|::1), which is loopback/],
    ['http://192.168.1.1/', 'blocked_address', /private/],
    ['http://100.64.0.1/', 'blocked_address', /100\.64\.0\.0\/10/],
    ['http://93.184.215.14:8080/', 'bad_port', /^port 8080 is not allowed \(allowed: 80, 443; see SSRF_ALLOWED_PORTS\)$/],
    ['file:///etc/passwd', 'bad_scheme', /file/],
    ['http://user:secret@93.184.215.14/', 'userinfo', /./],
    ['not a url', 'bad_url', /./],
  ];
  for (const [url, code, reason] of refused) {
    test(`refused: ${url}`, () => {
      const r = check(url);
      assert.equal(r.code, 1, r.stderr);
      const m = r.stdout.match(/^refused (\w+): (.*)\n$/);
      assert.ok(m, r.stdout);
      assert.equal(m[1], code);
      assert.match(m[2], reason);
    });
  }

  test('allowed: a public address, with the addresses a fetch would connect to', () => {
    let r = check('http://93.184.215.14/path?q=1#frag');
    assert.equal(r.code, 0, r.stderr);
    const lines = r.stdout.trimEnd().split('\n');
    assert.match(lines[0], /^allowed http:\/\/93\.184\.215\.14\/path\?q=1 \(/);
    assert.deepEqual(lines.slice(1), ['  connect to 93.184.215.14 port 80']);
    r = check('https://[2606:4700:4700::1111]/');
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /\n {2}connect to \[2606:4700:4700::1111\] port 443\n$/);
  });

  test('honours SSRF_ALLOW, SSRF_ALLOWED_PORTS and SSRF_DENY, and fetches nothing', async () => {
    const url = `http://127.0.0.1:${trap.port}/admin`;
    let r = check(url);
    assert.equal(r.code, 1);
    assert.match(r.stdout, /^refused bad_port: /);
    r = check(url, { SSRF_ALLOWED_PORTS: String(trap.port) });
    assert.equal(r.code, 1);
    assert.match(r.stdout, /^refused blocked_address: 127\.0\.0\.1 is loopback/);
    r = check(url, { SSRF_ALLOW: '127.0.0.1', SSRF_ALLOWED_PORTS: `8080,${trap.port}` });
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.match(r.stdout, /^allowed http:\/\/127\.0\.0\.1:\d+\/admin \(.*SSRF_ALLOW entry 127\.0\.0\.1\/32/);
    assert.ok(r.stdout.includes(`\n  connect to 127.0.0.1 port ${trap.port}\n  admitted by the operator allowlist (SSRF_ALLOW)\n`), r.stdout);
    // a name in the allowlist: localhost
    r = check(`http://localhost:${trap.port}/`, { SSRF_ALLOW: 'localhost', SSRF_ALLOWED_PORTS: String(trap.port) });
    assert.equal(r.code, 0, r.stdout);
    // the denylist wins
    r = check('http://93.184.215.14/', { SSRF_DENY: '93.184.215.0/24', SSRF_ALLOW: '93.184.215.14' });
    assert.equal(r.code, 1);
    assert.match(r.stdout, /^refused denied_host: 93\.184\.215\.14 is in the operator denylist/);
    // a check is not a fetch: the trap saw nothing
    await new Promise((res) => setTimeout(res, 50));
    assert.equal(trap.connections, 0);
  });

  test('a bad setting is refused with the variable named (exit 2)', () => {
    let r = check('http://93.184.215.14/', { SSRF_ALLOW: '10.1.2.3/16' });
    assert.equal(r.code, 2);
    assert.match(r.stderr, /SSRF_ALLOW: "10\.1\.2\.3\/16": host bits are set/);
    r = check('http://93.184.215.14/', { SSRF_ALLOWED_PORTS: '99999' });
    assert.equal(r.code, 2);
    assert.match(r.stderr, /SSRF_ALLOWED_PORTS/);
    r = check('http://93.184.215.14/', { FETCH_TIMEOUT: 'soon' });
    assert.equal(r.code, 2);
    assert.match(r.stderr, /FETCH_TIMEOUT/);
  });

  test('usage: one URL; --help lists the settings; tusko --help lists the command', () => {
    let r = check(undefined);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /usage: tusko check-url URL/);
    r = runProgram('tusko', ['check-url', 'http://a.example/', 'http://b.example/']);
    assert.equal(r.code, 2);
    r = runProgram('tusko', ['check-url', '--help']);
    assert.equal(r.code, 0);
    for (const v of ['SSRF_ALLOW', 'SSRF_DENY', 'SSRF_ALLOWED_PORTS', 'FETCH_MAX_BYTES', 'FETCH_TIMEOUT', 'FETCH_MAX_REDIRECTS'])
      assert.match(r.stdout, new RegExp(v));
    assert.doesNotMatch(r.stdout, /DATABASE_URL/);
    r = runProgram('tusko', ['--help']);
    assert.equal(r.code, 0);
    assert.match(r.stdout, /\n {2}check-url URL {2,}check URL against the outbound fetch rules/);
    assert.match(r.stdout, /WEB_FETCH_MAX_CHARS .*\[default: 20000\]/);
    assert.match(r.stdout, /SSRF_ALLOW/);
  });
});

describe('tusko start-up with the SSRF settings', () => {
  test('a bad SSRF_* or FETCH_* value refuses start-up, naming the variable', () => {
    const env = { DATABASE_URL: 'postgres://tusko@127.0.0.1:1/none', TUSKO_LISTEN: '127.0.0.1:0' };
    for (const [k, v] of [['SSRF_DENY', 'http://x/'], ['SSRF_ALLOW', '300.1.1.1'], ['FETCH_MAX_BYTES', '5T'], ['FETCH_MAX_REDIRECTS', '50']]) {
      const r = runProgram('tusko', [], { env: { ...env, [k]: v } });
      assert.equal(r.code, 2, `${k}=${v}: ${r.stderr}`);
      assert.match(r.stderr, new RegExp(`^tusko: ${k}: `));
    }
  });
});
