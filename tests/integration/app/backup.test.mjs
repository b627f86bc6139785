// tusko backup and tusko restore, round trip: a populated instance (two users;
// chats with tool calls, plans, memories, facts, documents saved by the agent
// and uploaded, a file downloaded from a real sandbox; user-installed skills in
// TUSKO_DATA_DIR) is backed up while it serves — another user's turn streams
// meanwhile — restored into a fresh database and data folder, and a tusko on it
// answers every read of the API exactly as the original did. Then what a
// restore refuses: a non-empty target (unless --force), a running tusko on the
// target, a damaged member, a cut archive, a backup from a newer tusko (schema
// or data kind), something that is not a backup.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { ROOT, runProgram, sleep, startPostgres, startProgram, stopAll, tmpdir } from '../../lib/harness.mjs';
import { POPULATE_SCENARIOS, census, populate, readAll } from '../../lib/populate.mjs';
import { KEY, startSandboxd } from '../sandboxd/sbx.mjs';
import { api, makeUser, newSession, post, startModels, tuskoEnv, untilTurnEnd } from '../agent/lib.mjs';

// the newest migration this build has
const LATEST = fs.readdirSync(path.join(ROOT, 'sql')).filter((f) => f.endsWith('.sql')).sort().at(-1);

const SCENARIOS = {
  ...POPULATE_SCENARIOS,
  'pop-long': { steps: [{ text: Array.from({ length: 30 }, (_, i) => `w${i}`).join(' '), chunk_delay_ms: 100 }] },
};

// the archive's members as GNU tar lists them
const members = (file) => spawnSync('tar', ['-tf', file], { encoding: 'utf8' }).stdout.split('\n').filter(Boolean);

// rebuilds an archive with its manifest changed by fn (members in the same order)
function rewrite(file, out, fn) {
  const d = tmpdir('tusko-bk-edit-');
  assert.equal(spawnSync('tar', ['-xf', file, '-C', d]).status, 0);
  const m = JSON.parse(fs.readFileSync(path.join(d, 'manifest.json'), 'utf8'));
  fn(m);
  fs.writeFileSync(path.join(d, 'manifest.json'), JSON.stringify(m));
  const r = spawnSync('tar', ['--format=ustar', '-cf', out, '-C', d, ...members(file)]);
  assert.equal(r.status, 0, String(r.stderr));
  fs.rmSync(d, { recursive: true, force: true });
}

describe('backup and restore', () => {
  let ms, sbx, work, archive;
  before(async () => {
    ms = await startModels({ scenarios: SCENARIOS });
    sbx = await startSandboxd({ env: { SANDBOX_WARM_POOL_SIZE: '0' } });
    work = tmpdir('tusko-backup-');
    archive = path.join(work, 'backup.tar');
  });
  after(async () => {
    for (const s of (await sbx.api.list('?pageSize=200')).json.items || []) await sbx.api.del(s.id);
    await stopAll();
    await ms.close();
    fs.rmSync(work, { recursive: true, force: true });
  });

  const sandboxEnv = () => ({ OPENSANDBOX_URL: sbx.url, OPENSANDBOX_API_KEY: KEY });
  let data, original, pgA, dataA;

  test('a backup taken while tusko serves restores to the same answers', async () => {
    pgA = await startPostgres('backup_a');
    dataA = path.join(work, 'data-a');
    const env = tuskoEnv(pgA, ms, { ...sandboxEnv(), TUSKO_DATA_DIR: dataA });
    const a = await startProgram('tusko', { env });
    const users = [makeUser(pgA, 'alice-bk@example.test'), makeUser(pgA, 'bob-bk@example.test')];
    data = await populate(a.url, { users, sandbox: true });
    // user-installed skills: the data kind kept in files
    fs.mkdirSync(path.join(dataA, 'skills/deck/scripts'), { recursive: true });
    fs.writeFileSync(path.join(dataA, 'skills/deck/SKILL.md'), '---\nname: deck\ndescription: Make a deck.\n---\nSteps…\n');
    fs.writeFileSync(path.join(dataA, 'skills/deck/scripts/build.py'), Buffer.from([0, 1, 2, 255, 10]));
    original = await readAll(a.url, data);
    const n = census(original);
    assert.ok(n.sessions === 5 && n.events > 40 && n.messages >= 20 && n.spans > 10 && n.documents >= 4 && n.downloads === 1, JSON.stringify(n));

    // the service goes on: carol's turn streams while the backup runs
    const carol = makeUser(pgA, 'carol-bk@example.test');
    const cs = await newSession(a.url, carol);
    const p = await post(a.url, carol, cs, 'a long one #scenario:pop-long');
    assert.equal(p.status, 202);
    const carolEnd = untilTurnEnd(a.url, carol, cs, p.json.turn_id);
    await sleep(300);
    const t0 = Date.now();
    const r = runProgram('tusko', ['backup', '--out', archive], { env: { DATABASE_URL: pgA.url, TUSKO_DATA_DIR: dataA } });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout.trim(), archive);
    assert.ok(r.stderr.includes(`the database (schema ${LATEST}, `), r.stderr);
    assert.match(r.stderr, /written .*backup\.tar: \d+ bytes; the database \(schema \S+, \d+ tables, \d+ rows\), 2 data file\(s\)/);
    const ended = await carolEnd;
    assert.equal(ended.at(-1).json.state, 'done', 'the turn running during the backup ended normally');
    assert.ok(Date.now() - t0 < 60000);
    assert.deepEqual(members(archive), ['manifest.json', 'database.dump', 'data/skills/deck/SKILL.md', 'data/skills/deck/scripts/build.py']);
    assert.equal((fs.statSync(archive).mode & 0o777).toString(8), '600');
    const manifest = JSON.parse(spawnSync('tar', ['-xOf', archive, 'manifest.json'], { encoding: 'utf8' }).stdout);
    assert.equal(manifest.format, 'tusko-backup');
    assert.equal(manifest.database.schema.at(-1), LATEST);
    assert.equal(manifest.database.rows.users, 3);
    assert.equal(manifest.database.rows.downloads, 1);
    assert.deepEqual(manifest.kinds, { skills: { present: true, files: 2 } });
    assert.match(manifest.database.pg_dump, /^pg_dump \(PostgreSQL\) 15\./);
    for (const m of manifest.members) assert.match(m.sha256, /^[0-9a-f]{64}$/);
    // nothing the backup did changed what alice and bob read
    assert.deepEqual(await readAll(a.url, data), original);
    await a.stop();

    // into a fresh database and data folder
    const pgB = await startPostgres('backup_b');
    const dataB = path.join(work, 'data-b');
    const rr = runProgram('tusko', ['restore', archive], { env: { DATABASE_URL: pgB.url, TUSKO_DATA_DIR: dataB } });
    assert.equal(rr.code, 0, rr.stderr);
    assert.match(rr.stdout, /^restored .*backup\.tar: \d+ tables, \d+ rows \(as counted at the backup\), 1 data folder\(s\); 0 migration\(s\) applied since/);
    for (const f of ['skills/deck/SKILL.md', 'skills/deck/scripts/build.py'])
      assert.deepEqual(fs.readFileSync(path.join(dataB, f)), fs.readFileSync(path.join(dataA, f)), f);
    const b = await startProgram('tusko', { env: tuskoEnv(pgB, ms, { ...sandboxEnv(), TUSKO_DATA_DIR: dataB }) });
    const restored = await readAll(b.url, data);
    for (const k of Object.keys(original)) assert.deepEqual(restored[k], original[k], k);
    assert.deepEqual(Object.keys(restored), Object.keys(original));
    // the tokens came along: the same Bearer tokens work; and chat goes on
    const more = await post(b.url, data.users[0], data.chats[0].id, 'after the restore #scenario:pop-talk');
    assert.equal(more.status, 202, more.text);
    assert.equal((await untilTurnEnd(b.url, data.users[0], data.chats[0].id, more.json.turn_id)).at(-1).json.state, 'done');

    // a running tusko on the target: refused, whatever --force says
    let x = runProgram('tusko', ['restore', archive, '--force'], { env: { DATABASE_URL: pgB.url, TUSKO_DATA_DIR: dataB } });
    assert.equal(x.code, 1);
    assert.match(x.stderr, /other connection\(s\) to the database: a tusko \(or another program\) uses it; stop it/);
    await b.stop();
    // not empty: refused without --force; nothing changed
    const msgs = pgB.rows('SELECT count(*) FROM messages');
    x = runProgram('tusko', ['restore', archive], { env: { DATABASE_URL: pgB.url, TUSKO_DATA_DIR: dataB } });
    assert.equal(x.code, 1);
    assert.match(x.stderr, /the target is not empty \(the database has tables; .*data-b\/skills\): .*pass --force/);
    assert.deepEqual(pgB.rows('SELECT count(*) FROM messages'), msgs);
    // --force replaces it: the turn made after the restore is gone again
    fs.writeFileSync(path.join(dataB, 'skills/stray.md'), 'not in the backup');
    x = runProgram('tusko', ['restore', archive, '--force'], { env: { DATABASE_URL: pgB.url, TUSKO_DATA_DIR: dataB } });
    assert.equal(x.code, 0, x.stderr);
    assert.ok(!fs.existsSync(path.join(dataB, 'skills/stray.md')));
    const again = await startProgram('tusko', { env: tuskoEnv(pgB, ms, { ...sandboxEnv(), TUSKO_DATA_DIR: dataB }) });
    const forced = await readAll(again.url, data);
    for (const k of Object.keys(original)) assert.deepEqual(forced[k], original[k], k);
    await again.stop();
  });

  test('a damaged, cut or newer backup is refused before the target is touched', async () => {
    const pgC = await startPostgres('backup_c');
    const dataC = path.join(work, 'data-c');
    const restore = (file) => runProgram('tusko', ['restore', file], { env: { DATABASE_URL: pgC.url, TUSKO_DATA_DIR: dataC } });
    const untouched = () => {
      assert.deepEqual(pgC.rows(`SELECT count(*) FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relkind = 'r'`), [['0']]);
      assert.ok(!fs.existsSync(path.join(dataC, 'skills')));
    };
    const buf = fs.readFileSync(archive);
    // a byte of the dump flipped (the dump starts after the manifest's blocks)
    const mlen = Number(buf.subarray(124, 136).toString().replace(/\0.*$/, '').trim());
    const dumpAt = 512 + Math.ceil(mlen / 512) * 512 + 512;
    const bad = Buffer.from(buf);
    bad[dumpAt + 700] ^= 0x40;
    fs.writeFileSync(path.join(work, 'flipped.tar'), bad);
    let r = restore(path.join(work, 'flipped.tar'));
    assert.equal(r.code, 1);
    assert.match(r.stderr, /"database\.dump" does not match its SHA-256 in the manifest: the backup is damaged/);
    untouched();
    // cut short
    fs.writeFileSync(path.join(work, 'cut.tar'), buf.subarray(0, dumpAt + 2000));
    r = restore(path.join(work, 'cut.tar'));
    assert.equal(r.code, 1);
    assert.match(r.stderr, /cut short/);
    untouched();
    // a member the manifest does not list
    rewrite(archive, path.join(work, 'extra.tar'), (m) => {
      m.members = m.members.filter((x) => !x.path.endsWith('build.py'));
    });
    r = restore(path.join(work, 'extra.tar'));
    assert.equal(r.code, 1);
    assert.match(r.stderr, /holds "data\/skills\/deck\/scripts\/build\.py", which its manifest does not list/);
    untouched();
    // from a newer tusko: a migration this build does not have, a data kind it does not know
    rewrite(archive, path.join(work, 'newer.tar'), (m) => m.database.schema.push('0999_later.sql'));
    r = restore(path.join(work, 'newer.tar'));
    assert.equal(r.code, 1);
    assert.match(r.stderr, /the database has migration 0999_later\.sql, which this tusko does not know: it comes from a newer tusko/);
    rewrite(archive, path.join(work, 'kind.tar'), (m) => {
      m.kinds.snapshots = { present: false, files: 0 };
    });
    r = restore(path.join(work, 'kind.tar'));
    assert.equal(r.code, 1);
    assert.match(r.stderr, /holds data of kind "snapshots", which this tusko \(.*\) does not know/);
    // a path out of its folder
    rewrite(archive, path.join(work, 'escape.tar'), (m) => {
      m.members.find((x) => x.path.endsWith('SKILL.md')).path = 'data/skills/../../etc/x';
    });
    r = restore(path.join(work, 'escape.tar'));
    assert.equal(r.code, 1);
    assert.match(r.stderr, /is not a path a backup has/);
    // not a backup at all
    fs.writeFileSync(path.join(work, 'junk.tar'), 'hello');
    r = restore(path.join(work, 'junk.tar'));
    assert.equal(r.code, 1);
    assert.match(r.stderr, /is not a tusko backup/);
    untouched();
    // and the good one restores into this same target
    r = restore(archive);
    assert.equal(r.code, 0, r.stderr);
  });

  test('backup refuses an existing file and restore needs a file', async () => {
    const pg = await startPostgres('backup_args');
    let r = runProgram('tusko', ['backup', '--out', archive], { env: { DATABASE_URL: pg.url } });
    assert.equal(r.code, 1);
    assert.match(r.stderr, /exists; name a new file/);
    r = runProgram('tusko', ['restore'], { env: { DATABASE_URL: pg.url } });
    assert.equal(r.code, 2);
    assert.match(r.stderr, /usage: tusko restore FILE \[--force\]/);
    r = runProgram('tusko', ['backup', '--bogus'], { env: { DATABASE_URL: pg.url } });
    assert.equal(r.code, 2);
  });
});
