// bench/turns — concurrent chat turns against a scripted model that streams
// for about 5 s (50 deltas 100 ms apart after 200 ms), on this machine.
//
//   node bench/turns/bench.mjs [--turns 2000] [--build build]
//
// Starts a private Postgres, the scripted model server (its own process, not
// recording) and tusko (the optimised build), makes the sessions, opens one
// event stream per session (idle sessions), then sends every message at once
// and follows every turn to its end. Measures tusko's own CPU time (utime +
// stime from /proc) and resident memory: at rest, with every session's event
// stream open (idle), and at the peak of streaming (active). CPU per turn is
// tusko's CPU time over the whole run divided by the turns: waiting on the
// model costs no CPU, so this is the server's work per turn without the wait.
//
// Postgres: its durable defaults, as `make run` runs it (BENCH_PG=unsafe-fast
// for scripts/pg.sh's fast settings, fsync and synchronous commit off, which
// are unsafe for data anyone needs); the table's first line says which.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const args = process.argv.slice(2);
const opt = (name, def) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : def;
};
const N = Number(opt('turns', process.env.BENCH_TURNS || 2000));
const BUILD = path.resolve(ROOT, opt('build', process.env.TUSKO_BUILD || 'build'));
const TICK = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;
const PAGE = 4096;
// BENCH_SCENARIO: another fixture (to profile parts; only slow-stream is checked)
const SCENARIO = process.env.BENCH_SCENARIO || 'slow-stream';
const PG_MODE = process.env.BENCH_PG || 'durable';
if (!['durable', 'unsafe-fast'].includes(PG_MODE)) throw new Error(`BENCH_PG: "${PG_MODE}" is not durable or unsafe-fast`);

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function procStat(pid) {
  const s = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
  return { utime: Number(f[11]), stime: Number(f[12]), threads: Number(f[17]), rss: Number(f[21]) * PAGE };
}
const cpuMs = (pid) => {
  const s = procStat(pid);
  return ((s.utime + s.stime) * 1000) / TICK;
};
const rss = (pid) => procStat(pid).rss;

function pgsh(...a) {
  const r = spawnSync(path.join(ROOT, 'scripts/pg.sh'), a, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`pg.sh ${a.join(' ')}: ${r.stderr}`);
  return r.stdout.trim();
}

function pgCpuMs(dir) {
  // every process of the private cluster (postmaster and backends)
  let total = 0;
  const pidFile = path.join(dir, 'data', 'postmaster.pid');
  if (!fs.existsSync(pidFile)) return 0;
  const pm = Number(fs.readFileSync(pidFile, 'utf8').split('\n')[0]);
  for (const p of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(p)) continue;
    try {
      const st = fs.readFileSync(`/proc/${p}/stat`, 'utf8');
      const f = st.slice(st.lastIndexOf(')') + 2).split(' ');
      if (Number(p) === pm || Number(f[1]) === pm) total += ((Number(f[11]) + Number(f[12])) * 1000) / TICK;
    } catch {
      /* gone */
    }
  }
  return total;
}

function waitLine(proc, re, what, timeoutMs = 30000) {
  return new Promise((resolve, reject) => {
    let buf = '';
    const t = setTimeout(() => reject(new Error(`${what} did not start:\n${buf.slice(-2000)}`)), timeoutMs);
    const on = (d) => {
      buf += d.toString();
      const m = buf.match(re);
      if (m) {
        clearTimeout(t);
        resolve(m);
      }
    };
    proc.stdout?.on('data', on);
    proc.stderr?.on('data', on);
  });
}

async function json(base, p, { method, body, headers = {} } = {}) {
  const res = await fetch(base + p, {
    method: method || (body ? 'POST' : 'GET'),
    headers: { 'content-type': 'application/json', ...headers },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  let j = null;
  try {
    j = JSON.parse(text);
  } catch {
    /* not JSON */
  }
  return { status: res.status, json: j, text };
}

// One session's event stream: resolves `ended` on its turn_end.
function follow(base, auth, sid) {
  const ac = new AbortController();
  const st = { text: '', end: null, events: 0, opened: null };
  let resolveEnd;
  st.ended = new Promise((r) => (resolveEnd = r));
  st.opened = (async () => {
    const res = await fetch(`${base}/api/sessions/${sid}/events`, { headers: { ...auth, accept: 'text/event-stream' }, signal: ac.signal });
    if (res.status !== 200) throw new Error(`events: ${res.status}`);
    (async () => {
      const dec = new TextDecoder();
      let buf = '';
      try {
        for await (const chunk of res.body) {
          buf += dec.decode(chunk, { stream: true });
          let i;
          while ((i = buf.indexOf('\n\n')) >= 0) {
            const block = buf.slice(0, i);
            buf = buf.slice(i + 2);
            const data = block.split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6)).join('\n');
            if (!data) continue;
            st.events++;
            const ev = JSON.parse(data);
            if (ev.type === 'text') st.text += ev.delta;
            else if (ev.type === 'turn_end') {
              st.end = ev;
              resolveEnd(st);
            }
          }
        }
      } catch {
        /* aborted */
      }
    })();
  })();
  st.close = () => ac.abort();
  return st;
}

async function main() {
  const load0 = os.loadavg();
  for (const p of ['tusko']) if (!fs.existsSync(path.join(BUILD, p))) throw new Error(`${BUILD}/${p} missing: run make`);
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-turns-'));
  fs.chmodSync(tmp, 0o755); // the cluster runs as the postgres user
  // BENCH_PG_DIR: a running cluster of scripts/pg.sh to use (e.g. one with
  // pg_stat_statements loaded, to see where the database time goes)
  const ownPg = !process.env.BENCH_PG_DIR;
  const pgdir = process.env.BENCH_PG_DIR || path.join(tmp, 'pg');
  let dbUrl = ownPg ? pgsh('start', ...(PG_MODE === 'unsafe-fast' ? ['--unsafe-fast'] : []), pgdir) : pgsh('url', pgdir);
  const pgMode = pgsh('mode', pgdir);
  if (!ownPg) {
    const db = `bench_${process.pid}`;
    spawnSync('/usr/lib/postgresql/15/bin/psql', ['-X', '-q', dbUrl, '-c', `CREATE DATABASE ${db} OWNER tusko`]);
    dbUrl = dbUrl.replace(/\/tusko$/, `/${db}`);
  }
  const procs = [];
  const cleanup = () => {
    for (const p of procs) {
      try {
        p.kill('SIGKILL');
      } catch {
        /* gone */
      }
    }
    try {
      if (ownPg) pgsh('stop', pgdir);
    } catch {
      /* best effort */
    }
    fs.rmSync(tmp, { recursive: true, force: true });
  };
  process.on('exit', cleanup);
  try {
    // the scripted model server, not recording
    const ms = spawn(process.execPath, [path.join(ROOT, 'tests/model-server/server.mjs'), '--no-record'], { stdio: ['ignore', 'pipe', 'pipe'] });
    procs.push(ms);
    const [, msUrl] = await waitLine(ms, /listening (http:\/\/\S+)/, 'model server');

    const env = {
      PATH: process.env.PATH,
      HOME: process.env.HOME || '/root',
      DATABASE_URL: dbUrl,
      TUSKO_LISTEN: '127.0.0.1:0',
      TUSKO_MODELS: 'openai:gpt-4o-mini',
      OPENAI_BASE_URL: `${msUrl}/v1`,
      OPENAI_API_KEY: 'sk-bench',
      TUSKO_DB_POOL_SIZE: '24',
      LOG_LEVEL: 'warn',
      // 0 switches off the memory lookup at the start of each turn (to measure it)
      ...(process.env.UTOPIA_MEMORY_BUDGET_TOKENS ? { UTOPIA_MEMORY_BUDGET_TOKENS: process.env.UTOPIA_MEMORY_BUDGET_TOKENS } : {}),
    };
    const run = (a, input) => spawnSync(path.join(BUILD, 'tusko'), a, { env, input, encoding: 'utf8' });
    let r = run(['migrate']);
    if (r.status !== 0) throw new Error(`migrate: ${r.stderr}`);
    // USERS users, so each stays under the default chat rate limit (30 a minute)
    const USERS = Math.max(1, Math.ceil(N / 20));
    const auths = [];
    for (let u = 0; u < USERS; u++) {
      r = run(['user', 'add', '--email', `bench${u}@example.test`, '--password-stdin'], 'bench password 123\n');
      if (r.status !== 0) throw new Error(`user add: ${r.stderr}`);
      r = run(['token', 'create', '--email', `bench${u}@example.test`]);
      if (r.status !== 0) throw new Error(`token: ${r.stderr}`);
      auths.push({ authorization: `Bearer ${r.stdout.trim()}` });
    }
    const authOf = (i) => auths[i % USERS];

    const tusko = spawn(path.join(BUILD, 'tusko'), ['serve'], { env: { ...env, LOG_LEVEL: 'info' }, stdio: ['ignore', 'pipe', 'pipe'] });
    procs.push(tusko);
    const logLines = [];
    const logFile = process.env.BENCH_LOG ? fs.openSync(process.env.BENCH_LOG, 'w') : null;
    tusko.stderr.on('data', (d) => {
      if (logFile) fs.writeSync(logFile, d);
      for (const l of d.toString().split('\n')) if (/ (warn|error) /.test(l)) logLines.push(l);
    });
    const [, base] = await waitLine(tusko, /msg="listening" url=(\S+)/, 'tusko');
    await sleep(300);
    const rss0 = rss(tusko.pid);

    // the sessions
    const sids = [];
    for (let i = 0; i < N; i += 100) {
      const batch = await Promise.all(
        Array.from({ length: Math.min(100, N - i) }, (_, k) => json(base, '/api/sessions', { body: {}, headers: authOf(i + k) })),
      );
      for (const b of batch) {
        if (b.status !== 201) throw new Error(`create session: ${b.status} ${b.text}`);
        sids.push(b.json.id);
      }
    }
    await sleep(300);
    const rssSessions = rss(tusko.pid);

    // idle: every session followed by a client, no turn
    const streams = [];
    for (let i = 0; i < N; i += 200) {
      const part = sids.slice(i, i + 200).map((sid, k) => follow(base, authOf(i + k), sid));
      await Promise.all(part.map((s) => s.opened));
      streams.push(...part);
    }
    await sleep(1000);
    const rssIdle = rss(tusko.pid);

    // active: every message at once, the 5 s scripted stream each
    const cpu0 = cpuMs(tusko.pid);
    const pg0 = pgCpuMs(pgdir);
    const ms0 = cpuMs(ms.pid);
    const me0 = process.cpuUsage();
    const t0 = Date.now();
    // as fast as the server takes them, at most INFLIGHT at once (like many
    // browsers, each sending one message)
    const INFLIGHT = 256;
    const posts = new Array(N);
    let next = 0;
    await Promise.all(
      Array.from({ length: INFLIGHT }, async () => {
        while (next < N) {
          const i = next++;
          posts[i] = await json(base, `/api/sessions/${sids[i]}/messages`, { body: { content: `bench #scenario:${SCENARIO}` }, headers: authOf(i) });
        }
      }),
    );
    const tPosted = Date.now();
    const pgPosted = pgCpuMs(pgdir) - pg0;
    const cpuPosted = cpuMs(tusko.pid) - cpu0;
    const refused = posts.filter((p) => p.status !== 202);
    // the peak: sample while the streams run
    let rssActive = 0;
    let peakThreads = 0;
    const sampler = setInterval(() => {
      try {
        const s = procStat(tusko.pid);
        rssActive = Math.max(rssActive, s.rss);
        peakThreads = Math.max(peakThreads, s.threads);
      } catch {
        /* exited */
      }
    }, 200);
    const statsMid = [];
    const midTimer = setTimeout(async () => {
      statsMid.push((await json(msUrl, '/_stats')).json);
    }, 3000);
    const results = await Promise.race([
      Promise.all(streams.map((s) => s.ended)),
      sleep(120000).then(() => null),
    ]);
    clearInterval(sampler);
    clearTimeout(midTimer);
    const tEnd = Date.now();
    const cpuRun = cpuMs(tusko.pid) - cpu0;
    const msRun = cpuMs(ms.pid) - ms0;
    const me1 = process.cpuUsage(me0);
    const meRun = (me1.user + me1.system) / 1000;
    const pgRun = pgCpuMs(pgdir) - pg0;
    const stats = (await json(msUrl, '/_stats')).json;
    const expected =
      'This answer streams slowly on purpose so that thousands of concurrent turns can be measured while each one stays open for about five seconds from the first byte to the last, like a real model.';
    const ended = streams.filter((s) => s.end);
    const bad = ended.filter((s) => s.end.state !== 'done' || (SCENARIO === 'slow-stream' && s.text !== expected));
    const missing = N - ended.length;
    const errors = refused.length + bad.length + missing;
    for (const s of streams) s.close();

    const kb = (b) => (b / 1024).toFixed(1);
    const rows = [
      ['turns started at once', N, `>= 2000`],
      ['model streams in flight at once (peak, model server)', stats.peak, `>= 2000`],
      ['errors (refused posts + failed/garbled turns + missing ends)', errors, '0'],
      ['  refused POSTs / failed turns / turns without an end', `${refused.length} / ${bad.length} / ${missing}`, ''],
      ['time to accept every POST (s)', ((tPosted - t0) / 1000).toFixed(2), ''],
      ['wall time, first POST to last turn_end (s)', ((tEnd - t0) / 1000).toFixed(2), '~5.2 (the model)'],
      ['tusko CPU per turn, model wait excluded (ms)', (cpuRun / N).toFixed(3), ''],
      ['  tusko CPU over the run (s) / Postgres CPU (s)', `${(cpuRun / 1000).toFixed(2)} / ${(pgRun / 1000).toFixed(2)}`, ''],
      ['  of which accepting the POSTs: tusko / Postgres (s)', `${(cpuPosted / 1000).toFixed(2)} / ${(pgPosted / 1000).toFixed(2)}`, ''],
      ['  CPU of the model server / of this client (s)', `${(msRun / 1000).toFixed(2)} / ${(meRun / 1000).toFixed(2)}`, ''],
      ['memory per idle session, its event stream open (KiB)', kb((rssIdle - rssSessions) / N), ''],
      ['memory per active session, streaming a turn (KiB)', kb((rssActive - rssIdle) / N), ''],
      ['tusko RSS: at rest / idle / active peak (MiB)', `${(rss0 / 1048576).toFixed(1)} / ${(rssIdle / 1048576).toFixed(1)} / ${(rssActive / 1048576).toFixed(1)}`, ''],
      ['tusko threads at the peak', peakThreads, 'fixed (no thread per turn)'],
    ];
    const w = Math.max(...rows.map((x) => x[0].length));
    console.log(`bench/turns: ${N} concurrent turns by ${USERS} users, scripted model streaming ~5 s each, ${os.cpus().length} cores, load ${load0.map((x) => x.toFixed(2)).join(' ')} at the start`);
    console.log(`Postgres: ${pgMode === 'durable' ? 'durable (its defaults: fsync, synchronous_commit, full_page_writes on; as make run)' : 'UNSAFE fast settings (fsync, synchronous_commit, full_page_writes off; scripts/pg.sh --unsafe-fast)'}`);
    console.log(`${'measure'.padEnd(w)}  ${'value'.padStart(16)}  target`);
    for (const [k, v, t] of rows) console.log(`${k.padEnd(w)}  ${String(v).padStart(16)}  ${t}`);
    if (logLines.length) console.log(`tusko warnings/errors: ${logLines.length} (first: ${logLines[0]})`);
    if (bad.length) console.log(`first failed turn: ${JSON.stringify(bad[0].end)} text=${JSON.stringify(bad[0].text.slice(0, 80))}`);
    if (refused.length) console.log(`first refused POST: ${refused[0].status} ${refused[0].text.slice(0, 200)}`);
    tusko.kill('SIGTERM');
    await new Promise((r) => tusko.once('exit', r));
    ms.kill('SIGTERM');
    if (results === null) console.log('some turns did not end within 120 s');
    process.exitCode = errors === 0 && N >= 2000 ? 0 : 1;
  } finally {
    cleanup();
  }
}

main().catch((e) => {
  console.error(e.stack || String(e));
  process.exit(1);
});
