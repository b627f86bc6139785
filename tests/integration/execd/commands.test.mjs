// tusko-execd commands: auth, ping, streamed foreground commands (incremental
// output proven by ordering), exit codes, interrupts of the whole process
// group, timeouts, background commands with logs, envs, cwd, uid/gid.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { stopAll } from '../../lib/harness.mjs';
import { checkError, checkResponse, pidAlive, req, startExecd, stream, texts, types, until } from './lib.mjs';

after(stopAll);

let ex;
before(async () => {
  ex = await startExecd();
});

describe('access', () => {
  test('without the token every route answers 401', async () => {
    for (const [m, p] of [['GET', '/ping'], ['POST', '/command'], ['GET', '/command/status/x'], ['DELETE', '/command?id=x']]) {
      const r = await req(ex.url, p, { method: m, token: false, json: m === 'POST' ? { command: 'true' } : undefined });
      assert.equal(r.status, 401, `${m} ${p}`);
      checkError(r.json);
    }
  });

  test('a wrong token of the same length is refused', async () => {
    const r = await req(ex.url, '/ping', { token: false, headers: { 'X-EXECD-ACCESS-TOKEN': 'execd-test-token-0123456789abcdeX' } });
    assert.equal(r.status, 401);
  });

  test('GET /ping answers 200 with the token', async () => {
    const r = await req(ex.url, '/ping');
    assert.equal(r.status, 200);
  });
});

describe('foreground commands', () => {
  test('output arrives incrementally: the first line comes while the command still waits', async () => {
    // The command prints "first" and then waits for a file that the test creates
    // only after it has received "first". Were output buffered until exit, the
    // command would never finish (its timeout would kill it and "second" would
    // never come).
    const go = path.join(ex.ws, 'go-' + process.pid);
    const r = await stream(ex.url, '/command', {
      command: `echo first; while [ ! -e '${go}' ]; do sleep 0.02; done; echo second`,
      timeout: 20000,
    }, {
      onEvent: (ev) => {
        if (ev.type === 'stdout' && ev.text === 'first') fs.writeFileSync(go, '');
        return false;
      },
    });
    assert.equal(r.status, 200);
    assert.deepEqual(texts(r.events, 'stdout'), ['first', 'second']);
    const t = types(r.events);
    assert.equal(t[0], 'init');
    assert.equal(t.at(-1), 'execution_complete');
    assert.equal(typeof r.events.at(-1).execution_time, 'number');
    for (const e of r.events) assert.equal(typeof e.timestamp, 'number');
    // upstream framing: bare JSON objects separated by blank lines
    assert.match(r.raw, /^\{"type":"init","text":"[^"]+","timestamp":\d+\}\n\n/);
  });

  test('stdout and stderr are separate events; blank lines are kept as "\\n"', async () => {
    const r = await stream(ex.url, '/command', { command: 'echo out; echo; echo err >&2' });
    assert.deepEqual(texts(r.events, 'stdout'), ['out', '\n']);
    assert.deepEqual(texts(r.events, 'stderr'), ['err']);
  });

  test('a non-zero exit is an error event CommandExecError with the code as evalue', async () => {
    const r = await stream(ex.url, '/command', { command: 'echo before; exit 7' });
    const err = r.events.find((e) => e.type === 'error');
    assert.ok(err, JSON.stringify(r.events));
    assert.equal(err.error.ename, 'CommandExecError');
    assert.equal(err.error.evalue, '7');
    assert.deepEqual(err.error.traceback, ['exit status 7']);
    assert.ok(!r.events.some((e) => e.type === 'execution_complete'));
    const st = await req(ex.url, `/command/status/${r.events[0].text}`);
    checkResponse('GET', '/command/status/{id}', st);
    assert.equal(st.json.running, false);
    assert.equal(st.json.exit_code, 7);
  });

  test('bad requests answer 400 with an ErrorResponse', async () => {
    for (const body of [{}, { command: '' }, { command: 1 }, { command: 'true', timeout: -1 }, { command: 'true', gid: 5 }, { command: 'true', envs: { 'A=B': 'x' } }, { command: 'a\u0000b' }]) {
      const r = await req(ex.url, '/command', { json: body });
      assert.equal(r.status, 400, JSON.stringify(body));
      checkResponse('POST', '/command', r);
    }
    const r = await req(ex.url, '/command', { body: '{not json', headers: { 'content-type': 'application/json' } });
    assert.equal(r.status, 400);
  });
});

describe('interrupt, timeout, environment', () => {
  test('DELETE /command?id= kills the whole process group', async () => {
    const pidFile = path.join(ex.ws, `child-${process.pid}.pid`);
    let id;
    const r = await stream(ex.url, '/command', {
      command: `sleep 300 & echo $! > '${pidFile}'; echo started; wait`,
    }, {
      onEvent: async (ev) => {
        if (ev.type === 'init') id = ev.text;
        if (ev.type === 'stdout' && ev.text === 'started') {
          const del = await req(ex.url, `/command?id=${encodeURIComponent(id)}`, { method: 'DELETE' });
          assert.equal(del.status, 200);
        }
        return false;
      },
    });
    const err = r.events.find((e) => e.type === 'error');
    assert.ok(err, JSON.stringify(r.events));
    assert.equal(err.error.ename, 'CommandExecError');
    assert.notEqual(err.error.evalue, '0');
    const child = Number(fs.readFileSync(pidFile, 'utf8'));
    assert.ok(child > 1);
    await until(() => !pidAlive(child), { what: `grandchild ${child} to die` });
    const st = await req(ex.url, `/command/status/${id}`);
    checkResponse('GET', '/command/status/{id}', st);
    assert.equal(st.json.running, false);
    // a second interrupt finds nothing running
    const again = await req(ex.url, `/command?id=${encodeURIComponent(id)}`, { method: 'DELETE' });
    assert.equal(again.status, 400);
    checkResponse('DELETE', '/command', again);
    const none = await req(ex.url, '/command?id=no-such-id', { method: 'DELETE' });
    assert.equal(none.status, 404);
    checkError(none.json);
  });

  test('a timeout kills the command and is reported as an error', async () => {
    const pidFile = path.join(ex.ws, `to-${process.pid}.pid`);
    const r = await stream(ex.url, '/command', { command: `sleep 300 & echo $! > '${pidFile}'; sleep 300`, timeout: 300 });
    const err = r.events.find((e) => e.type === 'error');
    assert.ok(err, JSON.stringify(r.events));
    assert.equal(err.error.evalue, '137');
    assert.ok(err.error.traceback.some((t) => /timed out after 300 ms/.test(t)), err.error.traceback.join('|'));
    const child = Number(fs.readFileSync(pidFile, 'utf8'));
    await until(() => !pidAlive(child), { what: 'the timed-out command\'s child to die' });
  });

  test('envs reach the command; execd\'s own settings do not; no fd leaks in', async () => {
    const r = await stream(ex.url, '/command', {
      command: 'echo "$FOO|$PATH"; env | grep -c "^EXECD_" || true; ls /proc/self/fd',
      envs: { FOO: 'bar baz', PATH: '/usr/bin:/bin' },
    });
    const out = texts(r.events, 'stdout');
    assert.equal(out[0], 'bar baz|/usr/bin:/bin');
    assert.equal(out[1], '0');
    const fds = out.slice(2).map(Number);
    assert.ok(fds.every((f) => f <= 3), `fds seen by a command: ${fds}`); // 3 is ls's own
  });

  test('cwd is confined to the workspace', async () => {
    fs.mkdirSync(path.join(ex.ws, 'sub'), { recursive: true });
    let r = await stream(ex.url, '/command', { command: 'pwd', cwd: 'sub' });
    assert.deepEqual(texts(r.events, 'stdout'), [path.join(ex.ws, 'sub')]);
    r = await stream(ex.url, '/command', { command: 'pwd', cwd: path.join(ex.ws, 'sub') });
    assert.deepEqual(texts(r.events, 'stdout'), [path.join(ex.ws, 'sub')]);
    for (const cwd of ['/etc', '..', 'sub/../..', '~', '$HOME', 'nope']) {
      const x = await req(ex.url, '/command', { json: { command: 'pwd', cwd } });
      assert.equal(x.status, 400, cwd);
      checkResponse('POST', '/command', x);
    }
    const x = await req(ex.url, '/command', { json: { command: 'pwd', cwd: '/etc' } });
    assert.match(x.json.message, /outside the workspace/);
  });

  test('uid and gid switch the command\'s user', { skip: process.getuid() !== 0 && 'needs root' }, async () => {
    const r = await stream(ex.url, '/command', { command: 'id -u; id -g; id -G', uid: 65534, gid: 65533 });
    assert.deepEqual(texts(r.events, 'stdout'), ['65534', '65533', '65533']);
  });

});

describe('background commands', () => {
  test('init and execution_complete at once; logs follow with a byte cursor; status ends', async () => {
    const go = path.join(ex.ws, `bg-go-${process.pid}`);
    const r = await stream(ex.url, '/command', {
      command: `echo one; echo two >&2; while [ ! -e '${go}' ]; do sleep 0.02; done; echo three; exit 3`,
      background: true,
    });
    assert.deepEqual(types(r.events), ['init', 'execution_complete']);
    const id = r.events[0].text;
    // the first two lines are there while the command still waits
    const first = await until(async () => {
      const l = await req(ex.url, `/command/${id}/logs`);
      return l.text.includes('two') && l.text.includes('one') ? l : null;
    }, { what: 'the first lines' });
    assert.equal(first.headers.get('content-type'), 'text/plain; charset=utf-8');
    const cursor = Number(first.headers.get('EXECD-COMMANDS-TAIL-CURSOR'));
    assert.equal(cursor, Buffer.byteLength(first.text));
    let st = await req(ex.url, `/command/status/${id}`);
    checkResponse('GET', '/command/status/{id}', st);
    assert.equal(st.json.running, true);
    assert.equal(st.json.exit_code, undefined);
    fs.writeFileSync(go, '');
    st = await until(async () => {
      const s = await req(ex.url, `/command/status/${id}`);
      return s.json.running ? null : s;
    }, { what: 'the command to finish' });
    checkResponse('GET', '/command/status/{id}', st);
    assert.equal(st.json.exit_code, 3);
    assert.ok(st.json.finished_at >= st.json.started_at);
    const rest = await req(ex.url, `/command/${id}/logs?cursor=${cursor}`);
    assert.equal(rest.text, 'three\n');
    assert.equal(Number(rest.headers.get('EXECD-COMMANDS-TAIL-CURSOR')), cursor + 6);
    const bad = await req(ex.url, `/command/${id}/logs?cursor=-1`);
    assert.equal(bad.status, 400);
    checkResponse('GET', '/command/{id}/logs', bad);
    const none = await req(ex.url, '/command/nope/logs');
    assert.equal(none.status, 404);
    checkResponse('GET', '/command/{id}/logs', none);
  });

  test('logs are capped: the oldest bytes are dropped and the cursors say so', async () => {
    const small = await startExecd({ env: { EXECD_MAX_LOG_BYTES: '2048' } });
    const r = await stream(small.url, '/command', { command: 'for i in $(seq 1000 1999); do echo $i; done', background: true });
    const id = r.events[0].text;
    await until(async () => !(await req(small.url, `/command/status/${id}`)).json.running, { what: 'finish' });
    const l = await req(small.url, `/command/${id}/logs?cursor=0`);
    assert.equal(l.buf.length, 2048);
    assert.ok(l.text.endsWith('1998\n1999\n'));
    assert.equal(Number(l.headers.get('EXECD-COMMANDS-TAIL-CURSOR')), 5000);
    assert.equal(Number(l.headers.get('EXECD-COMMANDS-HEAD-CURSOR')), 5000 - 2048);
    assert.equal(Number(l.headers.get('EXECD-COMMANDS-DROPPED-BYTES')), 5000 - 2048);
    await small.stop();
  });

  test('running commands are capped with a 429', async () => {
    const lim = await startExecd({ env: { EXECD_MAX_COMMANDS: '2' } });
    const ids = [];
    for (let i = 0; i < 2; i++) {
      const r = await stream(lim.url, '/command', { command: 'sleep 300', background: true });
      ids.push(r.events[0].text);
    }
    const r = await req(lim.url, '/command', { json: { command: 'true' } });
    assert.equal(r.status, 429);
    checkError(r.json);
    assert.match(r.json.message, /EXECD_MAX_COMMANDS/);
    for (const id of ids) assert.equal((await req(lim.url, `/command?id=${id}`, { method: 'DELETE' })).status, 200);
    await until(async () => (await req(lim.url, '/command', { json: { command: 'true' } })).status === 200, { what: 'a free slot' });
    await lim.stop();
  });
});
