// tusko-execd bash sessions: one long-lived shell per session; cd, exported and
// plain variables and functions persist; sessions are isolated; interrupt and
// timeout restart the shell from its last state.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { stopAll } from '../../lib/harness.mjs';
import { checkError, checkResponse, req, startExecd, stream, texts, types } from './lib.mjs';

after(stopAll);

let ex;
before(async () => {
  ex = await startExecd({ env: { EXECD_MAX_SESSIONS: '3' } });
});

async function create(body = {}) {
  const r = await req(ex.url, '/session', { json: body });
  assert.equal(r.status, 200, r.text);
  checkResponse('POST', '/session', r);
  return r.json.session_id;
}

const run = (sid, command, extra = {}) => stream(ex.url, `/session/${encodeURIComponent(sid)}/run`, { command, ...extra });

describe('bash sessions', () => {
  test('cd, an exported variable and a function persist across three calls', async () => {
    const sid = await create();
    fs.mkdirSync(path.join(ex.ws, 'proj'), { recursive: true });
    let r = await run(sid, 'cd proj && export GREETING=hello && shout() { echo "$1!"; } && plain=42');
    assert.equal(types(r.events).at(-1), 'execution_complete', JSON.stringify(r.events));
    assert.equal(r.events[0].text, sid);
    r = await run(sid, 'pwd; echo "$GREETING"; shout hey');
    assert.deepEqual(texts(r.events, 'stdout'), [path.join(ex.ws, 'proj'), 'hello', 'hey!']);
    r = await run(sid, 'echo "$GREETING $plain"; cd ..; pwd');
    assert.deepEqual(texts(r.events, 'stdout'), ['hello 42', ex.ws]);
    const del = await req(ex.url, `/session/${sid}`, { method: 'DELETE' });
    assert.equal(del.status, 200);
    const gone = await req(ex.url, `/session/${sid}/run`, { json: { command: 'true' } });
    assert.equal(gone.status, 404);
    checkResponse('POST', '/session/{sessionId}/run', gone);
    const gone2 = await req(ex.url, `/session/${sid}`, { method: 'DELETE' });
    assert.equal(gone2.status, 404);
    checkResponse('DELETE', '/session/{sessionId}', gone2);
  });

  test('two sessions do not see each other\'s state', async () => {
    fs.mkdirSync(path.join(ex.ws, 'a'), { recursive: true });
    const a = await create({ cwd: 'a' });
    const b = await create();
    await run(a, 'export ONLY_A=1; secret=x; fa() { :; }');
    const r = await run(b, 'echo "[$ONLY_A][$secret]"; pwd; type fa >/dev/null 2>&1 && echo has-fa || echo no-fa');
    assert.deepEqual(texts(r.events, 'stdout'), ['[][]', ex.ws, 'no-fa']);
    const ra = await run(a, 'pwd; echo "[$ONLY_A][$secret]"');
    assert.deepEqual(texts(ra.events, 'stdout'), [path.join(ex.ws, 'a'), '[1][x]']);
    await req(ex.url, `/session/${a}`, { method: 'DELETE' });
    await req(ex.url, `/session/${b}`, { method: 'DELETE' });
  });

  test('exit codes, stderr, output without a final newline, and tricky commands', async () => {
    const sid = await create();
    let r = await run(sid, 'echo out; echo err >&2; printf "no newline"; false');
    assert.deepEqual(texts(r.events, 'stdout'), ['out', 'no newline']);
    assert.deepEqual(texts(r.events, 'stderr'), ['err']);
    const e = r.events.find((x) => x.type === 'error');
    assert.equal(e.error.evalue, '1');
    // quotes, NUL-free binary-ish text, a sentinel-looking string, heredocs, set -x
    r = await run(sid, "cat <<'EOF'\n$HOME '\"` __TUSKO_END_x__\nEOF\nset -x; echo traced; set +x");
    assert.deepEqual(texts(r.events, 'stdout'), ["$HOME '\"` __TUSKO_END_x__", 'traced']);
    assert.ok(texts(r.events, 'stderr').some((t) => t.includes('echo traced')));
    // stdin is /dev/null: a reader does not eat the session's input
    r = await run(sid, 'cat; read x; echo "read=$?"');
    assert.deepEqual(texts(r.events, 'stdout'), ['read=1']);
    r = await run(sid, 'echo still-alive');
    assert.deepEqual(texts(r.events, 'stdout'), ['still-alive']);
    await req(ex.url, `/session/${sid}`, { method: 'DELETE' });
  });

  test('interrupt and timeout restart the shell with its cwd, exports and functions', async () => {
    fs.mkdirSync(path.join(ex.ws, 'keep'), { recursive: true });
    const sid = await create();
    await run(sid, 'cd keep; export KEEP=yes; kf() { echo kept; }');
    let r = await stream(ex.url, `/session/${sid}/run`, { command: 'echo waiting; sleep 300' }, {
      onEvent: async (ev) => {
        if (ev.type === 'stdout' && ev.text === 'waiting') {
          const d = await req(ex.url, `/command?id=${sid}`, { method: 'DELETE' });
          assert.equal(d.status, 200);
        }
        return false;
      },
    });
    assert.equal(types(r.events).at(-1), 'error');
    r = await run(sid, 'pwd; echo $KEEP; kf');
    assert.deepEqual(texts(r.events, 'stdout'), [path.join(ex.ws, 'keep'), 'yes', 'kept']);
    r = await run(sid, 'sleep 300', { timeout: 200 });
    const e = r.events.find((x) => x.type === 'error');
    assert.ok(e.error.traceback.some((t) => /timed out/.test(t)));
    r = await run(sid, 'echo $KEEP');
    assert.deepEqual(texts(r.events, 'stdout'), ['yes']);
    await req(ex.url, `/session/${sid}`, { method: 'DELETE' });
  });

  test('cwd of a run is confined; sessions are capped with 429; bad bodies are 400', async () => {
    const sid = await create();
    for (const cwd of ['/etc', '../..', '~root']) {
      const r = await req(ex.url, `/session/${sid}/run`, { json: { command: 'pwd', cwd } });
      assert.equal(r.status, 400, cwd);
      checkResponse('POST', '/session/{sessionId}/run', r);
    }
    const bad = await req(ex.url, `/session/${sid}/run`, { json: { cwd: '.' } });
    assert.equal(bad.status, 400);
    const badc = await req(ex.url, '/session', { json: { cwd: '/etc' } });
    assert.equal(badc.status, 400);
    checkResponse('POST', '/session', badc);
    const others = [await create(), await create()];
    const over = await req(ex.url, '/session', { json: {} });
    assert.equal(over.status, 429);
    checkError(over.json);
    for (const s of [sid, ...others]) await req(ex.url, `/session/${s}`, { method: 'DELETE' });
  });
});
