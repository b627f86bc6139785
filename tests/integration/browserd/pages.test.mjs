// tusko-browserd's page actions against real Chromium: Steel's /v1/scrape,
// /v1/screenshot and /v1/pdf, and our /v1/sessions/{id}/actions (navigate with
// an outline of @eN refs, type, click, read, scroll, screenshot). Pages are
// data: URLs and pages of a loopback server the test runs, which the operator
// allowlist (EGRESS_ALLOW) admits; a second loopback listener, not admitted,
// shows that nothing a page asks for reaches it (the browser's only way out is
// the egress proxy).
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';

import Steel from 'steel-sdk';

import { sleep, stopAll } from '../../lib/harness.mjs';
import { KEY, browsers, startBrowserd } from './brd.mjs';

after(stopAll);

const page = (html) => 'data:text/html;charset=utf-8,' + encodeURIComponent(html);

const FORM = `<html lang="en"><head><title>Form page</title>
<meta name="description" content="a page to act on"><meta property="og:title" content="OG form">
<link rel="canonical" href="https://example.test/form">
<script type="application/ld+json">{"@type":"WebPage","name":"ld"}</script></head>
<body><h1>Hello</h1><p>Some <b>bold</b> and <a href="https://example.test/a">a link</a>.</p>
<ol><li>one</li><li>two</li></ol>
<table><tr><th>k</th><th>v</th></tr><tr><td>a</td><td>1</td></tr></table>
<form onsubmit="document.title='submitted:'+this.q.value; return false">
<input name="q" aria-label="Search" value="old"><button type="button"
 onclick="document.title='clicked:'+document.forms[0].q.value">Go</button></form>
<div style="height:5000px">tall</div>
<script>addEventListener('scroll', () => { document.title = 'y=' + Math.round(scrollY); });</script>
</body></html>`;

describe('page actions', () => {
  let s, trap, trapHits, site, base;
  const served = [];
  before(async () => {
    trapHits = 0;
    trap = net.createServer((c) => {
      trapHits++;
      c.destroy();
    });
    await new Promise((r) => trap.listen(0, '127.0.0.1', r));
    const tp = trap.address().port;
    site = http.createServer((req, res) => {
      served.push(req.url);
      if (req.url === '/missing') {
        res.writeHead(404, { 'content-type': 'text/html' });
        return res.end('<title>not here</title><p>404</p>');
      }
      if (req.url === '/to-trap') {
        res.writeHead(302, { location: `http://127.0.0.1:${tp}/landed` });
        return res.end();
      }
      if (req.url === '/favicon.ico') {
        res.writeHead(404);
        return res.end();
      }
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      res.end(`<html lang="en"><head><title>Served page</title></head><body><h1>From the test's server</h1>
        <a href="/next">next</a><img src="http://127.0.0.1:${tp}/img.png"></body></html>`);
    });
    await new Promise((r) => site.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${site.address().port}`;
    // the trap's port is an allowed port: what refuses it is the address rule
    s = await startBrowserd({ env: { BROWSERD_WARM_POOL_SIZE: '1', EGRESS_ALLOW: `127.0.0.1:${site.address().port}`, EGRESS_ALLOWED_PORTS: String(tp) } });
  });
  after(async () => {
    trap.close();
    site.close();
    await s.stop();
  });

  test('a loopback page the operator allowlist admits is scraped through the egress proxy', async () => {
    const r = await s.call('/v1/scrape', { json: { url: base + '/', format: ['markdown'] } });
    assert.equal(r.status, 200, r.text);
    assert.match(r.json.content.markdown, /^# From the test's server$/m);
    assert.deepEqual(r.json.links, [{ url: base + '/next', text: 'next' }]);
    assert.equal(r.json.metadata.statusCode, 200);
    assert.equal(r.json.metadata.title, 'Served page');
    assert.ok(served.includes('/'));
    const miss = await s.call('/v1/scrape', { json: { url: base + '/missing' } });
    assert.equal(miss.json.metadata.statusCode, 404);
    // a redirect to a loopback port not admitted: refused by the proxy
    const sess = (await s.call('/v1/sessions', { method: 'POST' })).json;
    const nav = await s.call(`/v1/sessions/${sess.id}/actions`, { json: { steps: [{ action: 'navigate', url: base + '/to-trap' }] } });
    assert.ok(served.includes('/to-trap'));
    // Chromium shows the proxy's refusal as the page: 403 and its reason
    assert.equal(nav.json.ok, true, JSON.stringify(nav.json));
    const landed = nav.json.results[0];
    assert.equal(landed.status, 403);
    assert.match(landed.outline, /127\.0\.0\.1/);
    await s.call(`/v1/sessions/${sess.id}/release`, { method: 'POST' });
    assert.equal(trapHits, 0, 'the image and the redirect never reached the listener');
    assert.match(s.log(), new RegExp(`egress msg="refused" listener="browser [^"]+" status=403 code=blocked_address target="http://127.0.0.1:${trap.address().port}/landed"`));
  });

  test('scrape gives html, markdown, links and metadata (through the steel-sdk)', async () => {
    const client = new Steel({ steelAPIKey: KEY, baseURL: s.url, maxRetries: 0 });
    const r = await client.scrape({ url: page(FORM), format: ['html', 'markdown'] });
    assert.match(r.content.html, /<h1>Hello<\/h1>/);
    const md = r.content.markdown;
    assert.match(md, /^# Hello$/m);
    assert.match(md, /Some \*\*bold\*\* and \[a link\]\(https:\/\/example\.test\/a\)\./);
    assert.match(md, /^1\. one\n2\. two$/m);
    assert.match(md, /^\| k \| v \|\n\| --- \| --- \|\n\| a \| 1 \|$/m);
    assert.deepEqual(r.links, [{ url: 'https://example.test/a', text: 'a link' }]);
    assert.equal(r.metadata.title, 'Form page');
    assert.equal(r.metadata.description, 'a page to act on');
    assert.equal(r.metadata.ogTitle, 'OG form');
    assert.equal(r.metadata.language, 'en');
    assert.equal(r.metadata.canonical, 'https://example.test/form');
    assert.deepEqual(r.metadata.jsonLd, { '@type': 'WebPage', name: 'ld' });
    assert.equal(r.metadata.statusCode, 200);
    assert.ok(r.metadata.wordCount > 5);
    // only the formats asked: html by default
    const def = await s.call('/v1/scrape', { json: { url: page('<p>x</p>') } });
    assert.deepEqual(Object.keys(def.json.content), ['html']);
    // with a screenshot and a pdf
    const both = await s.call('/v1/scrape', { json: { url: page('<p>x</p>'), format: ['markdown'], screenshot: true, pdf: true } });
    assert.equal(both.status, 200);
    assert.deepEqual([...Buffer.from(both.json.screenshot, 'base64').subarray(0, 3)], [0xff, 0xd8, 0xff]);
    assert.equal(Buffer.from(both.json.pdf, 'base64').subarray(0, 5).toString(), '%PDF-');
    // each scrape's browser is released at its end
    const live = (await s.call('/v1/sessions?status=live')).json.sessions;
    assert.deepEqual(live, []);
  });

  test('screenshot is a JPEG of the page and pdf a PDF', async () => {
    const shot = await fetch(s.url + '/v1/screenshot', { method: 'POST', headers: { 'steel-api-key': KEY, 'content-type': 'application/json' }, body: JSON.stringify({ url: page('<body style="background:#f00">red</body>') }) });
    assert.equal(shot.status, 200);
    assert.equal(shot.headers.get('content-type'), 'image/jpeg');
    const img = Buffer.from(await shot.arrayBuffer());
    assert.deepEqual([...img.subarray(0, 3)], [0xff, 0xd8, 0xff]);
    // the frame's size from the JPEG's SOF0 marker: the default 1280x800 window
    const sof = img.indexOf(Buffer.from([0xff, 0xc0]));
    assert.ok(sof > 0);
    assert.deepEqual([img.readUInt16BE(sof + 7), img.readUInt16BE(sof + 5)], [1280, 800]);
    const full = await s.call('/v1/screenshot', { json: { url: page(FORM), fullPage: true } });
    assert.equal(full.status, 200);
    const pdf = await fetch(s.url + '/v1/pdf', { method: 'POST', headers: { 'steel-api-key': KEY, 'content-type': 'application/json' }, body: JSON.stringify({ url: page('<h1>printed</h1>') }) });
    assert.equal(pdf.headers.get('content-type'), 'application/pdf');
    assert.equal(Buffer.from(await pdf.arrayBuffer()).subarray(0, 5).toString(), '%PDF-');
  });

  test('a session navigates, reads an outline, types, clicks, scrolls and captures', async () => {
    const sess = (await s.call('/v1/sessions', { method: 'POST' })).json;
    const act = (steps) => s.call(`/v1/sessions/${sess.id}/actions`, { json: { steps } });
    let r = await act([{ action: 'navigate', url: page(FORM) }]);
    assert.equal(r.status, 200);
    assert.equal(r.json.ok, true, JSON.stringify(r.json.error));
    const nav = r.json.results[0];
    assert.equal(nav.title, 'Form page');
    assert.equal(nav.status, 200);
    const o = nav.outline;
    assert.match(o, /^- heading "Hello" level=1$/m);
    assert.match(o, /- link "a link" \[@e1\]/);
    assert.match(o, /- textbox "Search" value="old" \[@e2\]/);
    assert.match(o, /- button "Go" \[@e3\]/);
    assert.ok(o.length < 2000, 'an outline of a small page is short');
    r = await act([
      { action: 'type', ref: '@e2', text: 'typed words' },
      { action: 'click', ref: 'e3' },
      { action: 'read', mode: 'text' },
    ]);
    assert.equal(r.json.ok, true, JSON.stringify(r.json.error));
    assert.equal(r.json.results[1].title, 'clicked:typed words', 'typing replaced the old value, the click ran');
    assert.match(r.json.results[2].text, /Hello\s+Some bold and a link\./);
    r = await act([{ action: 'type', ref: '@e2', text: 'and enter', submit: true }]);
    assert.equal(r.json.results[0].title, 'submitted:and enter');
    r = await act([{ action: 'scroll', direction: 'down', amount: 700 }]);
    assert.equal(r.json.results[0].title, 'y=700');
    r = await act([{ action: 'screenshot' }, { action: 'read', mode: 'outline' }]);
    assert.equal(r.json.results[0].mimeType, 'image/jpeg');
    assert.deepEqual([...Buffer.from(r.json.results[0].data, 'base64').subarray(0, 3)], [0xff, 0xd8, 0xff]);
    assert.match(r.json.results[1].outline, /textbox "Search" value="and enter"/);
    // stops at the first failure, saying which step
    r = await act([{ action: 'read' }, { action: 'click', ref: '@e99' }, { action: 'read' }]);
    assert.equal(r.json.ok, false);
    assert.equal(r.json.results.length, 1);
    assert.equal(r.json.error.step, 1);
    assert.match(r.json.error.message, /no element @e99/);
    r = await act([{ action: 'fly' }]);
    assert.match(r.json.error.message, /unknown action/);
    assert.equal((await s.call(`/v1/sessions/${sess.id}/actions`, { json: { steps: [] } })).status, 400);
    await s.call(`/v1/sessions/${sess.id}/release`, { method: 'POST' });
    assert.equal((await act([{ action: 'read' }])).status, 409);
  });

  test('schemes other than http, https and data are refused; loopback is not reached', async () => {
    for (const url of ['file:///etc/passwd', 'chrome://version', 'javascript:alert(1)', 'view-source:https://a.test', 'ftp://a.test/']) {
      const r = await s.call('/v1/scrape', { json: { url } });
      assert.equal(r.status, 400, url);
      assert.equal(r.json.code, 'URL_REFUSED', url);
    }
    const sess = (await s.call('/v1/sessions', { method: 'POST' })).json;
    const act = (steps) => s.call(`/v1/sessions/${sess.id}/actions`, { json: { steps } });
    let r = await act([{ action: 'navigate', url: 'file:///etc/hostname' }]);
    assert.equal(r.json.ok, false);
    assert.match(r.json.error.message, /only http, https and data/);
    // a page on this host's loopback, a subresource of one, a redirect by script,
    // a fetch and a WebSocket: none reaches the listener
    const port = trap.address().port;
    r = await act([{ action: 'navigate', url: `http://127.0.0.1:${port}/` }]);
    assert.equal(r.json.ok, true);
    assert.equal(r.json.results[0].status, 403, 'the proxy refused it');
    const reach = `<img src="http://127.0.0.1:${port}/i.png"><script>
      fetch('http://127.0.0.1:${port}/f').catch(() => {});
      try { new WebSocket('ws://127.0.0.1:${port}/w'); } catch (e) {}
      setTimeout(() => { location.href = 'http://localhost:${port}/r'; }, 50);</script>`;
    r = await act([{ action: 'navigate', url: page(reach) }]);
    await sleep(1500);
    assert.equal(trapHits, 0, 'nothing reached the loopback listener');
    for (const pth of ['/i.png', '/f', '/r']) assert.match(s.log(), new RegExp(`code=blocked_address target="http://(127.0.0.1|localhost):${port}${pth}"`), pth);
    // the WebSocket goes as a CONNECT, refused the same way
    assert.match(s.log(), new RegExp(`code=blocked_address target="127.0.0.1:${port}"`));
    assert.ok(browsers(s.stateDir).length > 0);
    await s.call(`/v1/sessions/${sess.id}/release`, { method: 'POST' });
  });
});
