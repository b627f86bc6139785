// The upgrade from the previous release: v0.1.0, built from its commit
// (tests/lib/release.mjs, cached in tests/out/release/), runs on a fresh
// durable cluster and is filled through its own API — users with tokens,
// chats with plans and tool calls, a file written in a real sandbox and
// downloaded, memories and facts from the agent's tools and from the API,
// documents saved by the agent and uploaded. It is stopped and this build
// starts on the same database (its migrations run at start-up). Every table of
// the old schema keeps its rows; every read of the old API answers the same
// through the new one (a field may be added, none lost or changed); the old
// tokens sign in; chat goes on in an old chat, its event stream resuming from
// the old Last-Event-ID; search finds the old documents.
//
// Before that, a migration that fails: an event trigger (installed by the test
// as the cluster's superuser, nothing in tusko) raises at the second schema
// change of any transaction, so the first pending migration fails half-way.
// tusko exits naming it, and the schema and every row are as v0.1.0 left them.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { ROOT, sse, startCluster, startProgram, stopAll } from '../../lib/harness.mjs';
import { POPULATE_SCENARIOS, census, populate, readAll } from '../../lib/populate.mjs';
import { PREVIOUS, buildRelease } from '../../lib/release.mjs';
import { KEY, startSandboxd } from '../sandboxd/sbx.mjs';
import { api, post, startModels, tuskoEnv, untilTurnEnd } from '../agent/lib.mjs';

const PSQL = '/usr/lib/postgresql/15/bin/psql';
const PG_DUMP = '/usr/lib/postgresql/15/bin/pg_dump';
const MIGRATIONS = fs.readdirSync(path.join(ROOT, 'sql')).filter((f) => f.endsWith('.sql')).sort();

function asUser(url, user) {
  const u = new URL(url);
  u.username = user;
  return u.toString();
}

// rows of a query as arrays of strings
function rows(url, sql) {
  const r = spawnSync(PSQL, ['-X', '-A', '-t', '-F', '\t', '-v', 'ON_ERROR_STOP=1', url, '-c', sql], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`psql: ${r.stderr}`);
  return r.stdout.split('\n').filter((l) => l.length).map((l) => l.split('\t'));
}

// every table of the public schema with its row count
function tableRows(url) {
  const out = {};
  const sql = `SELECT table_name, (xpath('/row/c/text()', query_to_xml(format('SELECT count(*) AS c FROM %I', table_name), false, true, '')))[1]::text
               FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE' ORDER BY 1`;
  for (const [t, n] of rows(url, sql)) out[t] = Number(n);
  return out;
}

function schemaDump(url) {
  const r = spawnSync(PG_DUMP, ['--schema-only', '--no-owner', '--no-privileges', url], { encoding: 'utf8', maxBuffer: 64 << 20 });
  if (r.status !== 0) throw new Error(`pg_dump: ${r.stderr}`);
  // (\restrict and \unrestrict carry a key new at every dump)
  return r.stdout.replace(/^\\(un)?restrict .*$/gm, '');
}

// Where `neu` does not hold everything `old` held: every key of an object
// with a value holding the old one, arrays element by element, the same length.
function lost(old, neu, at = '') {
  if (old === null || typeof old !== 'object') return Object.is(old, neu) ? [] : [`${at}: ${JSON.stringify(old)} became ${JSON.stringify(neu)}`];
  if (neu === null || typeof neu !== 'object' || Array.isArray(old) !== Array.isArray(neu)) return [`${at}: ${JSON.stringify(old).slice(0, 200)} became ${JSON.stringify(neu)}`];
  if (Array.isArray(old) && old.length !== neu.length) return [`${at}: ${old.length} entries became ${neu.length}`];
  return Object.keys(old).flatMap((k) => (k in neu ? lost(old[k], neu[k], `${at}.${k}`) : [`${at}.${k}: gone`]));
}

// the old binary's CLI: a user with a token ({ id, email, auth })
function oldUser(bin, url, email) {
  const env = { PATH: process.env.PATH, HOME: process.env.HOME || '/root', DATABASE_URL: url };
  const a = spawnSync(bin, ['user', 'add', '--email', email, '--password-stdin'], { env, input: 'correct horse battery\n', encoding: 'utf8' });
  assert.equal(a.status, 0, `${PREVIOUS.tag} user add: ${a.stderr}`);
  const t = spawnSync(bin, ['token', 'create', '--email', email], { env, encoding: 'utf8' });
  assert.equal(t.status, 0, `${PREVIOUS.tag} token create: ${t.stderr}`);
  return { id: a.stdout.trim(), email, auth: { authorization: `Bearer ${t.stdout.trim()}` } };
}

describe(`upgrade from ${PREVIOUS.tag}`, () => {
  let release, ms, sbx, cluster, url;
  before(async () => {
    release = buildRelease(PREVIOUS); // minutes the first time, then cached
    ms = await startModels({ scenarios: POPULATE_SCENARIOS });
    sbx = await startSandboxd({ env: { SANDBOX_WARM_POOL_SIZE: '0' } });
    cluster = await startCluster(); // durable, as a deployment's
    url = cluster.db('upgrade');
  });
  after(async () => {
    if (sbx) for (const s of (await sbx.api.list('?pageSize=200')).json.items || []) await sbx.api.del(s.id);
    await stopAll();
    if (ms) await ms.close();
  });

  const env = () => tuskoEnv({ url }, ms, { OPENSANDBOX_URL: sbx.url, OPENSANDBOX_API_KEY: KEY });

  test(`rows written by ${PREVIOUS.tag} survive a failed migration and the upgrade, and chat goes on`, async () => {
    // ---- the previous release, filled through its own API
    const old = await startProgram('tusko', { bin: release.bin('tusko'), env: env() });
    const users = [oldUser(release.bin('tusko'), url, 'alice-up@example.test'), oldUser(release.bin('tusko'), url, 'bob-up@example.test')];
    const data = await populate(old.url, { users, sandbox: true });
    const before = await readAll(old.url, data);
    const n = census(before);
    assert.ok(n.sessions === 5 && n.events > 40 && n.messages >= 20 && n.spans > 10 && n.documents >= 4 && n.downloads === 1, JSON.stringify(n));
    const lastEvent = {};
    for (const c of data.chats) lastEvent[c.id] = before[`${c.user.email} events ${c.id}`].body.at(-1).id;
    await old.stop();

    const oldApplied = rows(url, 'SELECT version FROM schema_migrations ORDER BY 1').map((r) => r[0]);
    const pending = MIGRATIONS.filter((m) => !oldApplied.includes(m));
    assert.ok(pending.length > 0, `${PREVIOUS.tag} applied every migration of this build: nothing to upgrade`);
    assert.deepEqual(oldApplied.filter((m) => !MIGRATIONS.includes(m)), [], 'a migration of the old release is not in sql/');
    const oldSchema = schemaDump(url);
    const oldRows = tableRows(url);
    assert.ok(oldRows.users === 2 && oldRows.messages >= 20 && oldRows.events > 40, JSON.stringify(oldRows));

    // ---- a migration failing half-way: nothing of it stays
    const su = asUser(url, 'postgres');
    rows(
      su,
      `CREATE FUNCTION upgrade_test_fail() RETURNS event_trigger LANGUAGE plpgsql AS $f$
         DECLARE n int := coalesce(nullif(current_setting('upgrade_test.n', true), ''), '0')::int + 1;
         BEGIN
           PERFORM set_config('upgrade_test.n', n::text, true);
           IF n >= 2 THEN RAISE EXCEPTION 'injected failure at schema change % of the transaction', n; END IF;
         END $f$;
       CREATE EVENT TRIGGER upgrade_test_fail ON ddl_command_end EXECUTE FUNCTION upgrade_test_fail();`,
    );
    const failed = await startProgram('tusko', { env: env(), expectListen: false });
    const exit = await failed.wait();
    await failed.stop();
    assert.notEqual(exit.code, 0, 'tusko started although a migration failed');
    const log = failed.log();
    assert.match(log, /injected failure at schema change 2/, log.slice(-2000));
    assert.ok(log.includes(pending[0]), `the log names the failed migration ${pending[0]}:\n${log.slice(-2000)}`);
    assert.ok(!/msg="listening"/.test(log), 'it did not serve');
    rows(su, 'DROP EVENT TRIGGER upgrade_test_fail; DROP FUNCTION upgrade_test_fail()');
    assert.deepEqual(rows(url, 'SELECT version FROM schema_migrations ORDER BY 1').map((r) => r[0]), oldApplied);
    assert.equal(schemaDump(url), oldSchema, `the schema is ${PREVIOUS.tag}'s after the failed migration`);
    assert.deepEqual(tableRows(url), oldRows);

    // ---- this build on the same database
    const neu = await startProgram('tusko', { env: env() });
    assert.deepEqual(rows(url, 'SELECT version FROM schema_migrations ORDER BY 1').map((r) => r[0]), MIGRATIONS);
    const newRows = tableRows(url);
    for (const [t, c] of Object.entries(oldRows)) if (t !== 'schema_migrations') assert.equal(newRows[t], c, `table ${t}: ${c} rows before the upgrade, ${newRows[t]} after`);
    const afterReads = await readAll(neu.url, data);
    assert.deepEqual(Object.keys(afterReads).sort(), Object.keys(before).sort());
    const diffs = [];
    for (const [k, v] of Object.entries(before)) {
      // search ranks by the new BM25 scores (0030): the same documents, ranked anew
      if (k.includes('/api/utopia/search')) continue;
      diffs.push(...lost(v, afterReads[k], k));
    }
    assert.deepEqual(diffs, [], `reads that lost or changed data:\n${diffs.slice(0, 20).join('\n')}`);

    for (const u of data.users) {
      // search finds the documents of before the upgrade
      const s = await api(neu.url, '/api/utopia/search?q=otters%20river', { headers: u.auth });
      assert.equal(s.status, 200, s.text);
      const found = JSON.stringify(s.json);
      assert.ok(found.includes('Field notes'), found.slice(0, 500));
      const was = before[`${u.email} /api/utopia/search?q=otters%20river`].body;
      assert.ok(JSON.stringify(was).includes('Field notes'), 'the old release found it too');
      // and one saved by the agent
      const h = await api(neu.url, '/api/utopia/search?q=apples%20early', { headers: u.auth });
      assert.ok(JSON.stringify(h.json).includes('Harvest findings'), h.text.slice(0, 500));
    }

    // chat goes on in an old chat; its stream resumes after the old last event
    const u = data.users[0];
    const chat = data.chats.find((c) => c.user === u).id;
    const msgsBefore = before[`${u.email} /api/sessions/${chat}/messages?limit=1000`].body.messages.length;
    const p = await post(neu.url, u, chat, 'after the upgrade #scenario:pop-talk');
    assert.equal(p.status, 202, p.text);
    const end = await untilTurnEnd(neu.url, u, chat, p.json.turn_id);
    assert.equal(end.at(-1).json.state, 'done', JSON.stringify(end.at(-1).json));
    const resumed = await sse(neu.url, `/api/sessions/${chat}/events?follow=0`, { headers: { ...u.auth, 'last-event-id': lastEvent[chat] }, timeoutMs: 10000 });
    assert.equal(resumed.status, 200);
    assert.ok(resumed.events.length >= 3, resumed.events.map((e) => e.event).join(','));
    assert.ok(resumed.events.every((e) => e.json && e.json.turn_id === p.json.turn_id), 'only the new turn after the old Last-Event-ID');
    assert.ok(Number(resumed.events[0].id) > Number(lastEvent[chat]));
    const m = await api(neu.url, `/api/sessions/${chat}/messages?limit=1000`, { headers: u.auth });
    assert.equal(m.json.messages.length, msgsBefore + 2);
    assert.match(m.json.messages.at(-1).content, /A plain answer/);

    // a document uploaded now is found beside the old ones
    const d = await api(neu.url, '/api/utopia/documents?filename=later.md&title=Later%20notes', {
      method: 'POST',
      body: '# Later\n\nHerons nested by the weir after the upgrade.\n',
      headers: { ...u.auth, 'content-type': 'text/markdown' },
    });
    assert.equal(d.status, 201, d.text);
    const s2 = await api(neu.url, '/api/utopia/search?q=herons%20weir', { headers: u.auth });
    assert.ok(JSON.stringify(s2.json).includes('Later notes'), s2.text.slice(0, 500));
    await neu.stop();
  });
});
