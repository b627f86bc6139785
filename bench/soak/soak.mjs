// bench/soak — the whole stack under a steady mix of work for SOAK_MINUTES
// (default 15), then the counts that show nothing grows with the work done.
//
//   SOAK_MINUTES=15 SOAK_USERS=6 node bench/soak/soak.mjs
//
// Real Postgres (a durable cluster of its own), real tusko-sandboxd (native
// runtime, SANDBOX_IMAGE_DIR), the optimised tusko (build/), the scripted model
// server. Each simulated user loops: a chat; a live event stream that is
// dropped now and then and resumed with Last-Event-ID; talk turns; sandbox
// turns (write a file, run a command, run code) and a download of the file;
// the chat deleted after a few turns (its sandbox released) — and some chats
// left for the idle reaper (SANDBOX_IDLE_TTL=1m) to take their sandbox.
//
// Sampled at the start (after a warm-up), the middle and the end: tusko's RSS
// and open descriptors, sandboxd's RSS and descriptors, live sandboxes,
// sandbox cgroups, Postgres connections. After the last phase every chat is
// deleted and the reaper waited for: then no sandbox, cgroup, mount or
// sandbox process may be left. Targets: tusko's RSS and descriptors at the end
// within 10 % of the middle; zero errors; nothing left.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

import { api, runProgram, sleep, sse, startCluster, startProgram, stopAll } from '../../tests/lib/harness.mjs';
import { startModelServer } from '../../tests/model-server/server.mjs';
import { KEY, cgroupsOf, hostMounts, startSandboxd } from '../../tests/integration/sandboxd/sbx.mjs';

const MINUTES = Number(process.env.SOAK_MINUTES || 15);
const USERS = Number(process.env.SOAK_USERS || 6);
const DURATION = MINUTES * 60000;
const POOL = 2; // sandboxd's warm pool, as make run has it

const call = (name, args) => ({ steps: [{ tool_calls: [{ name, arguments: args }] }, { text: 'done: {{tool_result}}' }] });
const SCENARIOS = {
  'soak-talk': { steps: [{ text: Array.from({ length: 12 }, (_, i) => `word${i}`).join(' '), chunk_delay_ms: 30 }] },
  'soak-write': call('write_file', { path: 'out/data.csv', content: 'a,b\n1,2\n3,4\n' }),
  'soak-run': call('execute_command', { command: 'wc -l out/data.csv && ls -la out' }),
  'soak-code': call('execute_code', { code: 'sum(range(1000))' }),
};

const seenIds = new Set(); // every sandbox id the run has seen listed
const stats = { turns: 0, sandboxTurns: 0, downloads: 0, resumes: 0, chats: 0, deleted: 0, errors: [] };
const fail = (what, detail) => {
  stats.errors.push(`${what}: ${String(detail).slice(0, 300)}`);
};

function procInfo(pid) {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const rss = Number(/VmRSS:\s+(\d+)/.exec(status)[1]) * 1024;
  const fds = fs.readdirSync(`/proc/${pid}/fd`).length;
  const threads = Number(/Threads:\s+(\d+)/.exec(status)[1]);
  return { rss, fds, threads };
}

// the cgroups of the sandboxes the run made (each sandbox has one a controller)
function sandboxCgroups() {
  let n = 0;
  for (const id of seenIds) n += cgroupsOf(id).length;
  return n;
}

// tusko-execd processes under our sandboxd (its sandboxes' and the warm pool's)
function execdUnder(rootPid) {
  const parent = new Map();
  const execd = [];
  for (const p of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(p)) continue;
    try {
      const st = fs.readFileSync(`/proc/${p}/stat`, 'utf8');
      parent.set(Number(p), Number(st.slice(st.lastIndexOf(')') + 2).split(' ')[1]));
      if (fs.readFileSync(`/proc/${p}/cmdline`, 'utf8').includes('tusko-execd')) execd.push(Number(p));
    } catch {
      /* gone */
    }
  }
  return execd.filter((p) => {
    for (let q = parent.get(p), n = 0; q && n < 64; q = parent.get(q), n++) if (q === rootPid) return true;
    return false;
  }).length;
}

async function user(ctx, i, deadline) {
  const email = `soak${i}-${process.pid}@example.test`;
  const add = runProgram('tusko', ['user', 'add', '--email', email, '--password-stdin'], { env: { DATABASE_URL: ctx.db }, input: 'correct horse battery\n' });
  if (add.code !== 0) throw new Error(`user add: ${add.stderr}`);
  const tok = runProgram('tusko', ['token', 'create', '--email', email], { env: { DATABASE_URL: ctx.db } });
  const auth = { authorization: `Bearer ${tok.stdout.trim()}` };
  const base = ctx.base;
  let round = 0;
  while (Date.now() < deadline) {
    round++;
    const mk = await api(base, '/api/sessions', { json: {}, headers: auth });
    if (mk.status !== 201) {
      fail('create chat', `${mk.status} ${mk.text}`);
      await sleep(1000);
      continue;
    }
    stats.chats++;
    const sid = mk.json.id;
    // a follower that drops its stream now and then and resumes where it was
    let lastId = 0;
    let following = true;
    const follower = (async () => {
      while (following) {
        const ac = new AbortController();
        const drop = setTimeout(() => ac.abort(), 2000 + Math.random() * 4000);
        const r = await sse(base, `/api/sessions/${sid}/events?after=${lastId}`, {
          headers: auth,
          timeoutMs: 60000,
          signal: ac.signal,
          until: (ev) => {
            if (ev.id) {
              const n = Number(ev.id);
              if (n <= lastId) fail('stream', `event ${n} again after ${lastId}`);
              lastId = n;
            }
            return !following;
          },
        }).catch((e) => ({ error: e }));
        clearTimeout(drop);
        if (r.error) fail('stream', r.error.message);
        else if (r.status && r.status !== 200 && following) fail('stream', `status ${r.status}`);
        stats.resumes++;
        await sleep(50);
      }
    })();
    const plan = ['soak-talk', 'soak-write', 'soak-talk', 'soak-run', 'soak-code', 'soak-talk'];
    const n = 2 + Math.floor(Math.random() * plan.length - 1);
    for (let k = 0; k < n && Date.now() < deadline; k++) {
      const sc = plan[k % plan.length];
      const p = await api(base, `/api/sessions/${sid}/messages`, { json: { content: `#scenario:${sc} ${round}.${k}` }, headers: auth });
      if (p.status !== 202) {
        fail('post', `${p.status} ${p.text}`);
        break;
      }
      // the turn's end, from the stored stream
      let end = null;
      for (let w = 0; w < 600 && !end; w++) {
        await sleep(100);
        const t = await api(base, `/api/turns/${p.json.turn_id}/trace`, { headers: auth });
        if (t.status === 200 && t.json && ['done', 'failed', 'cancelled'].includes(t.json.state || (t.json.turn && t.json.turn.state)))
          end = t.json.state || t.json.turn.state;
      }
      if (end !== 'done') fail('turn', `${sc}: ${end || 'did not end in 60 s'}`);
      stats.turns++;
      if (sc !== 'soak-talk') stats.sandboxTurns++;
      if (sc === 'soak-run') {
        const d = await api(base, `/api/sessions/${sid}/files/download`, { json: { path: '/workspace/out/data.csv' }, headers: auth });
        if (d.status !== 200 && d.status !== 201) fail('download', `${d.status} ${d.text}`);
        else {
          const url = d.json && (d.json.url || (d.json.id && `/api/downloads/${d.json.id}`));
          const g = url ? await fetch(base + url, { headers: auth }) : null;
          const body = g ? await g.text() : '';
          if (!g || g.status !== 200 || body !== 'a,b\n1,2\n3,4\n') fail('download', `${g && g.status} ${body.slice(0, 80)}`);
          else stats.downloads++;
        }
      }
    }
    following = false;
    await follower;
    // most chats are deleted (their sandbox released); some are left to the reaper
    if (Math.random() < 0.7) {
      const del = await api(base, `/api/sessions/${sid}`, { method: 'DELETE', headers: auth });
      if (del.status !== 204 && del.status !== 200) fail('delete', `${del.status} ${del.text}`);
      else stats.deleted++;
    } else {
      ctx.kept.push({ sid, auth });
    }
  }
}

async function liveSandboxes(sbx) {
  const r = await sbx.api.list('?pageSize=200');
  if (r.status !== 200) return -1;
  for (const s of r.json.items) seenIds.add(s.id);
  return r.json.items.filter((s) => !['Terminated', 'Failed'].includes(s.status.state)).length;
}

function pgConnections(cluster) {
  const r = spawnSync('/usr/lib/postgresql/15/bin/psql', ['-X', '-A', '-t', cluster.url, '-c', "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'"], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`psql: ${r.stderr}`);
  return Number(r.stdout.trim()) - 1; // without this psql
}

async function sample(ctx, label) {
  const t = procInfo(ctx.tusko.proc.pid);
  const s = procInfo(ctx.sbx.proc.pid);
  return {
    label,
    at: Math.round((Date.now() - ctx.t0) / 1000),
    tuskoRss: t.rss,
    tuskoFds: t.fds,
    tuskoThreads: t.threads,
    sbxRss: s.rss,
    sbxFds: s.fds,
    sandboxes: await liveSandboxes(ctx.sbx),
    cgroups: sandboxCgroups(),
    execd: execdUnder(ctx.sbx.proc.pid),
    pg: pgConnections(ctx.cluster),
    turns: stats.turns,
  };
}

const mib = (b) => (b / 1048576).toFixed(1);

async function main() {
  const cluster = await startCluster();
  const db = cluster.db('soak');
  const ms = await startModelServer({ scenarios: SCENARIOS, record: false });
  const sbx = await startSandboxd({ env: { SANDBOX_WARM_POOL_SIZE: String(POOL) } });
  const tusko = await startProgram('tusko', {
    env: {
      DATABASE_URL: db,
      TUSKO_LISTEN: '127.0.0.1:0',
      TUSKO_MODELS: 'openai:gpt-4o-mini',
      OPENAI_BASE_URL: `${ms.url}/v1`,
      OPENAI_API_KEY: 'sk-soak',
      CHAT_RATE_LIMIT_MAX: '100000',
      API_TOKEN_RATE_LIMIT: '100000',
      OPENSANDBOX_URL: sbx.url,
      OPENSANDBOX_API_KEY: KEY,
      MAX_SANDBOXES_PER_USER: '10',
      SANDBOX_IDLE_TTL: '1m',
    },
  });
  const ctx = { cluster, db, sbx, tusko, base: tusko.url, t0: Date.now(), kept: [] };
  const end = Date.now() + DURATION;
  const workers = Array.from({ length: USERS }, (_, i) => user(ctx, i, end).catch((e) => fail('user', e.stack || e.message)));
  // every sandbox the run makes, seen by polling the list (for the leftover check)
  const poll = setInterval(() => liveSandboxes(sbx).catch(() => {}), 2000);
  const samples = [];
  const warm = Math.min(60000, DURATION / 6);
  await sleep(warm);
  samples.push(await sample(ctx, 'start'));
  await sleep(Math.max(0, ctx.t0 + warm + (DURATION - warm) / 2 - Date.now()));
  samples.push(await sample(ctx, 'middle'));
  await Promise.all(workers);
  samples.push(await sample(ctx, 'end'));
  // every chat deleted, then the reaper and the releases waited for
  for (const k of ctx.kept) {
    const del = await api(ctx.base, `/api/sessions/${k.sid}`, { method: 'DELETE', headers: k.auth });
    if (del.status !== 204 && del.status !== 200) fail('delete', `${del.status}`);
  }
  clearInterval(poll);
  let after = null;
  for (let i = 0; i < 120; i++) {
    const live = await liveSandboxes(sbx);
    let cgroups = 0, mounts = 0, dirs = 0;
    const mountinfo = hostMounts();
    for (const id of seenIds) {
      cgroups += cgroupsOf(id).length;
      mounts += mountinfo.filter((l) => l.includes(id)).length;
      dirs += fs.existsSync(path.join(sbx.stateDir, 'sandboxes', id)) ? 1 : 0;
    }
    after = { live, cgroups, mounts, dirs, execd: execdUnder(sbx.proc.pid) };
    if (live === 0 && cgroups === 0 && mounts === 0 && dirs === 0 && after.execd <= POOL) break;
    await sleep(1000);
  }
  const mid = samples[1];
  const last = samples[2];
  const within = (a, b) => Math.abs(a - b) <= 0.1 * b;
  console.log(`bench/soak: ${MINUTES} min, ${USERS} users; tusko ${path.relative(process.cwd(), tusko.proc.spawnargs[0])}; Postgres durable (its defaults)`);
  console.log(`work done: ${stats.turns} turns (${stats.sandboxTurns} in a sandbox), ${stats.downloads} downloads, ${stats.chats} chats (${stats.deleted} deleted at once, ${ctx.kept.length} left to the reaper, then deleted), ${stats.resumes} streams dropped and resumed`);
  console.log('');
  console.log('| sample | at (s) | turns so far | tusko RSS (MiB) | tusko fds | tusko threads | sandboxd RSS (MiB) | sandboxd fds | live sandboxes | their cgroups | tusko-execd processes | Postgres connections |');
  console.log('|---|---|---|---|---|---|---|---|---|---|---|---|');
  for (const s of samples)
    console.log(`| ${s.label} | ${s.at} | ${s.turns} | ${mib(s.tuskoRss)} | ${s.tuskoFds} | ${s.tuskoThreads} | ${mib(s.sbxRss)} | ${s.sbxFds} | ${s.sandboxes} | ${s.cgroups} | ${s.execd} | ${s.pg} |`);
  console.log('');
  console.log(`after the last chat was deleted, of the ${seenIds.size} sandboxes the run made: live ${after.live}, cgroups ${after.cgroups}, mounts ${after.mounts}, state folders ${after.dirs}; tusko-execd processes under sandboxd ${after.execd} (the warm pool holds ${POOL})`);
  const checks = [
    [`tusko RSS at the end within 10 % of the middle (${mib(last.tuskoRss)} vs ${mib(mid.tuskoRss)} MiB)`, within(last.tuskoRss, mid.tuskoRss)],
    [`tusko descriptors at the end within 10 % of the middle (${last.tuskoFds} vs ${mid.tuskoFds})`, within(last.tuskoFds, mid.tuskoFds)],
    [`zero errors (${stats.errors.length})`, stats.errors.length === 0],
    ['no sandbox, cgroup, mount or state folder left', after.live === 0 && after.cgroups === 0 && after.mounts === 0 && after.dirs === 0],
    [`no sandbox process left but the warm pool's (${after.execd} <= ${POOL})`, after.execd <= POOL],
  ];
  for (const [what, ok] of checks) console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
  for (const e of stats.errors.slice(0, 20)) console.log(`  error: ${e}`);
  for (const s of (await sbx.api.list('?pageSize=200')).json.items || []) await sbx.api.del(s.id);
  await ms.close();
  await stopAll();
  process.exit(checks.every(([, ok]) => ok) ? 0 : 1);
}

main().catch(async (e) => {
  console.error(e.stack || e.message);
  await stopAll().catch(() => {});
  process.exit(1);
});
