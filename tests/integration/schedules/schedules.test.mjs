// Scheduled tasks end to end, against a real Postgres and the scripted model:
// the API's checks and fire times (checked against Intl's zone data, not our
// own), a schedule due every minute firing into a chat of its own, run now,
// pause and resume, overlap, downtime with skip and run_once, the time budget,
// the agent's tools, and two tusko instances on one database running each slot
// exactly once.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, describe, test } from 'node:test';

import { startPostgres, startProgram, stopAll } from '../../lib/harness.mjs';
import { api, makeUser, messages, newSession, startModels, tuskoEnv, turn, until } from '../agent/lib.mjs';

const SCENARIOS = {
  slow: { steps: [{ text: Array.from({ length: 30 }, (_, i) => `s${i}`).join(' '), chunk_delay_ms: 300 }] },
  hang: { steps: [{ text: Array.from({ length: 100 }, (_, i) => `h${i}`).join(' '), chunk_delay_ms: 500 }] },
  'make-schedule': {
    steps: [
      {
        tool_calls: [
          { name: 'schedule_task', arguments: { prompt: 'water the plants #scenario:text', cron: '0 9 * * mon-fri', timezone: 'Europe/Berlin', name: 'plants' } },
          { name: 'schedule_task', arguments: { prompt: 'too often', cron: '* * * * *' } },
          { name: 'list_schedules', arguments: {} },
        ],
      },
      { text: 'Done: {{tool_result}}' },
    ],
  },
};

const sched = (base, user, path = '', opts = {}) => api(base, `/api/schedules${path}`, { headers: user.auth, ...opts });

async function runsOf(base, user, id, q = '') {
  const r = await sched(base, user, `/${id}/runs${q}`);
  assert.equal(r.status, 200, r.text);
  return r.json.runs;
}

// The wall-clock time of a UTC instant in a zone, by Intl (ICU's zone data).
function intlLocal(utc, zone) {
  const f = new Intl.DateTimeFormat('en-CA', { timeZone: zone, hourCycle: 'h23', year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit', weekday: 'short' });
  const p = Object.fromEntries(f.formatToParts(new Date(utc)).map((x) => [x.type, x.value]));
  return { text: `${p.year}-${p.month}-${p.day}T${p.hour}:${p.minute}:${p.second}`, weekday: p.weekday, hour: p.hour, minute: p.minute };
}

describe('schedules', () => {
  let ms, pg, tusko, base, env, alice, bob;

  before(async () => {
    ms = await startModels({ scenarios: SCENARIOS });
    pg = await startPostgres('schedules');
    env = tuskoEnv(pg, ms, { SCHEDULE_MIN_INTERVAL: '1m', SCHEDULES_PER_USER_MAX: '8', SCHEDULE_CATCHUP_GRACE: '15m' });
    tusko = await startProgram('tusko', { env });
    base = tusko.url;
    alice = makeUser(pg);
    bob = makeUser(pg);
  });
  after(async () => {
    await stopAll();
    await ms.close();
  });

  test('create checks every field and shows the next five fire times in UTC and in the zone', async () => {
    const bad = [
      [{ prompt: 'x', cron: '0 24 * * *' }, /^cron: hour: 24 is out of range 0-23/],
      [{ prompt: 'x', cron: '0 0 30 2 *' }, /^cron: day-of-month: the expression never fires/],
      [{ prompt: 'x', cron: '@reboot' }, /^cron: expression: @reboot is not supported/],
      [{ prompt: 'x', cron: '0 0 * * *', timezone: 'Mars/Olympus' }, /^timezone: /],
      [{ prompt: 'x', cron: '0 0 * * *', timezone: '../etc/passwd' }, /^timezone: /],
      [{ prompt: '', cron: '0 0 * * *' }, /^prompt: /],
      [{ prompt: 'x', cron: '0 0 * * *', notify: 'sometimes' }, /^notify: /],
      [{ prompt: 'x', cron: '0 0 * * *', missed_policy: 'all' }, /^missed_policy: /],
      [{ prompt: 'x', cron: '2020-01-01T00:00:00Z' }, /^cron: the time is in the past/],
      [{ prompt: 'x', cron: 5 }, /^cron: a string is required/],
    ];
    for (const [body, re] of bad) {
      const r = await sched(base, alice, '', { json: body });
      assert.equal(r.status, 400, `${JSON.stringify(body)}: ${r.text}`);
      assert.equal(r.json.code, 'INVALID_SCHEDULE');
      assert.match(r.json.message, re, JSON.stringify(body));
    }
    // the preview: the same checks, nothing stored
    const pv = await sched(base, alice, `/preview?cron=${encodeURIComponent('*/30 9-10 * * *')}&timezone=Asia/Kolkata`);
    assert.equal(pv.status, 200, pv.text);
    assert.equal(pv.json.next_fires.length, 5);
    for (const f of pv.json.next_fires) {
      assert.match(f.local, /T(09|10):(00|30):00\+05:30$/);
      assert.equal(Date.parse(f.local), Date.parse(f.utc));
    }
    const pb = await sched(base, alice, `/preview?cron=${encodeURIComponent('0 24 * * *')}`);
    assert.equal(pb.status, 400);
    assert.match(pb.json.message, /^cron: hour: 24/);
    assert.deepEqual((await sched(base, alice)).json.schedules, []);
    const r = await sched(base, alice, '', { json: { name: 'standup', prompt: 'summarise #scenario:text', cron: '0 9 * * mon-fri', timezone: 'Europe/Berlin', paused: true } });
    assert.equal(r.status, 201, r.text);
    const s = r.json;
    assert.equal(s.timezone, 'Europe/Berlin');
    assert.equal(s.notify, 'failure');
    assert.equal(s.missed_policy, 'skip');
    assert.equal(s.next_fires.length, 5);
    let prev = Date.now();
    for (const f of s.next_fires) {
      const t = Date.parse(f.utc);
      assert.ok(t > prev, `${f.utc} after the previous one`);
      prev = t;
      assert.match(f.utc, /Z$/);
      const l = intlLocal(t, 'Europe/Berlin');
      assert.equal(f.local.slice(0, 19), l.text, `${f.utc} in Berlin`);
      assert.equal(`${l.hour}:${l.minute}`, '09:00');
      assert.ok(!['Sat', 'Sun'].includes(l.weekday), `${f.local} is a weekday`);
      // the offset the local time carries is the zone's at that instant
      assert.equal(Date.parse(f.local), t);
    }
    assert.equal(Date.parse(s.next_run_at), Date.parse(s.next_fires[0].utc));
    // another user sees nothing of it
    assert.equal((await sched(base, bob, `/${s.id}`)).status, 404);
    assert.equal((await sched(base, bob, `/${s.id}`, { method: 'DELETE' })).status, 404);
    assert.equal((await sched(base, bob, `/${s.id}/run`, { method: 'POST' })).status, 404);
    assert.deepEqual((await sched(base, bob)).json.schedules, []);
    const got = await sched(base, alice, `/${s.id}`);
    assert.equal(got.status, 200);
    assert.deepEqual(got.json.next_fires, s.next_fires);
    // a zone change moves the fire times: 09:00 in Kolkata
    const p = await sched(base, alice, `/${s.id}`, { method: 'PATCH', json: { timezone: 'Asia/Kolkata' } });
    assert.equal(p.status, 200, p.text);
    assert.match(p.json.next_fires[0].local, /T09:00:00\+05:30$/);
    assert.equal((await sched(base, alice, `/${s.id}`, { method: 'PATCH', json: { cron: '0 61 * * *' } })).status, 400);
    assert.equal((await sched(base, alice, `/${s.id}`, { method: 'PATCH', json: { colour: 'red' } })).status, 400);
    assert.equal((await sched(base, alice, `/${s.id}`, { method: 'DELETE' })).status, 204);
    assert.equal((await sched(base, alice, `/${s.id}`)).status, 404);
  });

  test('SCHEDULES_PER_USER_MAX: the ninth schedule is refused, a deleted one frees its place', async () => {
    const u = makeUser(pg);
    const ids = [];
    for (let i = 0; i < 8; i++) {
      const r = await sched(base, u, '', { json: { prompt: `p${i}`, cron: '0 3 * * *', paused: true } });
      assert.equal(r.status, 201, r.text);
      ids.push(r.json.id);
    }
    const r = await sched(base, u, '', { json: { prompt: 'p9', cron: '0 3 * * *' } });
    assert.equal(r.status, 409, r.text);
    assert.equal(r.json.code, 'SCHEDULE_LIMIT');
    assert.equal((await sched(base, u, `/${ids[0]}`, { method: 'DELETE' })).status, 204);
    assert.equal((await sched(base, u, '', { json: { prompt: 'p9', cron: '0 3 * * *' } })).status, 201);
    assert.equal((await sched(base, u)).json.schedules.length, 8);
  });

  test('a schedule due every minute fires into a chat of its own that holds the turn', async () => {
    const r = await sched(base, alice, '', { json: { name: 'minutely', prompt: 'report #scenario:text', cron: '* * * * *' } });
    assert.equal(r.status, 201, r.text);
    const s = r.json;
    const due = Date.parse(s.next_run_at);
    assert.equal(due % 60000, 0);
    assert.ok(due - Date.now() <= 60000);
    const runs = await until(async () => {
      const rs = await runsOf(base, alice, s.id);
      return rs.length && rs.every((x) => x.status === 'succeeded') ? rs : null;
    }, { timeoutMs: 90000, stepMs: 500, what: 'the first run' });
    // pause it so that the next minute does not add to what is checked
    assert.equal((await sched(base, alice, `/${s.id}`, { method: 'PATCH', json: { paused: true } })).status, 200);
    const run = runs.at(-1);
    assert.equal(Date.parse(run.scheduled_for), due);
    assert.equal(run.trigger, 'schedule');
    assert.ok(Date.parse(run.started_at) >= due);
    assert.equal(run.summary, 'Hello! This is a scripted reply to 2 messages.');
    assert.equal(run.error, null);
    const msgs = await messages(base, alice, run.session_id);
    assert.deepEqual(msgs.map((m) => [m.role, m.content]), [
      ['user', 'report #scenario:text'],
      ['assistant', 'Hello! This is a scripted reply to 2 messages.'],
    ]);
    const chat = await api(base, `/api/sessions/${run.session_id}`, { headers: alice.auth });
    assert.equal(chat.json.origin, 'scheduled');
    assert.equal(chat.json.schedule_id, s.id);
    assert.match(chat.json.title, /^minutely · \d{4}-\d\d-\d\d \d\d:\d\d$/);
    // the user's own chats are origin 'user'
    const own = await newSession(base, alice);
    assert.equal((await api(base, `/api/sessions/${own}`, { headers: alice.auth })).json.origin, 'user');
    // next_run_at moved to a later minute
    const after = (await sched(base, alice, `/${s.id}`)).json;
    assert.ok(Date.parse(after.next_run_at) > due);
  });

  test('run now works while paused and leaves next_run_at; a second one while it runs is 409; resume never backfires', async () => {
    const r = await sched(base, alice, '', { json: { prompt: 'slowly #scenario:slow', cron: '*/5 * * * *', paused: true } });
    assert.equal(r.status, 201, r.text);
    const s = r.json;
    const rn = await sched(base, alice, `/${s.id}/run`, { method: 'POST' });
    assert.equal(rn.status, 202, rn.text);
    const again = await sched(base, alice, `/${s.id}/run`, { method: 'POST' });
    assert.equal(again.status, 409, again.text);
    assert.equal(again.json.code, 'RUN_IN_PROGRESS');
    assert.equal(again.json.run_id, rn.json.run_id);
    const done = await until(async () => {
      const rs = await runsOf(base, alice, s.id);
      return rs.length === 1 && rs[0].status === 'succeeded' ? rs[0] : null;
    }, { timeoutMs: 40000, stepMs: 300, what: 'the manual run' });
    assert.equal(done.id, rn.json.run_id);
    assert.equal(done.trigger, 'manual');
    const now = (await sched(base, alice, `/${s.id}`)).json;
    assert.equal(now.next_run_at, s.next_run_at);
    assert.equal(now.paused, true);
    // paused over its slot, then resumed: next_run_at is computed afresh from now
    pg.query(`UPDATE schedules SET next_run_at = now() - interval '20 minutes' WHERE id = '${s.id}'`);
    const res = await sched(base, alice, `/${s.id}`, { method: 'PATCH', json: { paused: false } });
    assert.equal(res.status, 200, res.text);
    assert.ok(Date.parse(res.json.next_run_at) > Date.now());
    await new Promise((ok) => setTimeout(ok, 1500));
    assert.equal((await runsOf(base, alice, s.id)).length, 1, 'resume fired nothing');
    await sched(base, alice, `/${s.id}`, { method: 'PATCH', json: { paused: true } });
  });

  test('a slot that comes while the previous run still goes is recorded skipped with the reason', async () => {
    const r = await sched(base, alice, '', { json: { prompt: 'long #scenario:slow', cron: '0 4 * * *' } });
    const s = r.json;
    const rn = await sched(base, alice, `/${s.id}/run`, { method: 'POST' });
    assert.equal(rn.status, 202);
    await until(async () => (await runsOf(base, alice, s.id)).some((x) => x.status === 'running'), { what: 'running' });
    // the slot arrives (as the clock would bring it) while that run goes
    pg.query(`UPDATE schedules SET next_run_at = date_trunc('minute', now()) WHERE id = '${s.id}'`);
    const skipped = await until(async () => (await runsOf(base, alice, s.id)).find((x) => x.status === 'skipped'), { what: 'skipped' });
    assert.equal(skipped.error, `the previous run ${rn.json.run_id} is still going`);
    assert.ok(Date.parse((await sched(base, alice, `/${s.id}`)).json.next_run_at) > Date.now());
    await until(async () => (await runsOf(base, alice, s.id)).find((x) => x.id === rn.json.run_id && x.status === 'succeeded'), { timeoutMs: 40000, what: 'the run' });
  });

  test('after downtime: skip records each missed slot; run_once runs the newest once within the grace', async () => {
    // three hourly schedules whose minute is away from now, so no slot is on time
    const nowMin = new Date().getUTCMinutes();
    const m5 = (nowMin + 55) % 60; // the newest past slot 5-6 minutes ago
    const m30 = (nowMin + 30) % 60; // ... 30-31 minutes ago (beyond the 15 min grace)
    const mk = async (cron, policy) => (await sched(base, alice, '', { json: { prompt: `catch up #scenario:text`, cron, missed_policy: policy } })).json;
    const skip = await mk(`${m5} * * * *`, 'skip');
    const once = await mk(`${m5} * * * *`, 'run_once');
    const stale = await mk(`${m30} * * * *`, 'run_once');
    await tusko.stop();
    // what five hours of downtime leave: next_run_at five slots back
    const back = (min) => {
      const t = new Date();
      t.setUTCSeconds(0, 0);
      t.setUTCMinutes(min);
      if (t.getTime() > Date.now()) t.setTime(t.getTime() - 3600e3);
      return new Date(t.getTime() - 4 * 3600e3);
    };
    pg.query(`UPDATE schedules SET next_run_at = '${back(m5).toISOString()}' WHERE id IN ('${skip.id}', '${once.id}')`);
    pg.query(`UPDATE schedules SET next_run_at = '${back(m30).toISOString()}' WHERE id = '${stale.id}'`);
    tusko = await startProgram('tusko', { env });
    base = tusko.url;
    const settled = async (id, n) =>
      until(async () => {
        const rs = await runsOf(base, alice, id);
        return rs.length === n && rs.every((x) => !['queued', 'running'].includes(x.status)) ? rs : null;
      }, { timeoutMs: 30000, stepMs: 300, what: `${n} runs of ${id}` });
    const rs = await settled(skip.id, 5);
    assert.deepEqual(rs.map((x) => x.status), ['missed', 'missed', 'missed', 'missed', 'missed']);
    assert.match(rs[0].error, /missed policy skip/);
    assert.deepEqual(rs.map((x) => Date.parse(x.scheduled_for)), [0, 1, 2, 3, 4].map((k) => back(m5).getTime() + (4 - k) * 3600e3));
    const ro = await settled(once.id, 5);
    assert.deepEqual(ro.map((x) => [x.status, x.trigger]), [['succeeded', 'catch_up'], ['missed', 'schedule'], ['missed', 'schedule'], ['missed', 'schedule'], ['missed', 'schedule']]);
    assert.ok(ro[0].session_id);
    const rst = await settled(stale.id, 5);
    assert.ok(rst.every((x) => x.status === 'missed'), JSON.stringify(rst.map((x) => x.status)));
    for (const s of [skip, once, stale]) {
      const g = (await sched(base, alice, `/${s.id}`)).json;
      assert.ok(Date.parse(g.next_run_at) > Date.now(), 'next_run_at is in the future');
    }
    // paging: two at a time, newest first, no overlap
    const p1 = await sched(base, alice, `/${skip.id}/runs?limit=2`);
    assert.equal(p1.json.runs.length, 2);
    assert.equal(p1.json.has_more, true);
    const p2 = await sched(base, alice, `/${skip.id}/runs?limit=2&before=${encodeURIComponent(p1.json.next_before)}`);
    const p3 = await sched(base, alice, `/${skip.id}/runs?limit=2&before=${encodeURIComponent(p2.json.next_before)}`);
    assert.equal(p3.json.has_more, false);
    assert.deepEqual([...p1.json.runs, ...p2.json.runs, ...p3.json.runs].map((x) => x.id), rs.map((x) => x.id));
    // deleted: gone from the list, its history still readable
    assert.equal((await sched(base, alice, `/${skip.id}`, { method: 'DELETE' })).status, 204);
    assert.ok(!(await sched(base, alice)).json.schedules.some((x) => x.id === skip.id));
    assert.equal((await runsOf(base, alice, skip.id)).length, 5);
    assert.equal((await sched(base, bob, `/${skip.id}/runs`)).status, 404);
  });

});

describe('schedules on two instances', () => {
  let ms, pg, a, b, user, admin;
  before(async () => {
    ms = await startModels({ scenarios: SCENARIOS });
    pg = await startPostgres('schedules2');
    const env = tuskoEnv(pg, ms, { SCHEDULE_RUN_TIMEOUT: '5s' });
    a = await startProgram('tusko', { env });
    b = await startProgram('tusko', { env });
    admin = makeUser(pg); // the first account is the admin
    user = makeUser(pg);
  });
  after(async () => {
    await stopAll();
    await ms.close();
  });

  test('each slot runs exactly once; the default shortest interval is 5 minutes (none for admins)', async () => {
    const tooOften = await sched(a.url, user, '', { json: { prompt: 'x', cron: '*/2 * * * *' } });
    assert.equal(tooOften.status, 400);
    assert.match(tooOften.json.message, /^cron: fires 120 s apart .*shortest interval allowed is 300 s/);
    const pv = await api(a.url, `/api/schedules/preview?cron=${encodeURIComponent('*/2 * * * *')}`, { headers: user.auth });
    assert.equal(pv.status, 400);
    const byAdmin = await sched(a.url, admin, '', { json: { prompt: 'x', cron: '*/2 * * * *', paused: true } });
    assert.equal(byAdmin.status, 201, byAdmin.text);
    assert.equal((await api(a.url, `/api/schedules/preview?cron=${encodeURIComponent('*/2 * * * *')}`, { headers: admin.auth })).status, 200);
    assert.equal((await api(a.url, `/api/schedules/${byAdmin.json.id}`, { method: 'DELETE', headers: admin.auth })).status, 204);
    const at = new Date(Math.ceil((Date.now() + 4000) / 1000) * 1000);
    const iso = at.toISOString().replace(/\.\d+Z$/, '+00:00');
    const ids = [];
    for (let i = 0; i < 8; i++) {
      const r = await sched(i % 2 ? a.url : b.url, user, '', { json: { prompt: `once ${i} #scenario:text`, cron: iso } });
      assert.equal(r.status, 201, r.text);
      assert.equal(r.json.next_fires.length, 1);
      ids.push(r.json.id);
    }
    for (const id of ids) {
      const rs = await until(async () => {
        const x = await runsOf(a.url, user, id);
        return x.length && x[0].status === 'succeeded' ? x : null;
      }, { timeoutMs: 30000, stepMs: 300, what: `the run of ${id}` });
      assert.equal(rs.length, 1);
      assert.equal(Date.parse(rs[0].scheduled_for), at.getTime());
      const turns = pg.rows(`SELECT count(*) FROM turns WHERE session_id = '${rs[0].session_id}'`);
      assert.equal(turns[0][0], '1');
      assert.equal((await sched(b.url, user, `/${id}`)).json.next_run_at, null);
    }
    // each schedule was claimed by one instance only (both logs together)
    const logs = fs.readFileSync(a.logPath, 'utf8') + fs.readFileSync(b.logPath, 'utf8');
    for (const id of ids) assert.equal(logs.split(`msg="schedule claimed" schedule=${id}`).length - 1, 1, id);
  });

  test('a run over SCHEDULE_RUN_TIMEOUT is timed_out and its turn cancelled', async () => {
    const r = await sched(a.url, user, '', { json: { prompt: 'forever #scenario:hang', cron: '0 5 * * *' } });
    const rn = await sched(b.url, user, `/${r.json.id}/run`, { method: 'POST' });
    assert.equal(rn.status, 202);
    const run = await until(async () => (await runsOf(a.url, user, r.json.id)).find((x) => x.status === 'timed_out'), { timeoutMs: 20000, stepMs: 300, what: 'timed_out' });
    assert.match(run.error, /SCHEDULE_RUN_TIMEOUT \(5s\)/);
    assert.ok(Date.parse(run.finished_at) - Date.parse(run.started_at) >= 5000);
    await until(() => pg.rows(`SELECT state FROM turns WHERE session_id = '${run.session_id}'`)[0][0] === 'cancelled', { what: 'the turn cancelled' });
    // the turn's end does not overwrite the status
    assert.equal((await runsOf(a.url, user, r.json.id))[0].status, 'timed_out');
  });

  test('the agent sets schedules up through its fast-lane tools, never over the shortest interval', async () => {
    const u = makeUser(pg);
    const sid = await newSession(a.url, u);
    const t = await turn(a.url, u, sid, 'remind me #scenario:make-schedule');
    assert.equal(t.end.state, 'done');
    const ends = t.events.filter((e) => e.event === 'tool_end');
    assert.deepEqual(ends.map((e) => [e.json.name, e.json.lane, e.json.ok]), [
      ['schedule_task', 'fast', true],
      ['schedule_task', 'fast', false],
      ['list_schedules', 'fast', true],
    ]);
    assert.match(ends[1].json.result, /not scheduled: cron: fires 60 s apart .*300 s/);
    const list = (await sched(a.url, u)).json.schedules;
    assert.equal(list.length, 1);
    assert.equal(list[0].name, 'plants');
    assert.equal(list[0].timezone, 'Europe/Berlin');
    assert.match(list[0].next_fires[0].local, /T09:00:00\+0[12]:00$/);
    // cancel_schedule, from a scenario naming the id
    ms.addScenario('cancel-it', { steps: [{ tool_calls: [{ name: 'cancel_schedule', arguments: { id: list[0].id } }] }, { text: 'ok' }] });
    const c = await turn(a.url, u, sid, 'stop it #scenario:cancel-it');
    const ce = c.events.find((e) => e.event === 'tool_end');
    assert.equal(ce.json.ok, true, ce.json.result);
    assert.deepEqual((await sched(a.url, u)).json.schedules, []);
    // the tools are not a subagent's
    const cat = (await api(a.url, '/api/agent', { headers: u.auth })).json;
    assert.ok(['schedule_task', 'list_schedules', 'cancel_schedule'].every((n) => cat.tools.some((x) => x.name === n && x.lane === 'fast')));
  });
});
