// The browser lane through the agent loop (the scripted model) against a real
// tusko-browserd and Chromium: a talk turn and reads start no browser; the
// first browse of a chat starts exactly one (counted at browserd), with its
// spawn event and span; later turns reuse it (type, click, read, scroll,
// screenshot stored as a download, several steps in one call); a page of a
// loopback address is refused before a packet leaves (a trap listener sees no
// connection); MAX_BROWSERS_PER_USER holds exactly under a burst of first
// browses; a browser ended at the service is noticed and replaced; the chat's
// browser is released when the chat is deleted and when it goes idle; deleting
// the account releases its browsers at once.
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';

import { stopAll } from '../../lib/harness.mjs';
import { KEY, startBrowserd } from '../browserd/brd.mjs';
import { api, makeUser, newSession, startModels, startTusko, turn, until } from './lib.mjs';

const call = (name, args) => ({ steps: [{ tool_calls: [{ name, arguments: args }] }, { text: 'result: {{tool_result}}' }] });

const FORM = `<html lang="en"><head><title>Shop form</title></head>
<body><h1>Find a thing</h1><p>Welcome to the test shop.</p>
<form onsubmit="document.title='submitted:'+this.q.value; return false">
<input name="q" aria-label="Search" value="old"><button type="button"
 onclick="document.title='clicked:'+document.forms[0].q.value">Go</button></form>
<div style="height:4000px">tall</div>
<script>addEventListener('scroll', () => { document.title = 'y=' + Math.round(scrollY); });</script>
</body></html>`;

describe('the browser lane', () => {
  let ms, brd, stack, base, alice, bob, site, siteUrl, trap, trapHits, served;

  const live = async () => {
    const r = await brd.call('/v1/sessions?status=live&limit=100');
    assert.equal(r.status, 200, r.text);
    return r.json.sessions;
  };
  const toolEnd = (evs, name) => evs.find((e) => e.event === 'tool_end' && e.json.name === name);

  before(async () => {
    served = [];
    trapHits = 0;
    trap = net.createServer((c) => {
      trapHits++;
      c.destroy();
    });
    await new Promise((r) => trap.listen(0, '127.0.0.1', r));
    site = http.createServer((req, res) => {
      served.push(req.url);
      if (req.url === '/favicon.ico') {
        res.writeHead(404);
        return res.end();
      }
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      res.end(req.url === '/form' ? FORM : `<title>Page ${req.url}</title><h1>Hello from ${req.url}</h1><p>Loopback text.</p>`);
    });
    await new Promise((r) => site.listen(0, '127.0.0.1', r));
    siteUrl = `http://127.0.0.1:${site.address().port}`;
    const tp = trap.address().port;
    const trapUrl = `http://127.0.0.1:${tp}/secret`;
    const SCENARIOS = {
      talk: { steps: [{ text: 'Just talking.' }] },
      'read-first': call('browser_read', {}),
      'shot-first': call('browser_screenshot', {}),
      'nav-form': call('browser_navigate', { url: `${siteUrl}/form` }),
      'nav-a': call('browser_navigate', { url: `${siteUrl}/a` }),
      'type-submit': call('browser_type', { ref: '@e1', text: 'kettle', submit: true }),
      'click-go': call('browser_click', { ref: '@e2' }),
      'read-text': call('browser_read', { mode: 'text' }),
      scroll: call('browser_scroll', { direction: 'down', amount: 700 }),
      shot: call('browser_screenshot', { full_page: false }),
      steps: call('browser_actions', {
        steps: [
          { action: 'navigate', url: `${siteUrl}/form` },
          { action: 'type', ref: '@e1', text: 'lamp' },
          { action: 'click', ref: '@e2' },
          { action: 'screenshot' },
          { action: 'click', ref: '@e99' },
          { action: 'read' },
        ],
      }),
      'nav-trap': call('browser_navigate', { url: trapUrl }),
      'nav-file': call('browser_navigate', { url: 'file:///etc/passwd' }),
    };
    ms = await startModels({ scenarios: SCENARIOS });
    // the trap's port is an allowed port: what refuses it is the address rule
    brd = await startBrowserd({
      env: { BROWSERD_WARM_POOL_SIZE: '1', BROWSERD_MAX_SESSIONS: '6', EGRESS_ALLOW: `127.0.0.1:${site.address().port}`, EGRESS_ALLOWED_PORTS: String(tp) },
    });
    stack = await startTusko(ms, { env: { STEEL_URL: brd.url, STEEL_API_KEY: KEY, MAX_BROWSERS_PER_USER: '2', TUSKO_TOOL_WORKERS: '8' } });
    base = stack.tusko.url;
    alice = makeUser(stack.pg);
    bob = makeUser(stack.pg);
  });
  after(async () => {
    await stopAll();
    await ms.close();
    site.close();
    trap.close();
  });

  test('talking and reading start no browser; the lane is offered and /api/me says so', async () => {
    const sid = await newSession(base, alice);
    const t = await turn(base, alice, sid, 'hi #scenario:talk');
    assert.equal(t.end.state, 'done');
    const offered = ms.requests('talk').at(-1).tools;
    for (const n of ['browser_navigate', 'browser_read', 'browser_click', 'browser_type', 'browser_scroll', 'browser_screenshot', 'browser_actions']) assert.ok(offered.includes(n), n);
    for (const sc of ['read-first', 'shot-first']) {
      const r = await turn(base, alice, sid, `go #scenario:${sc}`);
      const end = r.events.find((e) => e.event === 'tool_end');
      assert.equal(end.json.ok, false);
      assert.match(end.json.result, /no page is open: this chat has no browser yet/);
      assert.ok(!r.events.some((e) => e.event === 'browser_spawn'));
    }
    assert.equal((await live()).length, 0, 'browserd has no session');
    const me = await api(base, '/api/me', { headers: alice.auth });
    assert.deepEqual(me.json.browser, { enabled: true, missing: [], max_per_user: 2 });
  });

  test('the first browse starts one browser; later turns drive the same page', async () => {
    const sid = await newSession(base, alice);
    const n = await turn(base, alice, sid, 'open #scenario:nav-form', {}, { timeoutMs: 60000 });
    assert.equal(n.end.state, 'done', JSON.stringify(n.end));
    const spawn = n.events.find((e) => e.event === 'browser_spawn');
    assert.ok(spawn, n.events.map((e) => e.event).join(','));
    assert.equal(spawn.json.tier, 'browser');
    assert.equal(spawn.json.trigger, 'first browse this session');
    assert.equal(spawn.json.call, 'getOrCreateBrowser');
    assert.match(spawn.json.pool, /^(warm|cold)$/);
    assert.equal(spawn.json.quota, '1 of 2 live per user');
    assert.equal(spawn.json.idle_ttl, '10m, then released');
    const sessions = await live();
    assert.equal(sessions.length, 1);
    assert.equal(sessions[0].id, spawn.json.remote_id);
    const nav = toolEnd(n.events, 'browser_navigate');
    assert.equal(nav.json.ok, true, nav.json.result);
    assert.equal(nav.json.lane, 'browser');
    assert.match(nav.json.result, /Page: "Shop form" at http:\/\/127\.0\.0\.1:\d+\/form \(HTTP status 200\)/);
    assert.match(nav.json.result, /textbox "Search" value="old" \[@e1\]/);
    assert.match(nav.json.result, /button "Go" \[@e2\]/);
    assert.ok(served.includes('/form'), 'the page came from the loopback server through the proxy');
    // the span under the tool call
    const tr = await api(base, `/api/turns/${n.turnId}/trace`, { headers: alice.auth });
    const sp = tr.json.spans.find((s) => s.kind === 'browser_spawn');
    const tool = tr.json.spans.find((s) => s.kind === 'tool' && s.name === 'browser_navigate');
    assert.equal(sp.parent_id, tool.id);
    assert.equal(tool.attrs.lane, 'browser');
    for (const k of ['tier', 'trigger', 'call', 'pool', 'quota', 'idle_ttl']) assert.equal(sp.attrs[k], spawn.json[k], k);
    assert.ok(sp.duration_ms > 0 && sp.duration_ms <= tool.duration_ms);
    assert.ok(tr.json.spans.some((s) => s.kind === 'browser_steps' && s.parent_id === tool.id));

    // the next turns: the same browser, no spawn
    const ty = await turn(base, alice, sid, 'type #scenario:type-submit', {}, { timeoutMs: 60000 });
    const tye = toolEnd(ty.events, 'browser_type');
    assert.equal(tye.json.ok, true, tye.json.result);
    assert.match(tye.json.result, /type done\. Page: "submitted:kettle"/);
    assert.match(tye.json.result, /Outline now:\n[^]*textbox "Search" value="kettle" \[@e1\]/);
    const cl = await turn(base, alice, sid, 'click #scenario:click-go', {}, { timeoutMs: 60000 });
    assert.match(toolEnd(cl.events, 'browser_click').json.result, /click done\. Page: "clicked:kettle"/);
    const rd = await turn(base, alice, sid, 'read #scenario:read-text');
    assert.match(toolEnd(rd.events, 'browser_read').json.result, /Text:\nFind a thing\n+Welcome to the test shop\./);
    const sc = await turn(base, alice, sid, 'scroll #scenario:scroll');
    assert.match(toolEnd(sc.events, 'browser_scroll').json.result, /scroll done\. Page: "y=700"/);
    const sh = await turn(base, alice, sid, 'shot #scenario:shot');
    const she = toolEnd(sh.events, 'browser_screenshot');
    assert.equal(she.json.ok, true, she.json.result);
    assert.match(she.json.result, /Screenshot taken \(\d+ bytes, JPEG\) and shown to the user/);
    const shot = she.json.data.screenshots[0];
    assert.equal(shot.mime_type, 'image/jpeg');
    const img = await fetch(base + shot.url, { headers: alice.auth });
    assert.equal(img.status, 200);
    assert.equal(img.headers.get('content-type'), 'image/jpeg');
    const bytes = Buffer.from(await img.arrayBuffer());
    assert.equal(bytes.length, shot.size);
    assert.deepEqual([...bytes.subarray(0, 2)], [0xff, 0xd8]);
    // another user cannot see it
    assert.equal((await fetch(base + shot.url, { headers: bob.auth })).status, 404);
    for (const t of [ty, cl, rd, sc, sh]) assert.ok(!t.events.some((e) => e.event === 'browser_spawn'));
    assert.equal((await live()).length, 1, 'still one browser');

    // several steps in one call, stopping at the first failure
    const st = await turn(base, alice, sid, 'steps #scenario:steps', {}, { timeoutMs: 60000 });
    const ste = toolEnd(st.events, 'browser_actions');
    assert.equal(ste.json.ok, false);
    assert.match(ste.json.result, /\[step 1: navigate\] Page: "Shop form"/);
    assert.match(ste.json.result, /\[step 3: click\] click done\. Page: "clicked:lamp"/);
    assert.match(ste.json.result, /\[step 4: screenshot\] Screenshot taken/);
    assert.match(ste.json.result, /step 5 \(click\) failed: .*@e99/);
    assert.doesNotMatch(ste.json.result, /step 6/);
    assert.equal(ste.json.data.screenshots.length, 1);
    assert.equal((await live()).length, 1);
  });

  test('a loopback address is refused before a packet leaves; file: is refused', async () => {
    const sid = await newSession(base, bob);
    const t = await turn(base, bob, sid, 'trap #scenario:nav-trap', {}, { timeoutMs: 60000 });
    const e = toolEnd(t.events, 'browser_navigate');
    assert.match(e.json.result, /\(HTTP status 403\)/);
    assert.match(e.json.result, /outbound checks refusing/);
    assert.match(e.json.result, /loopback/i);
    assert.equal(trapHits, 0, 'nothing reached the loopback listener');
    assert.match(brd.log(), new RegExp(`egress msg="refused" listener="browser [^"]+" status=403 code=blocked_address target="http://127.0.0.1:${trap.address().port}/secret"`));
    const f = await turn(base, bob, sid, 'file #scenario:nav-file', {}, { timeoutMs: 60000 });
    const fe = toolEnd(f.events, 'browser_navigate');
    assert.equal(fe.json.ok, false);
    assert.match(fe.json.result, /^navigate failed: only http, https and data URLs/);
  });

  test('MAX_BROWSERS_PER_USER holds exactly under a burst of first browses', async () => {
    const carol = makeUser(stack.pg);
    const sids = [];
    for (let i = 0; i < 5; i++) sids.push(await newSession(base, carol));
    const before = (await live()).length;
    const turns = await Promise.all(sids.map((sid) => turn(base, carol, sid, 'open #scenario:nav-a', {}, { timeoutMs: 90000 })));
    const spawned = turns.filter((t) => t.events.some((e) => e.event === 'browser_spawn'));
    const refused = turns.filter((t) => t.events.some((e) => e.event === 'error' && e.json.code === 'BROWSER_QUOTA'));
    assert.equal(spawned.length, 2, 'exactly two browsers');
    assert.equal(refused.length, 3);
    for (const t of refused) {
      const err = t.events.find((e) => e.event === 'error');
      assert.equal(err.json.http_status, 429);
      assert.equal(err.json.max, 2);
      assert.match(toolEnd(t.events, 'browser_navigate').json.result, /browser quota reached \(HTTP 429\): 2 of 2 .*MAX_BROWSERS_PER_USER/);
    }
    assert.equal((await live()).length, before + 2, 'browserd holds exactly two more sessions');
    // deleting a chat releases its browser and frees the slot
    const gone = spawned[0].events.find((e) => e.event === 'browser_spawn').json.remote_id;
    const sidOf = sids[turns.indexOf(spawned[0])];
    const d = await api(base, `/api/sessions/${sidOf}`, { method: 'DELETE', headers: carol.auth });
    assert.ok(d.status === 204 || d.status === 200, d.text);
    await until(async () => !(await live()).some((s) => s.id === gone), { what: 'the deleted chat\'s browser released' });
    const again = await turn(base, carol, sids[turns.indexOf(refused[0])], 'open #scenario:nav-a', {}, { timeoutMs: 60000 });
    assert.ok(again.events.some((e) => e.event === 'browser_spawn'), 'a slot was free again');
  });

  test('a browser ended at the service is noticed: reads say so, the next browse replaces it', async () => {
    const dave = makeUser(stack.pg);
    const sid = await newSession(base, dave);
    const n = await turn(base, dave, sid, 'open #scenario:nav-a', {}, { timeoutMs: 60000 });
    const rid = n.events.find((e) => e.event === 'browser_spawn').json.remote_id;
    const rel = await brd.call(`/v1/sessions/${rid}/release`, { method: 'POST', json: {} });
    assert.equal(rel.status, 200);
    const r = await turn(base, dave, sid, 'read #scenario:read-text');
    assert.match(toolEnd(r.events, 'browser_read').json.result, /this chat's browser has ended .*browser_navigate to a URL starts a new one/);
    const r2 = await turn(base, dave, sid, 'read #scenario:read-text');
    assert.match(toolEnd(r2.events, 'browser_read').json.result, /no page is open: this chat's browser has ended/);
    const n2 = await turn(base, dave, sid, 'open #scenario:nav-a', {}, { timeoutMs: 60000 });
    const sp = n2.events.find((e) => e.event === 'browser_spawn');
    assert.ok(sp);
    assert.equal(sp.json.replaced, true);
    assert.equal(sp.json.trigger, 'the previous browser ended; first browse since');
    assert.equal(toolEnd(n2.events, 'browser_navigate').json.ok, true);
    assert.notEqual(sp.json.remote_id, rid);
  });

  test('an idle browser is released after BROWSER_IDLE_TTL', async () => {
    // a second tusko on the same database and browserd, with a short idle time
    const t2 = await startTusko(ms, { pg: stack.pg, env: { STEEL_URL: brd.url, STEEL_API_KEY: KEY, BROWSER_IDLE_TTL: '2s' } });
    const erin = makeUser(stack.pg);
    const sid = await newSession(t2.tusko.url, erin);
    const n = await turn(t2.tusko.url, erin, sid, 'open #scenario:nav-a', {}, { timeoutMs: 60000 });
    const rid = n.events.find((e) => e.event === 'browser_spawn').json.remote_id;
    assert.ok((await live()).some((s) => s.id === rid));
    await until(async () => !(await live()).some((s) => s.id === rid), { timeoutMs: 40000, what: 'the idle browser released' });
    const r = await turn(t2.tusko.url, erin, sid, 'read #scenario:read-text');
    assert.match(toolEnd(r.events, 'browser_read').json.result, /has ended \(idle for BROWSER_IDLE_TTL\)/);
    await t2.tusko.stop();
  });

  test('deleting the account releases its browsers at the service', async () => {
    const fay = makeUser(stack.pg);
    const rids = [];
    for (let i = 0; i < 2; i++) {
      const sid = await newSession(base, fay);
      const n = await turn(base, fay, sid, 'open #scenario:nav-a', {}, { timeoutMs: 60000 });
      rids.push(n.events.find((e) => e.event === 'browser_spawn').json.remote_id);
    }
    for (const rid of rids) assert.ok((await live()).some((s) => s.id === rid), rid);
    const d = await api(base, '/api/me', { method: 'DELETE', json: { confirm: fay.email }, headers: fay.auth });
    assert.equal(d.status, 200, d.text);
    assert.equal(d.json.browsers_released, 2);
    assert.equal(d.json.deleted.browsers, 2);
    // released at once, not at the service's idle timeout
    const still = (await live()).filter((s) => rids.includes(s.id));
    assert.deepEqual(still, []);
    for (const rid of rids) {
      const g = await brd.call(`/v1/sessions/${rid}`);
      assert.equal(g.json.status, 'released', g.text);
    }
  });
});

describe('the browser lane without a browser service', () => {
  let ms;
  after(async () => {
    await stopAll();
    if (ms) await ms.close();
  });
  test('only STEEL_URL set: the tools are not offered and /api/me says why', async () => {
    ms = await startModels({ scenarios: { talk: { steps: [{ text: 'ok' }] } } });
    const { tusko, pg } = await startTusko(ms, { env: { STEEL_URL: 'http://127.0.0.1:9' } });
    const u = makeUser(pg);
    const sid = await newSession(tusko.url, u);
    const t = await turn(tusko.url, u, sid, 'hi #scenario:talk');
    assert.equal(t.end.state, 'done');
    assert.ok(!ms.requests('talk').at(-1).tools.some((n) => n.startsWith('browser_')));
    const me = await api(tusko.url, '/api/me', { headers: u.auth });
    assert.equal(me.json.browser.enabled, false);
    assert.deepEqual(me.json.browser.missing, ['STEEL_API_KEY']);
    assert.match(me.json.browser.reason, /STEEL_URL and STEEL_API_KEY/);
    const cat = await api(tusko.url, '/api/agent', { headers: u.auth });
    const nav = cat.json.tools.find((x) => x.name === 'browser_navigate');
    assert.equal(nav.lane, 'browser');
    assert.equal(nav.offered, false);
  });
});
