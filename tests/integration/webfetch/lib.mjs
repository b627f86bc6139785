// Local servers for the web_fetch and check-url tests. Everything listens on
// loopback: a "site" on 127.0.0.2 (the address the tests admit with SSRF_ALLOW)
// and traps on 127.0.0.1 and ::1 that count every connection made to them —
// a refused fetch must leave them at zero.
import http from 'node:http';
import net from 'node:net';

function listen(server, host) {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, () => resolve(server.address().port));
  });
}

// A TCP server that accepts and counts, and answers nothing useful.
export async function startTrap(host = '127.0.0.1') {
  const trap = { host, connections: 0 };
  const server = net.createServer((sock) => {
    trap.connections++;
    sock.on('error', () => {});
    sock.end('HTTP/1.1 200 OK\r\ncontent-length: 6\r\n\r\nSECRET');
  });
  try {
    trap.port = await listen(server, host);
  } catch (e) {
    if (host === '::1') return null; // no IPv6 loopback here
    throw e;
  }
  trap.url = host.includes(':') ? `http://[${host}]:${trap.port}` : `http://${host}:${trap.port}`;
  trap.close = () => new Promise((r) => server.close(() => r()));
  return trap;
}

export const PAGE = `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>Tusko test page &ndash; docs</title>
<style>.hidden { display: none }</style>
<script>window.secret = "SCRIPT-SECRET";</script>
</head><body>
<header><a href="/">Home</a><nav><a href="/nav-only">Navigation only</a></nav></header>
<main>
<h1>Getting started</h1>
<p>Tusko is a <em>self-hosted</em> agent platform. Read the <a href="guide.html">guide</a>,
the <a href="/docs/api.json">API description</a> and the
<a href="https://example.org/upstream?x=1&amp;y=2">upstream project</a>.</p>
<h2>Steps</h2>
<ol><li>Install</li><li>Configure</li><li>Chat</li></ol>
<table><tr><th>Setting</th><th>Default</th></tr><tr><td>FETCH_TIMEOUT</td><td>15s</td></tr></table>
</main>
<aside>Sponsored: ASIDE-TEXT</aside>
<footer>FOOTER-TEXT</footer>
</body></html>`;

// The site: pages, redirects (one within the site, some to internal addresses)
// and JSON. Records every request.
export async function startSite({ trap, trap6 } = {}) {
  const site = { requests: [] };
  const server = http.createServer((req, res) => {
    site.requests.push({ method: req.method, url: req.url, headers: req.headers });
    const u = req.url;
    if (u === '/docs/page.html') {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      return res.end(PAGE);
    }
    if (u === '/moved') {
      res.writeHead(301, { location: '/docs/page.html' });
      return res.end();
    }
    if (u === '/go-loopback') {
      res.writeHead(302, { location: `${trap.url}/secret` });
      return res.end();
    }
    if (u === '/go-loopback6' && trap6) {
      res.writeHead(302, { location: `${trap6.url}/secret` });
      return res.end();
    }
    if (u === '/go-metadata') {
      res.writeHead(307, { location: 'http://169.254.169.254/latest/meta-data/iam/security-credentials/' });
      return res.end();
    }
    if (u === '/docs/api.json') {
      res.writeHead(200, { 'content-type': 'application/json' });
      return res.end('{"name":"tusko","lanes":["fast","sandbox"],"ok":true}');
    }
    if (u === '/long.txt') {
      res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' });
      return res.end('word '.repeat(5000));
    }
    res.writeHead(404, { 'content-type': 'text/plain' });
    res.end('no such page');
  });
  site.port = await listen(server, '127.0.0.2');
  site.url = `http://127.0.0.2:${site.port}`;
  site.close = () =>
    new Promise((r) => {
      server.closeAllConnections();
      server.close(() => r());
    });
  return site;
}
