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
