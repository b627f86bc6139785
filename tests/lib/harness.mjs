// The integration test harness: real programs on loopback, a real Postgres,
// torn down even when a test fails, and any sanitizer report in a program's log
// fails the test that started it.
//
//   import { startPostgres, startProgram, api } from '../lib/harness.mjs';
//   const pg = await startPostgres();                 // shared cluster, fresh database
//   const tusko = await startProgram('tusko', { env: { DATABASE_URL: pg.url } });
//   const r = await api(tusko.url, '/healthz');
//   await tusko.stop();                               // SIGTERM; throws on a sanitizer report
//
// Programs come from $TUSKO_BUILD (default build/asan when it exists, else build).
// Every program and cluster started here is stopped by stopAll(), which the
// test files call from after() — and, as a last resort, on process exit.
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
export const BUILD = path.resolve(
  ROOT,
  process.env.TUSKO_BUILD ||
    (fs.existsSync(path.join(ROOT, 'build/asan/tusko')) ? 'build/asan' : 'build'),
);
export const OUT = path.resolve(ROOT, process.env.TUSKO_TEST_OUT || 'tests/out');
const LOGS = path.join(OUT, 'logs');
fs.mkdirSync(LOGS, { recursive: true });

const live = new Set(); // { stop(), kill() }

process.on('exit', () => {
  for (const x of live) {
    try {
      x.killSync();
    } catch {
      /* best effort */
    }
  }
});

export async function stopAll() {
  const errors = [];
  for (const x of [...live].reverse()) {
    try {
      await x.stop();
    } catch (e) {
      errors.push(e);
    }
  }
  if (errors.length) throw errors[0];
}

export function sleep(ms) {
  return new Promise((r) => setTimeout(r, ms));
}

export function tmpdir(prefix = 'tusko-test-') {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

export async function freePort() {
  const srv = net.createServer();
  srv.listen(0, '127.0.0.1');
  await once(srv, 'listening');
  const { port } = srv.address();
  srv.close();
  await once(srv, 'close');
  return port;
}

// Sanitizer and crash reports that fail a test when they appear in a log.
const BAD = [
  /ERROR: AddressSanitizer/,
  /ERROR: LeakSanitizer/,
  /runtime error:/,
  /UndefinedBehaviorSanitizer/,
  /ThreadSanitizer/,
  /fatal: .*assertion failed/,
];

export function sanitizerReport(text) {
  for (const re of BAD) {
    const m = text.match(re);
    if (m) {
      const i = text.indexOf(m[0]);
      return text.slice(Math.max(0, i - 200), i + 2000);
    }
  }
  return null;
}

// ---------- Postgres ----------

let sharedCluster = null;
let dbCounter = 0;

function pgsh(...args) {
  const r = spawnSync(path.join(ROOT, 'scripts/pg.sh'), args, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`pg.sh ${args.join(' ')} failed: ${r.stderr}${r.stdout}`);
  return r.stdout.trim();
}

function psql(baseUrl, sql) {
  const r = spawnSync('/usr/lib/postgresql/15/bin/psql', ['-X', '-q', '-v', 'ON_ERROR_STOP=1', baseUrl, '-c', sql], {
    encoding: 'utf8',
    env: { ...process.env, PGOPTIONS: '-c client_min_messages=warning' },
  });
  if (r.status !== 0) throw new Error(`psql failed: ${r.stderr}`);
  return r.stdout;
}

// The cluster: tests/run.sh starts one for the whole run and passes its folder
// in TUSKO_TEST_PG_DIR; a test file run on its own starts (and stops) its own.
async function cluster() {
  if (sharedCluster) return sharedCluster;
  let dir = process.env.TUSKO_TEST_PG_DIR;
  let own = false;
  if (!dir) {
    dir = tmpdir('tusko-pg-');
    own = true;
  }
  // a throwaway cluster: the fast settings, unsafe for data anyone needs
  // (scripts/pg.sh); a test of durability starts a durable one of its own
  const url = pgsh('start', '--unsafe-fast', dir);
  sharedCluster = { dir, url, own };
  if (own) {
    const handle = {
      stop: async () => {
        live.delete(handle);
        pgsh('stop', dir);
        fs.rmSync(dir, { recursive: true, force: true });
        sharedCluster = null;
      },
      killSync: () => pgsh('stop', dir),
    };
    live.add(handle);
  }
  return sharedCluster;
}

// A cluster of its own (not the shared one), for tests that crash or restart
// Postgres: durable (Postgres's defaults) unless { unsafeFast: true }.
// { dir, url, db(name) → url of a new database, pids() (postmaster first),
//   kill9() (every process of the cluster, as a crash would), start(), stop() }.
export async function startCluster({ unsafeFast = false } = {}) {
  const dir = tmpdir('tusko-pg-own-');
  fs.chmodSync(dir, 0o755);
  const args = ['start', ...(unsafeFast ? ['--unsafe-fast'] : []), dir];
  const url = pgsh(...args);
  const pids = () => {
    const pidFile = path.join(dir, 'data', 'postmaster.pid');
    if (!fs.existsSync(pidFile)) return [];
    const pm = Number(fs.readFileSync(pidFile, 'utf8').split('\n')[0]);
    const out = [pm];
    for (const p of fs.readdirSync('/proc')) {
      if (!/^\d+$/.test(p)) continue;
      try {
        const st = fs.readFileSync(`/proc/${p}/stat`, 'utf8');
        if (Number(st.slice(st.lastIndexOf(')') + 2).split(' ')[1]) === pm) out.push(Number(p));
      } catch {
        /* gone */
      }
    }
    return out;
  };
  let n = 0;
  const handle = {
    dir,
    url,
    pids,
    mode: () => pgsh('mode', dir),
    db(tag = 'own') {
      const name = `t_${tag.replace(/[^a-z0-9_]/gi, '_').toLowerCase()}_${process.pid}_${++n}`;
      psql(url, `CREATE DATABASE ${name} OWNER tusko`);
      const u = withDatabase(url, name);
      psql(u, 'CREATE EXTENSION IF NOT EXISTS pg_trgm');
      return u;
    },
    async kill9() {
      const ps = pids();
      for (const p of ps) {
        try {
          process.kill(p, 'SIGKILL');
        } catch {
          /* gone */
        }
      }
      // until every one has gone, reaped too: pg_ctl (and so `pg.sh start`)
      // takes a postmaster that is still a zombie for a running one
      const exists = (p) => {
        try {
          process.kill(p, 0);
          return true;
        } catch {
          return false;
        }
      };
      for (let i = 0; i < 400 && ps.some(exists); i++) await sleep(25);
      return ps;
    },
    start: () => pgsh(...args),
    stop: async () => {
      live.delete(handle);
      pgsh('stop', dir);
      fs.rmSync(dir, { recursive: true, force: true });
    },
    killSync: () => pgsh('stop', dir),
  };
  live.add(handle);
  return handle;
}

function withDatabase(url, db) {
  const u = new URL(url);
  u.pathname = '/' + db;
  return u.toString();
}

// A fresh, empty database on the test cluster: { url, name, query(sql), cluster }.
export async function startPostgres(tag = 'it') {
  const c = await cluster();
  const name = `t_${tag.replace(/[^a-z0-9_]/gi, '_').toLowerCase()}_${process.pid}_${++dbCounter}`;
  psql(c.url, `DROP DATABASE IF EXISTS ${name}`);
  psql(c.url, `CREATE DATABASE ${name} OWNER tusko`);
  const url = withDatabase(c.url, name);
  psql(url, 'CREATE EXTENSION IF NOT EXISTS pg_trgm');
  return {
    url,
    name,
    cluster: c,
    query: (sql) => psql(url, sql),
    // rows of a query, as arrays of strings (psql -A -t)
    rows: (sql) => {
      const r = spawnSync('/usr/lib/postgresql/15/bin/psql', ['-X', '-A', '-t', '-F', '\t', url, '-c', sql], { encoding: 'utf8' });
      if (r.status !== 0) throw new Error(`psql failed: ${r.stderr}`);
      return r.stdout.split('\n').filter((l) => l.length).map((l) => l.split('\t'));
    },
  };
}

// ---------- programs ----------

let progCounter = 0;

// Starts BUILD/<name> with env (added to a minimal environment), waiting for its
// "listening" log line. Returns { url, proc, logPath, log(), stop(), kill9(), wait() }.
export async function startProgram(name, { env = {}, args = [], timeoutMs = 20000, cwd = ROOT, expectListen = true, bin } = {}) {
  const exe = bin || path.join(BUILD, name);
  if (!fs.existsSync(exe)) throw new Error(`${exe} does not exist; run make`);
  const logPath = path.join(LOGS, `${name}-${process.pid}-${++progCounter}.log`);
  const fd = fs.openSync(logPath, 'w');
  const baseEnv = {
    PATH: process.env.PATH,
    HOME: process.env.HOME || '/root',
    LANG: 'C.UTF-8',
    ASAN_OPTIONS: 'abort_on_error=0:detect_leaks=1:halt_on_error=1',
    UBSAN_OPTIONS: 'print_stacktrace=1:halt_on_error=1',
    LSAN_OPTIONS: `suppressions=${path.join(ROOT, 'tests/lsan.supp')}:print_suppressions=0`,
  };
  const proc = spawn(exe, args, { cwd, env: { ...baseEnv, ...env }, stdio: ['pipe', fd, fd] });
  fs.closeSync(fd);
  let exited = null;
  const exitP = new Promise((resolve) => {
    proc.on('exit', (code, signal) => {
      exited = { code, signal };
      resolve(exited);
    });
  });
  const log = () => fs.readFileSync(logPath, 'utf8');
  let stopped = false;
  const handle = {
    name,
    proc,
    logPath,
    log,
    url: null,
    wait: () => exitP,
    exited: () => exited,
    async stop({ signal = 'SIGTERM', graceMs = 10000 } = {}) {
      if (stopped) return exited;
      stopped = true;
      live.delete(handle);
      if (!exited) {
        proc.kill(signal);
        const t = setTimeout(() => proc.kill('SIGKILL'), graceMs);
        await exitP;
        clearTimeout(t);
      }
      const report = sanitizerReport(log());
      if (report) throw new Error(`${name}: sanitizer report in ${logPath}:\n${report}`);
      if (exited.signal === 'SIGKILL' && signal !== 'SIGKILL')
        throw new Error(`${name} did not exit within ${graceMs} ms of ${signal}; see ${logPath}`);
      return exited;
    },
    async kill9() {
      stopped = true;
      live.delete(handle);
      if (!exited) {
        proc.kill('SIGKILL');
        await exitP;
      }
      return exited;
    },
    killSync() {
      if (!exited) proc.kill('SIGKILL');
    },
  };
  live.add(handle);
  if (!expectListen) return handle;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const text = log();
    const m = text.match(/msg="listening" url=(\S+)/);
    if (m) {
      handle.url = m[1];
      break;
    }
    if (exited) {
      live.delete(handle);
      throw new Error(`${name} exited (${JSON.stringify(exited)}) before listening:\n${text.slice(-3000)}`);
    }
    if (Date.now() > deadline) {
      await handle.kill9();
      throw new Error(`${name} did not start listening within ${timeoutMs} ms:\n${text.slice(-3000)}`);
    }
    await sleep(20);
  }
  return handle;
}

// Runs BUILD/<name> to completion: { code, signal, stdout, stderr }.
export function runProgram(name, args = [], { env = {}, input, timeoutMs = 60000 } = {}) {
  const r = spawnSync(path.join(BUILD, name), args, {
    env: { PATH: process.env.PATH, HOME: process.env.HOME || '/root', LANG: 'C.UTF-8', LSAN_OPTIONS: `suppressions=${path.join(ROOT, 'tests/lsan.supp')}:print_suppressions=0`, ...env },
    input,
    encoding: 'utf8',
    timeout: timeoutMs,
  });
  const report = sanitizerReport((r.stderr || '') + (r.stdout || ''));
  if (report) throw new Error(`${name}: sanitizer report:\n${report}`);
  return { code: r.status, signal: r.signal, stdout: r.stdout || '', stderr: r.stderr || '' };
}

// ---------- HTTP ----------

// A JSON-friendly fetch: api(base, '/path', { method, json, headers, body })
// → { status, headers, text, json }.
export async function api(base, p, { method, json, headers = {}, body, signal } = {}) {
  const h = { ...headers };
  let b = body;
  if (json !== undefined) {
    h['content-type'] = 'application/json';
    b = JSON.stringify(json);
  }
  const res = await fetch(base + p, { method: method || (b !== undefined ? 'POST' : 'GET'), headers: h, body: b, signal, redirect: 'manual' });
  const text = await res.text();
  let parsed = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    parsed = null;
  }
  return { status: res.status, headers: res.headers, text, json: parsed };
}

// Reads a Server-Sent Events stream until `until(event, all)` returns true, the
// stream ends, or timeoutMs passes. Events: { id, event, data } (data is the raw
// string; .json is parsed when it is JSON). An abort of `signal` ends it as a
// time-out does (a client dropping its connection).
export async function sse(base, p, { headers = {}, until = () => false, timeoutMs = 15000, signal } = {}) {
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), timeoutMs);
  if (signal) signal.addEventListener('abort', () => ac.abort(), { once: true });
  const events = [];
  try {
    const res = await fetch(base + p, { headers: { accept: 'text/event-stream', ...headers }, signal: ac.signal });
    if (!res.ok) {
      return { status: res.status, events, text: await res.text() };
    }
    const dec = new TextDecoder();
    let buf = '';
    let cur = { data: [] };
    for await (const chunk of res.body) {
      buf += dec.decode(chunk, { stream: true });
      let i;
      while ((i = buf.search(/\r\n|\n|\r/)) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(buf[i] === '\r' && buf[i + 1] === '\n' ? i + 2 : i + 1);
        if (line === '') {
          if (cur.data.length) {
            const ev = { id: cur.id, event: cur.event || 'message', data: cur.data.join('\n') };
            try {
              ev.json = JSON.parse(ev.data);
            } catch {
              /* not JSON */
            }
            events.push(ev);
            if (until(ev, events)) {
              ac.abort();
              return { status: res.status, events };
            }
          }
          cur = { data: [], id: cur.id };
        } else if (line.startsWith(':')) {
          continue;
        } else if (line.startsWith('{')) {
          cur.data.push(line);
        } else {
          const c = line.indexOf(':');
          const field = c < 0 ? line : line.slice(0, c);
          let value = c < 0 ? '' : line.slice(c + 1);
          if (value.startsWith(' ')) value = value.slice(1);
          if (field === 'data') cur.data.push(value);
          else if (field === 'event') cur.event = value;
          else if (field === 'id') cur.id = value;
        }
      }
    }
    return { status: res.status, events };
  } catch (e) {
    if (e.name === 'AbortError') return { status: 0, events, timedOut: true };
    throw e;
  } finally {
    clearTimeout(timer);
  }
}
