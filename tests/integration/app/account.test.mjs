// A user's data taken out and deleted. Two users filled through the API
// (chats with plans and tool calls, a file written in a real sandbox and
// downloaded, memories, facts, documents). GET /api/me/export gives a zip
// whose JSON holds what the API shows — every chat, message, event, memory,
// fact, document and the download's bytes — with checksums, no secret and
// nothing of the other user; every table with a foreign key to users
// (read from information_schema) is in it. DELETE /api/me asks for a
// confirmation, waits for a running turn, then releases the user's sandbox at
// the sandbox service and deletes every row: afterwards no row of any table
// holds the user's id, email, or the id of anything they owned (the audit
// entry aside, which keeps the id and the counts); the other user reads
// exactly what they read before. `tusko user export` and `tusko user delete`
// do the same for an operator.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { runProgram, startPostgres, startProgram, stopAll, tmpdir } from '../../lib/harness.mjs';
import { POPULATE_SCENARIOS, populate, readAll } from '../../lib/populate.mjs';
import { KEY, startSandboxd } from '../sandboxd/sbx.mjs';
import { api, makeUser, post, sse, startModels, tuskoEnv, untilTurnEnd } from '../agent/lib.mjs';

const SCENARIOS = {
  ...POPULATE_SCENARIOS,
  'acct-long': { steps: [{ text: Array.from({ length: 30 }, (_, i) => `w${i}`).join(' '), chunk_delay_ms: 100 }] },
};

const SKILL_MD = '---\nname: field-notes\ndescription: Write up field notes.\n---\nSteps: look, write.\n';
const SKILL_SCRIPT = [0, 1, 2, 255, 10];
// a zip of field-notes/SKILL.md (stdin) and field-notes/scripts/run.bin (SKILL_SCRIPT)
const SKILL_ZIP_PY = `import io, sys, zipfile
b = io.BytesIO()
with zipfile.ZipFile(b, 'w', zipfile.ZIP_DEFLATED) as z:
    z.writestr('field-notes/SKILL.md', sys.stdin.buffer.read())
    z.writestr('field-notes/scripts/run.bin', bytes([${SKILL_SCRIPT.join(', ')}]))
sys.stdout.buffer.write(b.getvalue())`;

const sha = (b) => crypto.createHash('sha256').update(b).digest('hex');

// the export of user (GET /api/me/export), extracted: { dir, manifest, table(name), files }
async function exportOf(base, user, work, tag) {
  const res = await fetch(`${base}/api/me/export`, { headers: user.auth });
  assert.equal(res.status, 200, await res.clone().text());
  assert.equal(res.headers.get('content-type'), 'application/zip');
  assert.match(res.headers.get('content-disposition'), /^attachment; filename="tusko-export-\d{4}-\d\d-\d\d\.zip"$/);
  const file = path.join(work, `${tag}.zip`);
  fs.writeFileSync(file, Buffer.from(await res.arrayBuffer()));
  return unpack(file, work, tag);
}

function unpack(file, work, tag) {
  const dir = path.join(work, tag);
  fs.mkdirSync(dir, { recursive: true });
  // Info-ZIP checks every CRC and that each local header agrees with the central directory
  const t = spawnSync('unzip', ['-tq', file], { encoding: 'utf8' });
  assert.equal(t.status, 0, t.stdout + t.stderr);
  assert.match(t.stdout, /^No errors detected/);
  const x = spawnSync('unzip', ['-q', file, '-d', dir], { encoding: 'utf8' });
  assert.equal(x.status, 0, x.stderr);
  const files = spawnSync('unzip', ['-Z1', file], { encoding: 'utf8' }).stdout.split('\n').filter(Boolean);
  const manifest = JSON.parse(fs.readFileSync(path.join(dir, 'manifest.json'), 'utf8'));
  const table = (t) => JSON.parse(fs.readFileSync(path.join(dir, 'tables', `${t}.json`), 'utf8'));
  return { dir, file, files, manifest, table };
}

// tables with a foreign key to users, as information_schema lists them
function tablesReferencingUsers(pg) {
  return pg
    .rows(
      `SELECT DISTINCT tc.table_name FROM information_schema.table_constraints tc
         JOIN information_schema.referential_constraints rc ON rc.constraint_name = tc.constraint_name AND rc.constraint_schema = tc.table_schema
         JOIN information_schema.table_constraints pk ON pk.constraint_name = rc.unique_constraint_name AND pk.table_schema = rc.unique_constraint_schema
        WHERE tc.constraint_type = 'FOREIGN KEY' AND tc.table_schema = 'public' AND pk.table_name = 'users' ORDER BY 1`,
    )
    .map((r) => r[0]);
}

// every table of the schema with the rows whose text holds one of needles
function rowsHolding(pg, needles) {
  const re = needles.map((n) => n.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|');
  const out = {};
  for (const [t] of pg.rows(`SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE' ORDER BY 1`)) {
    const [[n]] = pg.rows(`SELECT count(*) FROM ${t} x WHERE x::text ~* '${re}'`);
    if (Number(n) > 0) out[t] = Number(n);
  }
  return out;
}

describe('export and deletion of a user’s data', () => {
  let ms, sbx, pg, tusko, work, data;
  before(async () => {
    ms = await startModels({ scenarios: SCENARIOS });
    sbx = await startSandboxd({ env: { SANDBOX_WARM_POOL_SIZE: '0' } });
    pg = await startPostgres('account');
    work = tmpdir('tusko-account-');
    tusko = await startProgram('tusko', { env: tuskoEnv(pg, ms, { OPENSANDBOX_URL: sbx.url, OPENSANDBOX_API_KEY: KEY }) });
    const users = [makeUser(pg, 'alice-acct@example.test'), makeUser(pg, 'bob-acct@example.test')];
    data = await populate(tusko.url, { users, sandbox: true });
    // a skill of alice's own, a .skill (zip) with a script: its files are rows of bytes
    const zip = spawnSync('python3', ['-c', SKILL_ZIP_PY], { input: SKILL_MD, maxBuffer: 1 << 20 });
    assert.equal(zip.status, 0, String(zip.stderr));
    const sk = await api(tusko.url, '/api/skills', { method: 'POST', body: zip.stdout, headers: { ...users[0].auth, 'content-type': 'application/zip' } });
    assert.equal(sk.status, 201, sk.text);
  });
  after(async () => {
    if (sbx) for (const s of (await sbx.api.list('?pageSize=200')).json.items || []) await sbx.api.del(s.id);
    await stopAll();
    if (ms) await ms.close();
    if (work) fs.rmSync(work, { recursive: true, force: true });
  });

  test('GET /api/me/export: everything of the user, nothing of anyone else, no secret', async () => {
    const [alice, bob] = data.users;
    const ex = await exportOf(tusko.url, alice, work, 'alice');
    const m = ex.manifest;
    assert.equal(m.format, 'tusko-export');
    assert.equal(m.format_version, 1);
    assert.deepEqual(m.account, { id: alice.id, email: alice.email });
    assert.equal(ex.files.at(-1), 'manifest.json');
    // every member listed, with its size and checksum
    assert.deepEqual(ex.files.slice(0, -1).sort(), m.members.map((x) => x.path).sort());
    for (const x of m.members) {
      const b = fs.readFileSync(path.join(ex.dir, x.path));
      assert.equal(b.length, x.size, x.path);
      assert.equal(sha(b), x.sha256, x.path);
    }
    // every table with a foreign key to users is exported, with a row count
    const fkTables = tablesReferencingUsers(pg);
    assert.ok(fkTables.length >= 10, fkTables.join(','));
    for (const t of ['users', ...fkTables]) {
      assert.ok(ex.files.includes(`tables/${t}.json`), `table ${t} (a foreign key to users) is not in the export`);
      assert.equal(ex.table(t).length, m.tables[t].rows, t);
    }
    assert.ok(ex.files.includes('tables/events.json'), 'events (a reference without a foreign key) is exported');

    // what the API shows is there: chats, messages, events
    const sessions = ex.table('chat_sessions');
    const list = (await api(tusko.url, '/api/sessions?limit=200', { headers: alice.auth })).json.sessions;
    assert.deepEqual(sessions.map((s) => s.id).sort(), list.map((s) => s.id).sort());
    assert.deepEqual(sessions.map((s) => s.title).sort(), list.map((s) => s.title).sort());
    const msgs = ex.table('messages');
    const evs = ex.table('events');
    let nm = 0;
    let ne = 0;
    for (const s of list) {
      const api_m = (await api(tusko.url, `/api/sessions/${s.id}/messages?limit=1000`, { headers: alice.auth })).json.messages;
      const mine = msgs.filter((x) => x.session_id === s.id).sort((a, b) => a.seq - b.seq);
      assert.deepEqual(
        mine.map((x) => [x.id, x.role, x.content]),
        api_m.map((x) => [x.id, x.role, x.content]),
      );
      nm += mine.length;
      const stream = await sse(tusko.url, `/api/sessions/${s.id}/events?follow=0`, { headers: alice.auth });
      const mineE = evs.filter((x) => x.session_id === s.id).sort((a, b) => a.seq - b.seq);
      assert.deepEqual(
        mineE.map((x) => [String(x.seq), x.type, x.data]),
        stream.events.map((e) => [e.id, e.event, e.data]),
      );
      ne += mineE.length;
    }
    assert.ok(nm >= 10 && ne > 20, `${nm} messages, ${ne} events`);
    assert.ok(ex.table('turns').length >= 5 && ex.table('spans').length > 5);
    assert.ok(ex.table('plans').some((p) => JSON.stringify(p.plan).includes('quarterly notes')));
    // memories, facts, documents (their text: the chunks)
    assert.ok(ex.table('utopia_memories').some((x) => x.text === 'User 0 keeps bees.'));
    assert.ok(ex.table('utopia_memories').some((x) => x.text === 'The user prefers short answers.'));
    const ents = Object.fromEntries(ex.table('utopia_entities').map((x) => [x.id, x.name]));
    assert.ok(ex.table('utopia_facts').some((f) => ents[f.subject_id] === 'Bo Lind' && f.object === 'Initech'));
    const docs = ex.table('utopia_documents');
    assert.deepEqual(docs.map((d) => d.title).sort(), ['Field notes', 'Harvest findings']);
    assert.ok(ex.table('utopia_chunks').some((c) => c.body.includes('Otters were seen by the river')));
    // the download: its row and its bytes
    const [dl] = ex.table('downloads');
    assert.equal(dl.id, data.downloads[0].id);
    assert.ok(!('data' in dl));
    const bytes = Buffer.from(await (await fetch(`${tusko.url}/api/downloads/${dl.id}`, { headers: alice.auth })).arrayBuffer());
    assert.deepEqual(fs.readFileSync(path.join(ex.dir, 'downloads', dl.id, 'report.md')), bytes);
    assert.equal(sha(bytes), dl.sha256);
    // her skill, its file's bytes in the JSON (bytea as hex)
    assert.deepEqual(ex.table('skills').map((x) => x.name), ['field-notes']);
    const sf = ex.table('skill_files').find((f) => f.path.endsWith('run.bin'));
    assert.ok(sf, JSON.stringify(ex.table('skill_files').map((f) => f.path)));
    assert.deepEqual([...Buffer.from(sf.data.replace(/^\\x/, ''), 'hex')], SKILL_SCRIPT);
    // the sandbox's row, without execd's access header
    assert.ok(ex.table('sandboxes').length >= 1 && ex.table('sandboxes').every((s) => !('execd_headers' in s)));

    // no secret: the hashes of the password and the token are in no member
    const [[pw]] = pg.rows(`SELECT password_hash FROM users WHERE id = '${alice.id}'`);
    const [[th]] = pg.rows(`SELECT encode(token_hash, 'hex') FROM api_tokens WHERE user_id = '${alice.id}'`);
    const all = ex.files.map((f) => fs.readFileSync(path.join(ex.dir, f), 'latin1')).join('\n');
    assert.ok(pw.length > 20 && !all.includes(pw), 'the password hash is exported');
    assert.ok(!all.includes(th) && !all.includes(Buffer.from(th, 'hex').toString('base64')), 'the token hash is exported');
    assert.ok(!all.includes(alice.token), 'the token is exported');
    assert.deepEqual(m.tables.users.omitted, ['password_hash']);
    assert.ok(m.tables.api_tokens.omitted.includes('token_hash'));
    // nothing of bob's
    assert.ok(!all.includes(bob.id) && !all.includes(bob.email), 'the other user’s data is in the export');
    const bobChats = (await api(tusko.url, '/api/sessions', { headers: bob.auth })).json.sessions;
    for (const s of bobChats) assert.ok(!all.includes(s.id));

    // the operator's export of the same account holds the same tables
    const out = path.join(work, 'alice-cli.zip');
    const r = runProgram('tusko', ['user', 'export', '--email', alice.email, '--out', out], { env: { DATABASE_URL: pg.url } });
    assert.equal(r.code, 0, r.stderr);
    assert.equal((fs.statSync(out).mode & 0o777).toString(8), '600');
    const cli = unpack(out, work, 'alice-cli');
    assert.deepEqual(cli.files, ex.files);
    for (const f of ex.files.filter((f) => f !== 'manifest.json')) assert.deepEqual(fs.readFileSync(path.join(cli.dir, f)), fs.readFileSync(path.join(ex.dir, f)), f);
  });

  test('GET /api/sessions/{id}/export: one chat as JSON with every event, and as Markdown with its files', async () => {
    const [alice, bob] = data.users;
    const files = data.chats.find((c) => c.user === alice && c.id !== data.chats[0].id && c.id !== data.chats[1].id).id;
    for (const sid of data.chats.filter((c) => c.user === alice).map((c) => c.id)) {
      const r = await api(tusko.url, `/api/sessions/${sid}/export`, { headers: alice.auth });
      assert.equal(r.status, 200, r.text);
      assert.equal(r.headers.get('content-disposition'), `attachment; filename="chat-${sid}.json"`);
      const x = r.json;
      assert.equal(x.format, 'tusko-chat-export');
      assert.equal(x.chat.id, sid);
      // every event, as the stream gives them; the messages as the API lists them
      const stream = await sse(tusko.url, `/api/sessions/${sid}/events?follow=0`, { headers: alice.auth });
      assert.deepEqual(
        x.events.map((e) => [String(e.id), e.type, e.data]),
        stream.events.map((e) => [e.id, e.event, JSON.parse(e.data)]),
      );
      const msgs = (await api(tusko.url, `/api/sessions/${sid}/messages?limit=1000`, { headers: alice.auth })).json.messages;
      assert.deepEqual(x.messages.map((m) => [m.id, m.role, m.content]), msgs.map((m) => [m.id, m.role, m.content]));
      assert.ok(x.turns.length >= 1 && x.turns.every((t) => t.state === 'done'));
    }
    // Markdown: the title, what was said, the tool calls, the files with their checksums
    const j = (await api(tusko.url, `/api/sessions/${files}/export`, { headers: alice.auth })).json;
    assert.equal(j.files.length, 1);
    const res = await fetch(`${tusko.url}/api/sessions/${files}/export?format=md`, { headers: alice.auth });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'text/markdown; charset=utf-8');
    const md = await res.text();
    assert.ok(md.startsWith('# Files\n'), md.slice(0, 200));
    assert.ok(md.includes('## You\n\nwrite the report #scenario:pop-write\n'), md);
    assert.ok(md.includes('calls `write_file`') && md.includes('calls `execute_command`'), md);
    assert.ok(md.includes('**Result of `execute_command`**'), md);
    const f = j.files[0];
    assert.equal(f.path, '/workspace/out/report.md');
    assert.ok(md.includes(`## Files\n\n- report.md (\`${f.path}\`, ${f.size} bytes, SHA-256 ${f.sha256}): /api/downloads/${f.id}\n`), md);
    const plan = (await fetch(`${tusko.url}/api/sessions/${data.chats[0].id}/export?format=md`, { headers: alice.auth }).then((x) => x.text()));
    assert.ok(plan.includes('calls `plan_task`') && plan.includes('## Assistant'), plan);
    // someone else's chat, or a bad format
    assert.equal((await api(tusko.url, `/api/sessions/${files}/export`, { headers: bob.auth })).status, 404);
    assert.equal((await api(tusko.url, `/api/sessions/${files}/export?format=pdf`, { headers: alice.auth })).status, 400);
  });

  test('DELETE /api/me removes every row of the user and their sandboxes, and nothing else', async () => {
    const [alice, bob] = data.users;
    const ex = unpack(path.join(work, 'alice.zip'), work, 'alice-again');
    const bobBefore = await readAll(tusko.url, { ...data, users: [bob] });
    // alice's sandbox is running at the service
    const remote = ex.table('sandboxes').filter((s) => s.state === 'live').map((s) => s.remote_id);
    assert.equal(remote.length, 1);
    assert.equal((await sbx.api.get(remote[0])).json.status.state, 'Running');

    // a confirmation is needed
    let r = await api(tusko.url, '/api/me', { method: 'DELETE', headers: alice.auth });
    assert.equal(r.status, 400);
    assert.equal(r.json.code, 'CONFIRMATION_REQUIRED');
    r = await api(tusko.url, '/api/me', { method: 'DELETE', json: { confirm: bob.email }, headers: alice.auth });
    assert.equal(r.status, 400);
    // a running turn: refused, nothing deleted
    const chat = data.chats.find((c) => c.user === alice).id;
    const p = await post(tusko.url, alice, chat, 'go on #scenario:acct-long');
    assert.equal(p.status, 202, p.text);
    r = await api(tusko.url, '/api/me', { method: 'DELETE', json: { confirm: alice.email }, headers: alice.auth });
    assert.equal(r.status, 409, r.text);
    assert.equal(r.json.code, 'TURN_IN_PROGRESS');
    assert.ok(r.json.message.includes(p.json.turn_id));
    assert.equal((await api(tusko.url, '/api/me', { headers: alice.auth })).status, 200);
    await untilTurnEnd(tusko.url, alice, chat, p.json.turn_id);

    // the rows alice owns, by id, and what the catalog says she has
    const owned = [alice.id];
    const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
    for (const f of ex.files.filter((f) => f.startsWith('tables/')))
      for (const row of JSON.parse(fs.readFileSync(path.join(ex.dir, f), 'utf8')))
        for (const [k, v] of Object.entries(row))
          // (instance_id: the tusko instance that ran a turn, not the user's;
          // the nil UUID: utopia's library scope, everyone's)
          if ((k === 'id' || k.endsWith('_id')) && k !== 'instance_id' && UUID.test(v) && !/^[0-]+$/.test(v) && !owned.includes(v)) owned.push(v);
    const [[turnsNow]] = pg.rows(`SELECT count(*) FROM turns WHERE user_id = '${alice.id}'`);
    assert.ok(owned.length > 60, `${owned.length} ids`);
    assert.ok(Object.keys(rowsHolding(pg, [alice.email])).length > 0);

    r = await api(tusko.url, '/api/me', { method: 'DELETE', json: { confirm: alice.email }, headers: alice.auth });
    assert.equal(r.status, 200, r.text);
    const del = r.json.deleted;
    assert.equal(del.users, 1);
    assert.equal(del.chat_sessions, 3);
    assert.equal(del.turns, Number(turnsNow));
    assert.equal(del.downloads, 1);
    assert.equal(del.messages, ex.table('messages').length + 2, 'the two messages of the turn after the export');
    assert.ok(del.events > ex.table('events').length);
    for (const t of ['api_tokens', 'sandboxes', 'spans', 'plans', 'utopia_documents', 'utopia_chunks', 'utopia_memories', 'utopia_facts', 'utopia_entities'])
      assert.ok(del[t] > 0, `${t}: ${del[t]}`);
    assert.equal(r.json.sandboxes_released, 1);
    // the sandbox is gone at the service
    const after = await sbx.api.get(remote[0]);
    assert.ok(after.status === 404 || ['Terminated', 'Stopping'].includes(after.json.status.state), after.text);

    // the token no longer signs in
    assert.equal((await api(tusko.url, '/api/me', { headers: alice.auth })).status, 401);
    // no row anywhere holds her email, or her id or the id of anything she had,
    // but the audit log's entries of her: the deletion, and what was recorded
    // before it (her token's creation), which AUDIT_RETENTION removes in time
    assert.deepEqual(rowsHolding(pg, [alice.email]), {});
    const hers = pg.rows(`SELECT action FROM audit_log WHERE account_id = '${alice.id}' ORDER BY id`).map((x) => x[0]);
    assert.deepEqual(hers, ['token.create', 'account deleted']);
    assert.deepEqual(rowsHolding(pg, owned), { audit_log: hers.length });
    for (const t of tablesReferencingUsers(pg)) {
      const cols = pg.rows(`SELECT column_name FROM information_schema.columns WHERE table_schema = 'public' AND table_name = '${t}' AND column_name = 'user_id'`);
      if (cols.length) assert.deepEqual(pg.rows(`SELECT count(*) FROM ${t} WHERE user_id = '${alice.id}'`), [['0']], t);
    }
    const audit = pg.rows(`SELECT action, actor, account_id, detail::text FROM audit_log WHERE action = 'account deleted'`);
    assert.equal(audit.length, 1);
    assert.deepEqual(audit[0].slice(0, 3), ['account deleted', 'self', alice.id]);
    assert.deepEqual(JSON.parse(audit[0][3]), { rows: del });
    // bob reads what he read before
    assert.deepEqual(await readAll(tusko.url, { ...data, users: [bob] }), bobBefore);
  });

  test('tusko user delete: the operator’s way, with --yes', async () => {
    const bob = data.users[1];
    let r = runProgram('tusko', ['user', 'delete', '--email', bob.email], { env: { DATABASE_URL: pg.url } });
    assert.equal(r.code, 2);
    assert.match(r.stderr, /add --yes/);
    assert.equal((await api(tusko.url, '/api/me', { headers: bob.auth })).status, 200);
    r = runProgram('tusko', ['user', 'delete', '--email', bob.email, '--yes'], { env: { DATABASE_URL: pg.url } });
    assert.equal(r.code, 0, r.stderr);
    const out = JSON.parse(r.stdout);
    assert.equal(out.deleted.users, 1);
    assert.equal(out.deleted.chat_sessions, 2);
    assert.equal(out.sandboxes_released, 0);
    assert.deepEqual(rowsHolding(pg, [bob.email]), {});
    assert.deepEqual(pg.rows(`SELECT count(*) FROM users`), [['0']]);
    assert.deepEqual(pg.rows(`SELECT actor FROM audit_log WHERE account_id = '${bob.id}' AND action = 'account deleted'`), [['cli']]);
    r = runProgram('tusko', ['user', 'delete', '--email', bob.email, '--yes'], { env: { DATABASE_URL: pg.url } });
    assert.equal(r.code, 1);
    assert.match(r.stderr, /no user with email bob-acct@example\.test/);
  });
});
