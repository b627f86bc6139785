// Crashes in the middle of a burst of turns, then a restart: kill -9 of
// Postgres (every process of its cluster, a durable one of the test's own) and
// kill -9 of tusko (a new instance on the same database and port). Checked
// afterwards: every message whose POST was answered 2xx is stored, every turn
// so acknowledged ended (done, or failed with a code and a message — none left
// queued or running), and clients that followed the chats' event streams and
// reconnected with Last-Event-ID (as EventSource does) saw exactly the stored
// stream: no event missing, none twice. And kill -9 of tusko-sandboxd while a
// turn's command runs in a real sandbox: after its restart the sandbox is the
// chat's still (its files there, the same sandbox at the service), the turn
// ended, and deleting the chat leaves nothing of the sandbox on the host.
//
// What this covers and what it does not: a kill -9 takes Postgres down without
// a checkpoint or a shutdown, so the restart goes through its crash recovery
// (replay of the WAL). It does not take the machine down: what Postgres wrote
// is in the kernel's page cache, so this does not show that fsync reaches the
// disk — a real power cut cannot be simulated here (docs/OPERATIONS.md).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { freePort, sleep, sse, startCluster, startProgram, stopAll, tmpdir } from '../../lib/harness.mjs';
import { GONE, KEY, footprint, initPid, pidns, removeStateDir, startSandboxd } from '../sandboxd/sbx.mjs';
import { api, events, makeUser, messages, newSession, post, startModels, turn, tuskoEnv, until, untilTurnEnd } from './lib.mjs';

const tool = (name, args) => ({ steps: [{ tool_calls: [{ name, arguments: args }] }, { text: 'done: {{tool_result}}' }] });
const SCENARIOS = {
  burst: { steps: [{ text: Array.from({ length: 16 }, (_, i) => `b${i}`).join(' '), chunk_delay_ms: 60 }] },
  'sbx-write': tool('write_file', { path: 'out/kept.md', content: 'written before the crash\n' }),
  'sbx-slow': tool('execute_command', { command: 'sleep 4; echo late > out/late.txt; echo finished' }),
  'sbx-read': tool('execute_command', { command: 'cat out/kept.md out/late.txt' }),
};

// Follows a chat's event stream like a browser: on a dropped or failed
// connection it reconnects with Last-Event-ID (the last id it saw). drop()
// ends the current connection (a network blip); stop() ends it for good.
function follower(base, user, sid) {
  const seen = [];
  let lastId = null;
  let ac = null;
  let stopped = false;
  let reconnects = 0;
  const loop = (async () => {
    while (!stopped) {
      ac = new AbortController();
      const headers = { ...user.auth };
      if (lastId !== null) headers['last-event-id'] = lastId;
      try {
        await sse(base, `/api/sessions/${sid}/events${lastId === null ? '?after=0' : ''}`, {
          headers,
          timeoutMs: 120000,
          signal: ac.signal,
          until: (e) => {
            if (e.event !== 'history' && e.id !== undefined) {
              seen.push({ id: e.id, event: e.event, data: e.data });
              lastId = e.id;
            }
            return stopped;
          },
        });
      } catch {
        /* refused or reset while the database is down: try again */
      }
      if (!stopped) {
        reconnects++;
        await sleep(200);
      }
    }
  })();
  return {
    seen,
    reconnects: () => reconnects,
    drop: () => ac && ac.abort(),
    async stop() {
      stopped = true;
      if (ac) ac.abort();
      await loop;
    },
  };
}

// The state of a turn as the API tells it (null while it cannot answer).
async function turnState(base, user, turnId) {
  try {
    const r = await api(base, `/api/turns/${turnId}/trace`, { headers: user.auth });
    return r.status === 200 ? r.json.turn : null;
  } catch {
    return null;
  }
}

// One chat's part of the burst: messages one after another (each waits for
// its turn to end, or for a time-out while the database is down) until
// stop(); every POST answered 2xx is recorded with its turn.
function chatter(base, user, sid, tag) {
  const acked = [];
  const refused = [];
  let stopped = false;
  let n = 0;
  const loop = (async () => {
    while (!stopped) {
      const content = `${tag} message ${++n} #scenario:burst`;
      let r;
      try {
        r = await api(base, `/api/sessions/${sid}/messages`, { json: { content }, headers: user.auth, signal: AbortSignal.timeout(10000) });
      } catch (e) {
        refused.push({ content, error: String(e) });
        await sleep(200);
        continue;
      }
      if (r.status < 200 || r.status > 299) {
        refused.push({ content, status: r.status, body: r.text });
        await sleep(200);
        continue;
      }
      acked.push({ content, turnId: r.json.turn_id, status: r.status });
      const deadline = Date.now() + 8000;
      while (!stopped && Date.now() < deadline) {
        const t = await turnState(base, user, r.json.turn_id);
        if (t && (t.state === 'done' || t.state === 'failed' || t.state === 'cancelled')) break;
        await sleep(100);
      }
    }
  })();
  return {
    acked,
    refused,
    async stop() {
      stopped = true;
      await loop;
    },
  };
}

describe('crash in the middle of a burst of turns', () => {
  let ms;
  let sbxNow = null; // the sandbox service running, whose sandboxes go even when a test fails
  before(async () => {
    ms = await startModels({ scenarios: SCENARIOS });
  });
  after(async () => {
    if (sbxNow && !sbxNow.exited()) for (const s of (await sbxNow.api.list('?pageSize=200')).json.items || []) await sbxNow.api.del(s.id);
    await stopAll();
    await ms.close();
  });

  // n users, one chat each
  const burstUsers = (pg, tag, n = 4) => Array.from({ length: n }, (_, i) => ({ u: makeUser(pg, `crash-${tag}-${i}-${process.pid}@example.test`) }));
  // each chat with a follower and a chatter on base, until turns run in all
  async function startBurst(base, chats) {
    for (const [i, x] of chats.entries()) {
      x.sid = await newSession(base, x.u);
      x.f = follower(base, x.u, x.sid);
      x.w = chatter(base, x.u, x.sid, `c${i}`);
    }
    await until(() => chats.every((x) => x.w.acked.length >= 2), { timeoutMs: 30000, what: 'two turns in every chat' });
    await until(() => chats.every((x) => x.f.seen.some((e) => e.event === 'text' && e.data.includes(x.w.acked.at(-1).turnId))), {
      timeoutMs: 10000,
      what: 'text of the running turns on every stream',
    });
  }
  // after the restart, the burst goes on until every chat has two more turns done
  async function untilTwoMoreDone(base, chats, ackedAtCrash) {
    await until(
      async () => {
        for (const [i, x] of chats.entries()) {
          const later = x.w.acked.slice(ackedAtCrash[i] + 1);
          let done = 0;
          for (const a of later) if ((await turnState(base, x.u, a.turnId))?.state === 'done') done++;
          if (done < 2) return false;
        }
        return true;
      },
      { timeoutMs: 90000, stepMs: 300, what: 'two turns done in every chat after the restart' },
    );
    for (const x of chats) await x.w.stop();
  }
  // every acknowledged turn ended, the failed ones with a reason; every
  // acknowledged message stored once; each followed stream is the stored one
  async function checkAfterCrash(tc, base, chats) {
    const all = chats.flatMap((x) => x.w.acked.map((a) => ({ ...a, x })));
    const states = {};
    await until(
      async () => {
        for (const a of all) states[a.turnId] = await turnState(base, a.x.u, a.turnId);
        return all.every((a) => states[a.turnId] && ['done', 'failed', 'cancelled'].includes(states[a.turnId].state));
      },
      { timeoutMs: 60000, stepMs: 300, what: `every acknowledged turn to end: ${JSON.stringify(Object.values(states).map((s) => s && s.state))}` },
    );
    const failed = all.filter((a) => states[a.turnId].state !== 'done');
    for (const a of failed) {
      const s = states[a.turnId];
      assert.equal(s.state, 'failed', JSON.stringify(s));
      assert.ok(s.error_code && s.error, `a failed turn says why: ${JSON.stringify(s)}`);
    }
    assert.ok(failed.length >= 1, 'turns were running at the crash');

    // let the followers see the last turn_end, then compare with what is stored
    await sleep(1500);
    for (const x of chats) await x.f.stop();
    for (const x of chats) {
      const stored = await events(base, x.u, x.sid);
      const storedEv = stored.filter((e) => e.event !== 'history').map((e) => ({ id: e.id, event: e.event, data: e.data }));
      const ids = x.f.seen.map((e) => e.id);
      assert.equal(new Set(ids).size, ids.length, 'no event twice on the followed stream');
      assert.deepEqual(x.f.seen, storedEv, 'the followed stream is the stored one: nothing missing, nothing extra');
      assert.ok(x.f.reconnects() >= 1);
      // every acknowledged message is there, once, and every turn ended once
      const msgs = (await messages(base, x.u, x.sid)).filter((m) => m.role === 'user').map((m) => m.content);
      for (const a of x.w.acked) assert.equal(msgs.filter((m) => m === a.content).length, 1, `message "${a.content}" stored once`);
      for (const a of x.w.acked) {
        const ends = storedEv.filter((e) => e.event === 'turn_end' && JSON.parse(e.data).turn_id === a.turnId);
        assert.equal(ends.length, 1, `one turn_end for ${a.turnId}`);
        assert.equal(JSON.parse(ends[0].data).state, states[a.turnId].state);
      }
    }
    const evs = chats.reduce((n, x) => n + x.f.seen.length, 0);
    const refused = chats.reduce((n, x) => n + x.w.refused.length, 0);
    const codes = [...new Set(failed.map((a) => states[a.turnId].error_code))];
    tc.diagnostic(`${all.length} turns acknowledged (${failed.length} failed: ${codes.join(',')}), ${refused} posts refused while down, ${evs} events followed`);
    return { failed, states, codes };
  }

  test('kill -9 of Postgres, restart: acknowledged messages stored, turns ended, streams resume without gap or duplicate', async (tc) => {
    const c = await startCluster();
    assert.equal(c.mode(), 'durable');
    const pg = { url: c.db('crash_pg') };
    const t = await startProgram('tusko', { env: tuskoEnv(pg, ms) });
    const base = t.url;
    const chats = burstUsers(pg, 'pg');
    await startBurst(base, chats);
    // Postgres dies in the middle of turns
    const pids = await c.kill9();
    assert.ok(pids.length >= 3, `killed ${pids.length} processes`);
    const ackedAtKill = chats.map((x) => x.w.acked.length);
    // a client's connection drops while the database is down: it reconnects
    await sleep(500);
    for (const x of chats) x.f.drop();
    await sleep(1000);
    c.start();
    await untilTwoMoreDone(base, chats, ackedAtKill);
    await checkAfterCrash(tc, base, chats);
    await t.stop();
  });

  test('kill -9 of tusko, a new instance: acknowledged messages stored, the interrupted turns failed, streams resume', async (tc) => {
    const c = await startCluster();
    const pg = { url: c.db('crash_tusko') };
    // the new instance listens where the old one did, as a restarted service would
    const env = tuskoEnv(pg, ms, { TUSKO_LISTEN: `127.0.0.1:${await freePort()}` });
    const t1 = await startProgram('tusko', { env });
    const base = t1.url;
    const chats = burstUsers(pg, 'tusko');
    await startBurst(base, chats);
    await t1.kill9();
    const ackedAtKill = chats.map((x) => x.w.acked.length);
    await sleep(300);
    const t2 = await startProgram('tusko', { env });
    assert.equal(t2.url, base);
    await untilTwoMoreDone(base, chats, ackedAtKill);
    const { codes } = await checkAfterCrash(tc, base, chats);
    // the turns the killed instance was running: failed by the new one
    assert.deepEqual(codes, ['INTERRUPTED']);
    await t2.stop();
  });

  test('kill -9 of tusko-sandboxd while a command runs: the sandbox is neither lost nor leaked', async (tc) => {
    const stateDir = tmpdir('sbxd-crash-');
    const listen = `127.0.0.1:${await freePort()}`;
    const sbxEnv = { SANDBOX_WARM_POOL_SIZE: '0', SANDBOXD_LISTEN: listen };
    const s1 = await startSandboxd({ stateDir, env: sbxEnv });
    sbxNow = s1;
    const c = await startCluster();
    const pg = { url: c.db('crash_sbx') };
    const t = await startProgram('tusko', { env: tuskoEnv(pg, ms, { OPENSANDBOX_URL: s1.url, OPENSANDBOX_API_KEY: KEY }) });
    const base = t.url;
    const u = makeUser(pg, `crash-sbx-${process.pid}@example.test`);
    const sid = await newSession(base, u);
    assert.equal((await turn(base, u, sid, 'write it #scenario:sbx-write')).end.state, 'done');
    const before = (await api(base, '/api/sandboxes', { headers: u.auth })).json.sandboxes;
    assert.equal(before.length, 1);
    const remote = before[0].remote_id;
    const ns = pidns(initPid(stateDir, remote));
    assert.ok(ns, 'the sandbox runs');

    // the service dies while the turn's command runs in the sandbox
    const p = await post(base, u, sid, 'take your time #scenario:sbx-slow');
    assert.equal(p.status, 202, p.text);
    await sse(base, `/api/sessions/${sid}/events`, {
      headers: u.auth,
      timeoutMs: 20000,
      until: (e) => e.event === 'tool_start' && e.json.turn_id === p.json.turn_id,
    });
    const started = Date.now();
    await sleep(700);
    await s1.kill9();
    await sleep(1000);
    const s2 = await startSandboxd({ stateDir, env: sbxEnv });
    sbxNow = s2;
    assert.equal(s2.url, s1.url);
    // the turn ends: done with the tool's error as its result, or failed with a reason
    const slow = await untilTurnEnd(base, u, sid, p.json.turn_id, { timeoutMs: 60000 });
    const end = slow.at(-1).json;
    assert.ok(end.state === 'done' || (end.state === 'failed' && end.error_code), JSON.stringify(end));
    tc.diagnostic(`the turn whose command lost its service: ${end.state}; the tool said ${JSON.stringify(slow.find((e) => e.event === 'tool_end')?.json.result)}`);
    // the command itself runs on in the sandbox (execd is inside it): its
    // session is busy until it ends
    await sleep(Math.max(0, started + 5000 - Date.now()));

    // not lost: the same sandbox, at the service and for the chat, with its files
    assert.equal((await s2.api.get(remote)).json.status.state, 'Running');
    const read = await turn(base, u, sid, 'read it back #scenario:sbx-read');
    assert.equal(read.end.state, 'done');
    const out = read.events.filter((e) => e.event === 'tool_end').map((e) => e.data).join('');
    assert.ok(out.includes('written before the crash'), out);
    assert.ok(out.includes('late'), `the command that lost its service ran to its end in the sandbox: ${out}`);
    const now = (await api(base, '/api/sandboxes', { headers: u.auth })).json.sandboxes;
    assert.deepEqual(now.map((x) => x.remote_id), [remote], 'the chat has the one sandbox it had');
    assert.deepEqual((await s2.api.list('?pageSize=200')).json.items.map((x) => x.id), [remote], 'the service has no other');

    // not leaked: deleting the chat leaves nothing of it on the host
    assert.equal((await api(base, `/api/sessions/${sid}`, { method: 'DELETE', headers: u.auth })).status, 204);
    await until(() => JSON.stringify(footprint(stateDir, remote, ns)) === JSON.stringify(GONE), {
      timeoutMs: 20000,
      what: `nothing of the sandbox left: ${JSON.stringify(footprint(stateDir, remote, ns))}`,
    });
    assert.deepEqual((await s2.api.list('?pageSize=200')).json.items, []);
    await t.stop();
    await s2.stop();
    removeStateDir(stateDir);
  });
});
