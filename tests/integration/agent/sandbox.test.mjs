// The sandbox lane against a real tusko-sandboxd (native runtime) and its
// execd: sandboxes only when a tool writes or executes (counted through
// sandboxd's own GET /v1/sandboxes, not tusko's tables), one per chat and
// reused across turns (files, exported shell variables, a pandas DataFrame),
// the spawn span's attributes, the per-user quota under concurrent spawns,
// a reaped sandbox noticed, cancellation of a running command, files and
// downloads that outlive the chat and the sandbox.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { stopAll } from '../../lib/harness.mjs';
import { EXECD_PORT, KEY, startSandboxd } from '../sandboxd/sbx.mjs';
import { api, events, makeUser, messages, newSession, post, sse, startModels, startTusko, textOf, turn, until, untilTurnEnd } from './lib.mjs';

const call = (name, args) => ({ steps: [{ tool_calls: [{ name, arguments: args }] }, { text: 'result: {{tool_result}}' }] });

const SCENARIOS = {
  talk: { steps: [{ text: 'Just talking, nothing to run.' }] },
  plan: call('plan_task', { goal: 'Write notes', milestones: ['outline', 'draft', 'review'] }),
  list: call('list_files', {}),
  'write-notes': call('write_file', { path: 'notes.txt', content: 'hello from turn one\n' }),
  'cat-export': call('execute_command', { command: 'cat notes.txt && export TUSKO_VAR=kept-across-turns && pwd' }),
  'echo-var': call('execute_command', { command: 'echo "var=$TUSKO_VAR"' }),
  'df-make': call('execute_code', { code: "import pandas as pd\ndf = pd.DataFrame({'a': [1, 2, 3], 'b': ['x', 'y', 'z']})\ndf.shape" }),
  'df-use': call('execute_code', { code: "int(df['a'].sum()) * 10" }),
  'write-deep': call('write_file', { path: 'out/report.md', content: '# Report\n\nline two\n' }),
  'write-odd': call('write_file', { path: 'odd dir/a&b?c#d=e+f é.txt', content: 'odd name\n' }),
  'read-deep': call('read_file', { path: '/workspace/out/report.md' }),
  'write-escape': call('write_file', { path: '../../etc/passwd', content: 'x' }),
  'sleep-long': call('execute_command', { command: 'sleep 30; echo finished' }),
  'echo-alive': call('execute_command', { command: 'echo alive' }),
  'py-answer': call('execute_code', { code: '6 * 7' }),
};

describe('the sandbox lane', () => {
  let ms, sbx, stack, base, alice, bob;

  const remote = async (qs = '') => {
    const r = await sbx.api.list(`?pageSize=200${qs}`);
    assert.equal(r.status, 200, r.text);
    return r.json.items.filter((s) => !['Terminated', 'Failed', 'Stopping'].includes(s.status.state));
  };
  const remoteOf = async (user) => (await remote()).filter((s) => s.metadata && s.metadata.user === user.id);
  // a call to a sandbox's execd through sandboxd's proxy, as tusko makes them
  const execd = async (id, method, p, json) =>
    sbx.api.call(method, `/v1/sandboxes/${id}/proxy/${EXECD_PORT}${p}`, json, { 'X-EXECD-ACCESS-TOKEN': await sbx.api.token(id) });

  before(async () => {
    ms = await startModels({ scenarios: SCENARIOS });
    sbx = await startSandboxd({ env: { SANDBOX_WARM_POOL_SIZE: '1' } });
    stack = await startTusko(ms, {
      env: { OPENSANDBOX_URL: sbx.url, OPENSANDBOX_API_KEY: KEY, MAX_SANDBOXES_PER_USER: '5', TUSKO_TOOL_WORKERS: '8' },
    });
    base = stack.tusko.url;
    alice = makeUser(stack.pg);
    bob = makeUser(stack.pg);
  });
  after(async () => {
    // delete what the tests made, then stop (a clean sandboxd stop keeps sandboxes)
    for (const s of await remote()) await sbx.api.del(s.id);
    await stopAll();
    await ms.close();
  });

  test('talking, planning and listing files start no sandbox', async () => {
    const sid = await newSession(base, alice);
    for (const sc of ['talk', 'plan', 'list']) {
      const t = await turn(base, alice, sid, `go #scenario:${sc}`);
      assert.equal(t.end.state, 'done', JSON.stringify(t.end));
      assert.ok(!t.events.some((e) => e.event === 'sandbox_spawn'));
    }
    const lst = (await events(base, alice, sid)).find((e) => e.event === 'tool_end' && e.json.name === 'list_files');
    assert.match(lst.json.result, /nothing here yet/);
    assert.equal((await remoteOf(alice)).length, 0, 'sandboxd has no sandbox of the user');
    const me = await api(base, '/api/sandboxes', { headers: alice.auth });
    assert.equal(me.json.live, 0);
    assert.equal(me.json.execution, true);
    // the model was offered the sandbox tools (the lane is on)
    assert.ok(ms.requests('talk').at(-1).tools.includes('execute_command'));
  });

  test('the first write creates one sandbox; later turns reuse it (file, shell variable, DataFrame)', async () => {
    const sid = await newSession(base, alice);
    const w = await turn(base, alice, sid, 'write #scenario:write-notes');
    assert.equal(w.end.state, 'done');
    const spawn = w.events.find((e) => e.event === 'sandbox_spawn');
    assert.ok(spawn, w.events.map((e) => e.event).join(','));
    assert.equal(spawn.json.tier, 'sandbox');
    assert.equal(spawn.json.trigger, 'first write to /workspace this session');
    assert.equal(spawn.json.call, 'getOrCreateOpenSandbox');
    assert.match(spawn.json.pool, /^(warm · native|cold)$/);
    assert.equal(spawn.json.quota, '1 of 5 live per user');
    assert.equal(spawn.json.credentials, 'fail-closed, from env only');
    assert.equal(spawn.json.idle_ttl, '30m, then reaped');
    const live = await remoteOf(alice);
    assert.equal(live.length, 1);
    assert.equal(live[0].metadata.session, sid);
    assert.equal(live[0].id, spawn.json.remote_id);
    // the span in the trace, under the write_file tool call, with a real duration
    const tr = await api(base, `/api/turns/${w.turnId}/trace`, { headers: alice.auth });
    const sp = tr.json.spans.find((s) => s.kind === 'sandbox_spawn');
    const tool = tr.json.spans.find((s) => s.kind === 'tool' && s.name === 'write_file');
    assert.equal(sp.parent_id, tool.id);
    assert.equal(tool.attrs.lane, 'sandbox');
    for (const k of ['tier', 'trigger', 'call', 'pool', 'quota', 'credentials', 'idle_ttl']) assert.equal(sp.attrs[k], spawn.json[k], k);
    assert.ok(sp.duration_ms > 0 && sp.duration_ms <= tool.duration_ms);

    const c = await turn(base, alice, sid, 'look #scenario:cat-export');
    assert.equal(c.end.state, 'done');
    assert.ok(!c.events.some((e) => e.event === 'sandbox_spawn'));
    const out = c.events.filter((e) => e.event === 'tool_output').map((e) => e.json.text).join('');
    // each line of a command's output keeps its newline, in the stream and in
    // the tool result the model gets back
    assert.equal(out, 'hello from turn one\n/workspace\n');
    const back = ms.requests('cat-export').at(-1).body.messages.filter((m) => m.role === 'tool').at(-1);
    assert.match(typeof back.content === 'string' ? back.content : back.content.map((p) => p.text).join(''), /hello from turn one\n\/workspace\n/);
    const v = await turn(base, alice, sid, 'var #scenario:echo-var');
    assert.match(textOf(v.events), /var=kept-across-turns/);

    const d1 = await turn(base, alice, sid, 'df #scenario:df-make');
    assert.match(textOf(d1.events), /\(3, 2\)/);
    const d2 = await turn(base, alice, sid, 'df #scenario:df-use');
    assert.match(textOf(d2.events), /60/);
    assert.equal((await remoteOf(alice)).length, 1, 'still one sandbox');
    const tr2 = await api(base, `/api/turns/${d2.turnId}/trace`, { headers: alice.auth });
    assert.ok(!tr2.json.spans.some((s) => s.kind === 'sandbox_spawn'));
  });

  test('paths stay in /workspace; files, preview and downloads outlive the chat and the sandbox', async () => {
    const sid = await newSession(base, bob);
    const esc = await turn(base, bob, sid, 'x #scenario:write-escape');
    const escEnd = esc.events.find((e) => e.event === 'tool_end');
    assert.equal(escEnd.json.ok, false);
    assert.match(escEnd.json.result, /refused: "\.\." is not allowed/);
    assert.equal((await remoteOf(bob)).length, 0, 'a refused write starts no sandbox');
    await turn(base, bob, sid, 'x #scenario:write-deep');
    const rd = await turn(base, bob, sid, 'x #scenario:read-deep');
    assert.match(textOf(rd.events), /# Report/);
    const ls = await api(base, `/api/sessions/${sid}/files?depth=2`, { headers: bob.auth });
    assert.equal(ls.status, 200);
    assert.ok(ls.json.entries.some((e) => e.path === '/workspace/out/report.md' && e.size === 19), JSON.stringify(ls.json));
    const pv = await api(base, `/api/sessions/${sid}/files/preview?path=out/report.md`, { headers: bob.auth });
    assert.equal(pv.status, 200);
    assert.equal(pv.json.kind, 'text');
    assert.equal(pv.json.text, '# Report\n\nline two\n');
    assert.equal((await api(base, `/api/sessions/${sid}/files/preview?path=/etc/passwd`, { headers: bob.auth })).status, 400);
    const dl = await api(base, `/api/sessions/${sid}/files/download`, { json: { path: 'out/report.md' }, headers: bob.auth });
    assert.equal(dl.status, 201, dl.text);
    assert.equal(dl.json.size, 19);
    // another user cannot fetch it
    assert.equal((await api(base, dl.json.url, { headers: alice.auth })).status, 404);
    // defense in depth: tusko asked the sandbox's execd for workspace confinement
    const [sb] = await remoteOf(bob);
    const conf = await execd(sb.id, 'GET', '/confine');
    assert.deepEqual(conf.json, { confine: 'workspace', root: '/workspace' });
    assert.equal((await execd(sb.id, 'POST', '/command', { command: 'pwd', cwd: '/tmp' })).status, 400);
    // reap the sandbox and delete the chat: the download is still served
    assert.equal((await sbx.api.del(sb.id)).status, 204);
    assert.equal((await api(base, `/api/sessions/${sid}`, { method: 'DELETE', headers: bob.auth })).status, 204);
    const got = await fetch(base + dl.json.url, { headers: bob.auth });
    assert.equal(got.status, 200);
    assert.equal(await got.text(), '# Report\n\nline two\n');
    assert.match(got.headers.get('content-disposition'), /attachment; filename="report.md"/);
  });

  test('a path with query characters, a space, a plus and UTF-8 reaches execd encoded, not cut or mixed up', async () => {
    const u = makeUser(stack.pg);
    const sid = await newSession(base, u);
    await turn(base, u, sid, 'w #scenario:write-odd');
    const name = 'odd dir/a&b?c#d=e+f é.txt';
    const pv = await api(base, `/api/sessions/${sid}/files/preview?path=${encodeURIComponent(name)}`, { headers: u.auth });
    assert.equal(pv.status, 200, pv.text);
    assert.equal(pv.json.text, 'odd name\n');
    // the name with its "+" read as a form's space is another file, not there
    const other = await api(base, `/api/sessions/${sid}/files/preview?path=${encodeURIComponent(name.replace('+', ' '))}`, { headers: u.auth });
    assert.equal(other.status, 404, other.text);
    const ls = await api(base, `/api/sessions/${sid}/files?depth=2`, { headers: u.auth });
    assert.ok(ls.json.entries.some((e) => e.path === `/workspace/${name}`), JSON.stringify(ls.json));
  });

  test('a reaped sandbox is noticed: reads say nothing yet, the next write starts afresh and says so', async () => {
    const u = makeUser(stack.pg);
    const sid = await newSession(base, u);
    await turn(base, u, sid, 'w #scenario:write-notes');
    const [sb] = await remoteOf(u);
    assert.equal((await sbx.api.del(sb.id)).status, 204);
    const l = await turn(base, u, sid, 'l #scenario:list');
    const lend = l.events.find((e) => e.event === 'tool_end');
    assert.match(lend.json.result, /nothing here yet/);
    assert.equal((await remoteOf(u)).length, 0, 'a read starts nothing');
    const w = await turn(base, u, sid, 'w #scenario:write-notes');
    assert.ok(w.events.some((e) => e.event === 'sandbox_gone'));
    const spawn = w.events.find((e) => e.event === 'sandbox_spawn');
    assert.equal(spawn.json.replaced, true);
    assert.match(w.events.find((e) => e.event === 'tool_end').json.result, /previous workspace was gone/);
    const now = await remoteOf(u);
    assert.equal(now.length, 1);
    assert.notEqual(now[0].id, sb.id);
  });

  test('six concurrent spawns with a limit of five: exactly five exist, the sixth gets a 429; users do not share quota', async () => {
    const u = makeUser(stack.pg);
    const sids = [];
    for (let i = 0; i < 6; i++) sids.push(await newSession(base, u));
    const turns = await Promise.all(sids.map((sid) => turn(base, u, sid, 'w #scenario:write-notes', {}, { timeoutMs: 60000 })));
    const spawned = turns.filter((t) => t.events.some((e) => e.event === 'sandbox_spawn'));
    const refused = turns.filter((t) => t.events.some((e) => e.event === 'error' && e.json.code === 'SANDBOX_QUOTA'));
    assert.equal(spawned.length, 5);
    assert.equal(refused.length, 1);
    const err = refused[0].events.find((e) => e.event === 'error');
    assert.equal(err.json.http_status, 429);
    assert.equal(err.json.live, 5);
    assert.equal(err.json.max, 5);
    const end = refused[0].events.find((e) => e.event === 'tool_end');
    assert.equal(end.json.ok, false);
    assert.match(end.json.result, /quota reached \(HTTP 429\): 5 of 5/);
    assert.equal((await remoteOf(u)).length, 5, 'sandboxd has exactly five');
    const quotas = spawned.map((t) => t.events.find((e) => e.event === 'sandbox_spawn').json.quota).sort();
    assert.deepEqual(quotas, ['1', '2', '3', '4', '5'].map((n) => `${n} of 5 live per user`));
    // another user is not affected
    const other = makeUser(stack.pg);
    const t = await turn(base, other, await newSession(base, other), 'w #scenario:write-notes');
    assert.equal(t.events.find((e) => e.event === 'sandbox_spawn').json.quota, '1 of 5 live per user');
    const list = await api(base, '/api/sandboxes', { headers: u.auth });
    assert.equal(list.json.live, 5);
    assert.equal(list.json.sandboxes.length, 5);
  });

  test('execd refusing a shell or a Python kernel: the tool says why, the sandbox is not gone, the next call makes one and keeps it', { timeout: 120000 }, async () => {
    const u = makeUser(stack.pg);
    const sid = await newSession(base, u);
    await turn(base, u, sid, 'w #scenario:write-notes'); // a sandbox, no shell or kernel yet
    const [sb] = await remoteOf(u);
    const row = () => stack.pg.rows(`SELECT bash_session, code_context FROM sandboxes WHERE session_id = '${sid}' AND state = 'live'`);
    assert.deepEqual(row(), [['', '']]);
    const toolEnd = (t) => t.events.find((e) => e.event === 'tool_end').json;
    for (const [kind, create, list, del, scenario, answer, want] of [
      ['shell', ['/session', { cwd: '/workspace' }], (j) => j.session_id, (id) => `/session/${id}`, 'echo-alive', /alive/,
        /^could not run it: execd refused to start a shell \(HTTP 429: (\d+) bash sessions are open, the limit \(EXECD_MAX_SESSIONS\) is \1; delete one first\)$/],
      ['kernel', ['/code/context', { language: 'python' }], (j) => j.id, (id) => `/code/contexts/${id}`, 'py-answer', /42/,
        /^could not run it: execd refused to start a Python kernel \(HTTP 429: (\d+) code contexts are open, the limit \(EXECD_MAX_CONTEXTS\) is \1; delete one first\)$/],
    ]) {
      // take every one execd has
      const made = [];
      for (;;) {
        const r = await execd(sb.id, 'POST', ...create);
        if (r.status === 429) break;
        assert.equal(r.status, 200, `${kind}: ${r.text}`);
        made.push(list(r.json));
        assert.ok(made.length <= 64, `${kind}: execd has no limit`);
      }
      let t = await turn(base, u, sid, `x #scenario:${scenario}`);
      assert.equal(t.end.state, 'done');
      assert.equal(toolEnd(t).ok, false);
      assert.match(toolEnd(t).result, want, kind);
      assert.ok(!t.events.some((e) => e.event === 'sandbox_gone' || e.event === 'sandbox_spawn'), `${kind}: the sandbox is not gone`);
      assert.deepEqual((await remoteOf(u)).map((s) => s.id), [sb.id]);
      // one free: the next call makes it, and the chat keeps it (in its row, and across calls)
      for (const id of made) assert.equal((await execd(sb.id, 'DELETE', del(id))).status, 200, kind);
      t = await turn(base, u, sid, `x #scenario:${scenario}`);
      assert.equal(toolEnd(t).ok, true, `${kind}: ${toolEnd(t).result}`);
      assert.match(textOf(t.events), answer);
      const kept = row()[0][kind === 'shell' ? 0 : 1];
      assert.match(kept, /^[0-9a-f-]{32,36}$/, `${kind} kept in the row`);
      t = await turn(base, u, sid, `x #scenario:${scenario}`);
      assert.equal(toolEnd(t).ok, true);
      assert.equal(row()[0][kind === 'shell' ? 0 : 1], kept, `${kind} reused`);
    }
  });

  test('cancel stops the running command, and the shell stays usable', async () => {
    const u = makeUser(stack.pg);
    const sid = await newSession(base, u);
    await turn(base, u, sid, 'w #scenario:write-notes');
    const r = await post(base, u, sid, 's #scenario:sleep-long');
    assert.equal(r.status, 202);
    await sse(base, `/api/sessions/${sid}/events`, { headers: u.auth, timeoutMs: 15000, until: (e) => e.event === 'tool_start' && e.json.turn_id === r.json.turn_id });
    const t0 = Date.now();
    assert.equal((await api(base, `/api/sessions/${sid}/cancel`, { method: 'POST', headers: u.auth })).status, 202);
    const evs = await untilTurnEnd(base, u, sid, r.json.turn_id);
    assert.equal(evs.at(-1).json.state, 'cancelled');
    assert.ok(Date.now() - t0 < 20000, 'the 30 s command did not run to its end');
    const end = evs.find((e) => e.event === 'tool_end');
    assert.match(end.json.result, /stopped: the turn was cancelled/);
    assert.ok(!evs.some((e) => e.event === 'tool_output' && /finished/.test(e.json.text)));
    const a = await turn(base, u, sid, 'a #scenario:echo-alive');
    assert.match(textOf(a.events), /alive/);
    const msgs = await messages(base, u, sid);
    // every call is answered (the conversation stays paired)
    const calls = msgs.flatMap((m) => (m.tool_calls || []).map((c) => c.id));
    const answered = msgs.filter((m) => m.role === 'tool').map((m) => m.tool_call_id);
    assert.deepEqual(calls.sort(), answered.sort());
  });
});
