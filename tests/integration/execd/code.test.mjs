// tusko-execd code contexts: a real Jupyter kernel (Debian's ipykernel) over
// ZeroMQ. Variables and DataFrames persist; a matplotlib figure is an
// image/png result; errors carry tracebacks; an infinite loop is
// interruptible; a dead kernel is reported and replaced.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, describe, test } from 'node:test';

import { stopAll } from '../../lib/harness.mjs';
import { checkError, checkResponse, pidAlive, req, startExecd, stream, texts, types, until } from './lib.mjs';

after(stopAll);

let ex, ctx;
before(async () => {
  // HOME is the workspace, as in a sandbox
  ex = await startExecd({ env: { EXECD_MAX_CONTEXTS: '2' }, homeIsWorkspace: true });
  const r = await req(ex.url, '/code/context', { json: { language: 'python' } });
  assert.equal(r.status, 200, r.text);
  checkResponse('POST', '/code/context', r);
  ctx = r.json.id;
});

const run = (code, id = ctx) => stream(ex.url, '/code', { context: { id, language: 'python' }, code });
const results = (events) => events.filter((e) => e.type === 'result').map((e) => e.results);

describe('code contexts', () => {
  test('the context is listed and can be fetched', async () => {
    const g = await req(ex.url, `/code/contexts/${ctx}`);
    checkResponse('GET', '/code/contexts/{context_id}', g);
    assert.deepEqual(g.json, { id: ctx, language: 'python' });
    const l = await req(ex.url, '/code/contexts?language=python');
    checkResponse('GET', '/code/contexts', l);
    assert.ok(l.json.some((c) => c.id === ctx));
    const none = await req(ex.url, '/code/contexts/nope');
    assert.equal(none.status, 404);
    checkResponse('GET', '/code/contexts/{context_id}', none);
  });

  test('a variable persists between calls; results carry execution_count', async () => {
    let r = await run('x = 41\nprint("set")');
    assert.deepEqual(texts(r.events, 'stdout'), ['set\n']);
    assert.equal(types(r.events).at(-1), 'execution_complete');
    assert.equal(r.events[0].type, 'init');
    assert.equal(r.events[0].text, ctx);
    r = await run('x + 1');
    const res = results(r.events);
    assert.equal(res.length, 1);
    assert.equal(res[0]['text/plain'], '42');
    const count = r.events.find((e) => e.type === 'execution_count');
    assert.ok(count.execution_count >= 2);
    assert.ok(types(r.events).indexOf('execution_count') < types(r.events).indexOf('result'));
  });

  test('a pandas DataFrame persists and renders as text and HTML', async () => {
    let r = await run('import pandas as pd\ndf = pd.DataFrame({"city": ["Oslo", "Lima"], "pop": [0.7, 10.0]})');
    assert.equal(types(r.events).at(-1), 'execution_complete', JSON.stringify(r.events));
    r = await run('df["pop"] = df["pop"] * 2\ndf');
    const [res] = results(r.events);
    assert.match(res['text/plain'], /Oslo\s+1\.4/);
    assert.match(res['text/html'], /<table[\s\S]*Lima[\s\S]*20\.0/);
    r = await run('print(df.shape, df["pop"].sum())');
    assert.deepEqual(texts(r.events, 'stdout'), ['(2, 2) 21.4\n']);
  });

  test('a matplotlib figure comes back as an image/png result', async () => {
    const r = await run('import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.title("t")\nplt.show()');
    // IPython and matplotlib keep their files out of $HOME and the workspace
    assert.deepEqual(fs.readdirSync(ex.ws).filter((n) => n.startsWith('.')), []);
    const img = results(r.events).find((x) => x['image/png']);
    assert.ok(img, JSON.stringify(types(r.events)));
    const png = Buffer.from(img['image/png'], 'base64');
    assert.deepEqual([...png.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
    assert.ok(png.length > 1000);
  });

  test('a syntax error and a runtime error return error events with tracebacks', async () => {
    let r = await run('def broken(:\n    pass');
    let e = r.events.find((x) => x.type === 'error');
    assert.equal(e.error.ename, 'SyntaxError');
    assert.ok(e.error.traceback.length > 0);
    assert.ok(!r.events.some((x) => x.type === 'execution_complete'));
    r = await run('undefined_name + 1');
    e = r.events.find((x) => x.type === 'error');
    assert.equal(e.error.ename, 'NameError');
    assert.match(e.error.evalue, /undefined_name/);
    assert.ok(e.error.traceback.join('\n').includes('undefined_name'));
    // no terminal colour codes: the kernel runs with colors=NoColor
    assert.ok(!e.error.traceback.join('').includes('\u001b['));
  });

  test('an infinite loop is interruptible and the state survives', async () => {
    const r = await stream(ex.url, '/code', { context: { id: ctx }, code: 'print("looping", flush=True)\nwhile True:\n    pass' }, {
      onEvent: async (ev) => {
        if (ev.type === 'stdout' && ev.text.includes('looping')) {
          const d = await req(ex.url, `/code?id=${ctx}`, { method: 'DELETE' });
          assert.equal(d.status, 200);
        }
        return false;
      },
    });
    const e = r.events.find((x) => x.type === 'error');
    assert.equal(e.error.ename, 'KeyboardInterrupt');
    const again = await run('x');
    assert.equal(results(again.events)[0]['text/plain'], '41');
  });

  test('a busy context answers 409', async () => {
    let second;
    await stream(ex.url, '/code', { context: { id: ctx }, code: 'print("busy", flush=True)\nimport time\nwhile True: time.sleep(0.05)' }, {
      onEvent: async (ev) => {
        if (ev.type === 'stdout' && ev.text.includes('busy')) {
          second = await req(ex.url, '/code', { json: { context: { id: ctx }, code: '1' } });
          await req(ex.url, `/code?id=${ctx}`, { method: 'DELETE' });
        }
        return false;
      },
    });
    assert.equal(second.status, 409);
    checkError(second.json);
  });

  test('a kernel that dies is reported, and the next call gets a new kernel', async () => {
    let r = await run('import os; os._exit(3)');
    const e = r.events.find((x) => x.type === 'error');
    assert.equal(e.error.ename, 'DeadKernelError');
    assert.match(e.error.evalue, /exit status 3/);
    r = await run('print("alive")\nx');
    assert.ok(texts(r.events, 'stderr').some((t) => /had died/.test(t)));
    assert.deepEqual(texts(r.events, 'stdout'), ['alive\n']);
    assert.equal(r.events.find((x) => x.type === 'error').error.ename, 'NameError'); // state is gone
  });

  test('language only: the default python context; no language: a shell command', async () => {
    let r = await stream(ex.url, '/code', { context: { language: 'python' }, code: 'y = 7' });
    const def = r.events[0].text;
    r = await stream(ex.url, '/code', { context: { language: 'python' }, code: 'y * 6' });
    assert.equal(r.events[0].text, def);
    assert.equal(results(r.events)[0]['text/plain'], '42');
    r = await stream(ex.url, '/code', { code: 'echo from-shell' });
    assert.deepEqual(texts(r.events, 'stdout'), ['from-shell']);
    // two contexts open now: the cap answers 429
    const over = await req(ex.url, '/code/context', { json: { language: 'python' } });
    assert.equal(over.status, 429);
    checkError(over.json);
    const bad = await req(ex.url, '/code/context', { json: { language: 'cobol' } });
    assert.equal(bad.status, 400);
    checkResponse('POST', '/code/context', bad);
    const d = await req(ex.url, '/code/contexts?language=python', { method: 'DELETE' });
    assert.equal(d.status, 200);
    const l = await req(ex.url, '/code/contexts?language=python');
    assert.deepEqual(l.json, []);
  });

  test('deleting a context stops its kernel', async () => {
    const c = await req(ex.url, '/code/context', { json: { language: 'python' } });
    const id = c.json.id;
    const r = await run('import os; print(os.getpid())', id);
    const pid = Number(texts(r.events, 'stdout')[0]);
    assert.ok(pidAlive(pid));
    const d = await req(ex.url, `/code/contexts/${id}`, { method: 'DELETE' });
    assert.equal(d.status, 200);
    await until(() => !pidAlive(pid), { what: 'the kernel to exit' });
    const gone = await req(ex.url, '/code', { json: { context: { id }, code: '1' } });
    assert.equal(gone.status, 404);
    checkError(gone.json);
    const bad = await req(ex.url, '/code', { json: { context: { id } } });
    assert.equal(bad.status, 400);
    checkResponse('POST', '/code', bad);
  });
});
