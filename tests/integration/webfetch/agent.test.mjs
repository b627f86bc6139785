// web_fetch through the agent loop, with the scripted model server and a real
// Postgres: refused fetches are tool results the model reads and the turn goes
// on; an operator-admitted loopback site is fetched and reduced to its title,
// main text and links; redirects to internal addresses are refused; nothing
// ever reaches the traps; no sandbox is involved (fast lane). Only loopback.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { stopAll } from '../../lib/harness.mjs';
import { api, events, makeUser, newSession, startModels, startTusko, textOf, turn } from '../agent/lib.mjs';
import { startSite, startTrap, PAGE } from './lib.mjs';

const SANDBOX_TOOLS = ['write_file', 'read_file', 'execute_command', 'execute_code'];

// The tool results a recorded model request carried (OpenAI wire format).
function toolResults(rec) {
  return rec.body.messages.filter((m) => m.role === 'tool').map((m) => (typeof m.content === 'string' ? m.content : m.content.map((p) => p.text).join('')));
}

function fetchThenSay(...calls) {
  return {
    steps: [
      { text: 'Fetching.', tool_calls: calls.map((args) => ({ name: 'web_fetch', arguments: args })) },
      { text: 'Tool said: {{tool_results}}' },
    ],
  };
}

describe('web_fetch through the agent loop', () => {
  let ms, stack, base, user, site, trap, trap6;

  before(async () => {
    trap = await startTrap('127.0.0.1');
    trap6 = await startTrap('::1');
    site = await startSite({ trap, trap6 });
    ms = await startModels({
      scenarios: {
        'wf-metadata': fetchThenSay({ url: 'http://169.254.169.254/latest/meta-data/' }),
        'wf-loopback': fetchThenSay({ url: `${trap.url}/` }, { url: `http://localhost:${trap.port}/admin` }, { url: `http://0x7f.1:${trap.port}/` }),
        'wf-page': fetchThenSay({ url: `${site.url}/docs/page.html` }),
        'wf-moved': fetchThenSay({ url: `${site.url}/moved` }),
        'wf-redirects-in': fetchThenSay(
          { url: `${site.url}/go-loopback` },
          { url: `${site.url}/go-metadata` },
          ...(trap6 ? [{ url: `${site.url}/go-loopback6` }] : []),
        ),
        'wf-json-and-cap': fetchThenSay({ url: `${site.url}/docs/api.json` }, { url: `${site.url}/long.txt`, max_chars: 120 }),
        'wf-bad-args': fetchThenSay({ nothing: 1 }, { url: 'file:///etc/passwd' }),
      },
    });
    // The site's address alone is admitted (and its port); the rest of loopback
    // stays refused. No OPENSANDBOX_*: the sandbox lane is off.
    const ports = [site.port, trap.port, ...(trap6 ? [trap6.port] : [])].join(',');
    stack = await startTusko(ms, { env: { SSRF_ALLOW: '127.0.0.2', SSRF_ALLOWED_PORTS: ports }, tag: 'webfetch' });
    base = stack.tusko.url;
    user = makeUser(stack.pg);
  });

  after(async () => {
    await stopAll();
    await ms.close();
    await site.close();
    await trap.close();
    if (trap6) await trap6.close();
  });

  async function toolSpans(turnId) {
    const tr = await api(base, `/api/turns/${turnId}/trace`, { headers: user.auth });
    assert.equal(tr.status, 200, tr.text);
    return tr.json.spans.filter((s) => s.kind === 'tool' && s.name === 'web_fetch');
  }

  test('a fetch of the metadata address is refused as a tool result and the turn goes on', async () => {
    const sid = await newSession(base, user);
    const t = await turn(base, user, sid, 'read the metadata #scenario:wf-metadata');
    assert.equal(t.end.state, 'done', JSON.stringify(t.end));
    const end = t.events.find((e) => e.event === 'tool_end' && e.json.name === 'web_fetch');
    assert.ok(end, t.events.map((e) => e.event).join(','));
    assert.equal(end.json.lane, 'fast');
    assert.equal(end.json.ok, false);
    assert.match(end.json.result, /^web_fetch refused this URL: blocked_address\nURL: http:\/\/169\.254\.169\.254\/latest\/meta-data\/\nReason: 169\.254\.169\.254 is link-local \(169\.254\.0\.0\/16\)/);
    assert.match(end.json.result, /cloud metadata/);
    assert.equal(end.json.code, 'blocked_address');
    // the model's next request carried that result, and its answer ended the turn
    const recs = ms.requests('wf-metadata');
    assert.equal(recs.length, 2);
    assert.equal(recs[1].step, 1);
    assert.match(recs[1].tool_result, /refused this URL: blocked_address/);
    assert.match(recs[1].tool_result, /169\.254\.169\.254 is link-local/);
    assert.match(textOf(t.events), /^Fetching\.Tool said: web_fetch refused this URL: blocked_address/);
    // the span: the URL, the code, no status, no bytes
    const [span] = await toolSpans(t.turnId);
    assert.equal(span.attrs.lane, 'fast');
    assert.equal(span.attrs.url, 'http://169.254.169.254/latest/meta-data/');
    assert.equal(span.attrs.code, 'blocked_address');
    assert.equal(span.attrs.status, 0);
    assert.equal(span.attrs.bytes, 0);
    assert.equal(span.status, 'error');
    // the fast lane: no sandbox, and the sandbox tools were never offered
    assert.ok(!t.events.some((e) => e.event === 'sandbox_spawn'));
    for (const r of recs) {
      assert.ok(r.tools.includes('web_fetch'));
      for (const s of SANDBOX_TOOLS) assert.ok(!r.tools.includes(s), `${s} offered`);
    }
  });

  test('loopback (literal, localhost, odd notation) is refused and the trap sees no connection', async () => {
    const sid = await newSession(base, user);
    const t = await turn(base, user, sid, 'look at the local admin page #scenario:wf-loopback');
    assert.equal(t.end.state, 'done', JSON.stringify(t.end));
    const ends = t.events.filter((e) => e.event === 'tool_end');
    assert.equal(ends.length, 3);
    assert.ok(ends.every((e) => e.json.ok === false && e.json.code === 'blocked_address'));
    assert.match(ends[0].json.result, /127\.0\.0\.1 is loopback \(127\.0\.0\.0\/8\)/);
    assert.match(ends[1].json.result, /localhost resolves to (127\.0\.0\.1|::1), which is loopback/);
    assert.match(ends[2].json.result, new RegExp(`URL: http://127\\.0\\.0\\.1:${trap.port}/\n`)); // 0x7f.1, normalised
    const [, answer] = ms.requests('wf-loopback');
    const results = toolResults(answer);
    assert.equal(results.length, 3);
    assert.ok(results.every((r) => r.startsWith('web_fetch refused this URL: blocked_address\n')), results.join('\n---\n'));
    assert.equal(trap.connections, 0);
    assert.equal(site.requests.length, 0);
  });

  test('an admitted loopback site is fetched: title, main text, resolved links', async () => {
    const before = site.requests.length;
    const sid = await newSession(base, user);
    const t = await turn(base, user, sid, 'summarise the docs #scenario:wf-page');
    assert.equal(t.end.state, 'done', JSON.stringify(t.end));
    const end = t.events.find((e) => e.event === 'tool_end' && e.json.name === 'web_fetch');
    assert.equal(end.json.ok, true, end.json.result);
    assert.equal(end.json.lane, 'fast');
    const [, answer] = ms.requests('wf-page');
    const r = answer.tool_result;
    assert.ok(r.startsWith(`URL: ${site.url}/docs/page.html\nStatus: 200\nContent-Type: text/html; charset=utf-8\nTitle: Tusko test page \u2013 docs\n`), r);
    assert.match(r, /\n# Getting started\n\nTusko is a self-hosted agent platform\. Read the guide \[1\], the API description \[2\] and the upstream project \[3\]\.\n\n## Steps\n\n1\. Install\n2\. Configure\n3\. Chat\n\nSetting \| Default\nFETCH_TIMEOUT \| 15s\n/);
    assert.ok(r.includes(`\nLinks:\n[1] ${site.url}/docs/guide.html (guide)\n[2] ${site.url}/docs/api.json (API description)\n[3] https://example.org/upstream?x=1&y=2 (upstream project)\n`), r);
    for (const gone of ['SCRIPT-SECRET', 'ASIDE-TEXT', 'FOOTER-TEXT', 'Navigation only', 'display: none'])
      assert.ok(!r.includes(gone), `${gone} in the result`);
    // exactly one request reached the site, as a plain GET
    const got = site.requests.slice(before);
    assert.equal(got.length, 1);
    assert.equal(got[0].method, 'GET');
    assert.equal(got[0].url, '/docs/page.html');
    assert.match(got[0].headers['user-agent'], /^tusko\//);
    assert.match(got[0].headers.accept, /text\/html/);
    // what the user sees, and the span
    assert.equal(end.json.data.status, 200);
    assert.equal(end.json.data.format, 'html');
    assert.equal(end.json.data.title, 'Tusko test page \u2013 docs');
    assert.equal(end.json.data.links, 3);
    const [span] = await toolSpans(t.turnId);
    assert.equal(span.status, 'ok');
    assert.equal(span.attrs.url, `${site.url}/docs/page.html`);
    assert.equal(span.attrs.code, 'ok');
    assert.equal(span.attrs.status, 200);
    assert.equal(span.attrs.bytes, Buffer.byteLength(PAGE));
    assert.ok(!t.events.some((e) => e.event === 'sandbox_spawn'));
  });

  test('a redirect within the site is followed; links resolve against the final URL', async () => {
    const sid = await newSession(base, user);
    const t = await turn(base, user, sid, 'go #scenario:wf-moved');
    assert.equal(t.end.state, 'done');
    const r = ms.requests('wf-moved')[1].tool_result;
    assert.ok(r.startsWith(`URL: ${site.url}/docs/page.html\nStatus: 200\n`), r);
    assert.ok(r.includes(`Redirects: ${site.url}/moved (301) -> ${site.url}/docs/page.html (200)\n`), r);
    assert.ok(r.includes(`[1] ${site.url}/docs/guide.html (guide)`), r); // not /guide.html
    const [span] = await toolSpans(t.turnId);
    assert.equal(span.attrs.url, `${site.url}/moved`);
    assert.equal(span.attrs.final_url, `${site.url}/docs/page.html`);
    assert.equal(span.attrs.redirects, 1);
  });

  test('redirects from the admitted site to internal addresses are refused before any connection', async () => {
    const sid = await newSession(base, user);
    const t = await turn(base, user, sid, 'follow #scenario:wf-redirects-in');
    assert.equal(t.end.state, 'done', JSON.stringify(t.end));
    const ends = t.events.filter((e) => e.event === 'tool_end');
    assert.equal(ends.length, trap6 ? 3 : 2);
    for (const e of ends) {
      assert.equal(e.json.ok, false);
      assert.equal(e.json.code, 'redirect_blocked');
      assert.equal(e.json.cause, 'blocked_address');
      assert.match(e.json.result, /^web_fetch refused this URL: redirect_blocked \(the redirect target: blocked_address\)\n/);
    }
    assert.ok(ends[0].json.result.includes(`Redirects: ${site.url}/go-loopback (302) -> refused\n`), ends[0].json.result);
    assert.match(ends[0].json.result, /127\.0\.0\.1 is loopback/);
    assert.match(ends[1].json.result, /169\.254\.169\.254 is link-local/);
    if (trap6) assert.match(ends[2].json.result, /::1 is loopback/);
    const results = toolResults(ms.requests('wf-redirects-in')[1]);
    assert.equal(results.length, ends.length);
    assert.ok(results.every((r) => r.startsWith('web_fetch refused this URL: redirect_blocked (the redirect target: blocked_address)\n')));
    assert.equal(trap.connections, 0);
    if (trap6) assert.equal(trap6.connections, 0);
    const spans = await toolSpans(t.turnId);
    assert.ok(spans.every((s) => s.attrs.code === 'redirect_blocked' && s.attrs.cause === 'blocked_address' && [302, 307].includes(s.attrs.status)));
  });

  test('JSON is pretty-printed; max_chars cuts with a note', async () => {
    const sid = await newSession(base, user);
    const t = await turn(base, user, sid, 'json #scenario:wf-json-and-cap');
    assert.equal(t.end.state, 'done');
    const [json, long] = t.events.filter((e) => e.event === 'tool_end');
    assert.ok(json.json.result.includes('\n{\n  "name": "tusko",\n  "lanes": [\n    "fast",\n    "sandbox"\n  ],\n  "ok": true\n}\n'), json.json.result);
    assert.equal(json.json.data.format, 'json');
    assert.match(long.json.result, /\n\[\.\.\. truncated: \d+ of 25000 characters shown \(max_chars is 120\); fetch again with a larger max_chars to see more\]\n$/);
    assert.ok(long.json.data.chars_shown <= 120 && long.json.data.chars_shown > 100);
  });

  test('bad arguments and other schemes are clear results, not failures of the turn', async () => {
    const sid = await newSession(base, user);
    const t = await turn(base, user, sid, 'bad #scenario:wf-bad-args');
    assert.equal(t.end.state, 'done');
    const [noUrl, file] = t.events.filter((e) => e.event === 'tool_end');
    assert.equal(noUrl.json.ok, false);
    assert.match(noUrl.json.result, /"url" \(an http:\/\/ or https:\/\/ URL\) is required/);
    assert.equal(file.json.ok, false);
    assert.match(file.json.result, /^web_fetch refused this URL: bad_scheme\n/);
    // the stored conversation pairs each call with its result
    const all = await events(base, user, sid);
    assert.equal(all.filter((e) => e.event === 'tool_end').length, 2);
  });

  test('the fast lane: no sandbox was created by any of these turns', async () => {
    assert.equal(stack.pg.rows('SELECT count(*) FROM sandboxes')[0][0], '0');
    const me = await api(base, '/api/me', { headers: user.auth });
    assert.equal(me.status, 200);
    // every model request of this file was offered web_fetch and no sandbox tool
    const recs = ms.requests().filter((r) => String(r.scenario).startsWith('wf-'));
    assert.ok(recs.length >= 14);
    for (const r of recs) {
      assert.ok(r.tools.includes('web_fetch'));
      assert.deepEqual(r.tools.filter((t) => SANDBOX_TOOLS.includes(t)), []);
    }
  });
});
