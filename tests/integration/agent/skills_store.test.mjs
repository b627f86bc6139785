// User-installed skills through /api/skills against a real Postgres, and what
// a turn then offers (the scripted model server records the requests): the
// five built-ins listed; a SKILL.md and a zip uploaded, a new upload of a name
// a new version (the same bytes: none), rolled back by PATCH; every hostile
// archive refused with its rule and nothing stored; a built-in's name 409;
// another user's skill 404 on every route; export re-imports to the same
// digest; a disabled skill absent from the catalogue and refused by
// activate_skill; with every skill disabled no catalogue and no skill tools;
// an uploaded skill activated and its file read in a turn; a skill an admin
// installs for everyone seen and used by every user, disabled by one for
// themselves, changed by none but its admin, its name refused to users; delete.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';

import { stopAll } from '../../lib/harness.mjs';
import { api, makeUser, newSession, startModels, startTusko, turn } from './lib.mjs';

const BUILTINS = ['code-review', 'financial-model', 'presentation', 'security-audit', 'word-report'];
const md = (name, desc = 'Writes haiku about the user\'s data. Use for poems.', body = '# Haiku\nWrite three lines about $ARGUMENTS.\n') =>
  `---\nname: ${name}\ndescription: ${desc}\n---\n${body}`;

// A zip made by Python's zipfile: entries [name, text, unixMode?]
function zip(entries) {
  const py = `
import sys, json, zipfile, io
z = io.BytesIO()
with zipfile.ZipFile(z, 'w', zipfile.ZIP_DEFLATED) as f:
    for e in json.load(sys.stdin):
        i = zipfile.ZipInfo(e[0])
        if len(e) > 2: i.external_attr = e[2] << 16; i.create_system = 3
        f.writestr(i, e[1] if isinstance(e[1], str) else bytes.fromhex(e[1]['hex']))
sys.stdout.buffer.write(z.getvalue())`;
  return execFileSync('python3', ['-c', py], { input: JSON.stringify(entries), maxBuffer: 64 << 20 });
}

const SCENARIOS = {
  talk: { steps: [{ text: 'ok' }] },
  haiku: {
    steps: [
      { tool_calls: [{ name: 'activate_skill', arguments: { name: 'haiku', arguments: 'the sea' } }] },
      { tool_calls: [{ name: 'read_skill_file', arguments: { name: 'haiku', path: 'references/forms.md' } }] },
      { text: 'done' },
    ],
  },
  'activate-disabled': { steps: [{ tool_calls: [{ name: 'activate_skill', arguments: { name: 'presentation' } }] }, { text: 'x' }] },
};

describe('user-installed skills', () => {
  let ms, stack, base, alice, bob;
  const as = (u) => ({ headers: u.auth });
  const upload = (u, body, type = 'application/octet-stream') =>
    api(base, '/api/skills', { method: 'POST', body, headers: { ...u.auth, 'content-type': type } });
  const rows = (uid) =>
    stack.pg
      .rows(`SELECT (SELECT count(*) FROM skills WHERE user_id = '${uid}') || ',' || (SELECT count(*) FROM skill_versions v JOIN skills s ON s.id = v.skill_id WHERE s.user_id = '${uid}') || ',' || (SELECT count(*) FROM skill_files f JOIN skills s ON s.id = f.skill_id WHERE s.user_id = '${uid}')`)
[0][0];

  before(async () => {
    ms = await startModels({ scenarios: SCENARIOS });
    stack = await startTusko(ms, { tag: 'skills_store' });
    base = stack.tusko.url;
    alice = makeUser(stack.pg);
    bob = makeUser(stack.pg);
  });
  after(async () => {
    await stopAll();
    await ms.close();
  });

  test('GET /api/skills lists the five built-ins, enabled; one with its body, files and version', async () => {
    const r = await api(base, '/api/skills', as(alice));
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.json.skills.map((s) => [s.name, s.builtin, s.enabled, s.version]), BUILTINS.map((n) => [n, true, true, 1]));
    assert.ok(r.json.skills.every((s) => s.description.length > 80 && /^[0-9a-f]{64}$/.test(s.digest) && s.body === undefined));
    const one = await api(base, '/api/skills/financial-model', as(alice));
    assert.equal(one.status, 200, one.text);
    assert.match(one.json.body, /^# Financial model/);
    assert.deepEqual(one.json.files.map((f) => f.path), ['references/model-schema.md', 'scripts/build_model.py', 'scripts/check_model.py']);
    assert.deepEqual(one.json.versions.map((v) => v.version), [1]);
    assert.equal((await api(base, '/api/skills/nope', as(alice))).status, 404);
    assert.equal((await api(base, '/api/skills')).status, 401);
  });

  test('uploads: SKILL.md, a new version per change (none for the same bytes), roll back', async () => {
    const r1 = await upload(alice, md('haiku'), 'text/markdown');
    assert.equal(r1.status, 201, r1.text);
    assert.deepEqual([r1.json.name, r1.json.builtin, r1.json.enabled, r1.json.version, r1.json.created], ['haiku', false, true, 1, true]);
    const again = await upload(alice, md('haiku'), 'text/markdown');
    assert.equal(again.status, 200, again.text);
    assert.deepEqual([again.json.version, again.json.created, again.json.digest], [1, false, r1.json.digest]);
    // a zip of the same name: version 2, with its files
    const z = zip([
      ['haiku/SKILL.md', md('haiku', 'Writes haiku. Use for poems.', '# Haiku v2\nForms are in references/forms.md; the topic: $ARGUMENTS.\n')],
      ['haiku/references/forms.md', '5-7-5 syllables.\n'],
      ['haiku/scripts/count.py', 'print(17)\n'],
    ]);
    const r2 = await upload(alice, z, 'application/zip');
    assert.equal(r2.status, 201, r2.text);
    assert.equal(r2.json.version, 2);
    assert.notEqual(r2.json.digest, r1.json.digest);
    const g = await api(base, '/api/skills/haiku', as(alice));
    assert.deepEqual(g.json.versions.map((v) => [v.version, v.digest]), [[1, r1.json.digest], [2, r2.json.digest]]);
    assert.deepEqual(g.json.files.map((f) => [f.path, f.size]), [['references/forms.md', 17], ['scripts/count.py', 10]]);
    // roll back to 1 and forward again
    const back = await api(base, '/api/skills/haiku', { method: 'PATCH', json: { version: 1 }, ...as(alice) });
    assert.equal(back.status, 200, back.text);
    assert.deepEqual([back.json.version, back.json.digest], [1, r1.json.digest]);
    assert.equal((await api(base, '/api/skills/haiku', { method: 'PATCH', json: { version: 7 }, ...as(alice) })).status, 400);
    assert.equal((await api(base, '/api/skills/haiku', { method: 'PATCH', json: { version: 2 }, ...as(alice) })).json.version, 2);
    // a key outside the format is kept and reported
    const w = await upload(alice, '---\nname: with-extra\ndescription: Extra.\nuser-invocable: false\n---\nx\n');
    assert.equal(w.status, 201, w.text);
    assert.match(w.json.warnings[0], /user-invocable/);
    assert.equal(rows(alice.id), '2,3,2');
  });

  test('every hostile upload refused with its rule, nothing stored', async () => {
    const before = rows(alice.id);
    const ok = md('evil');
    const cases = [
      [zip([['SKILL.md', ok], ['../escape.sh', 'x']]), /"\.\." component/],
      [zip([['SKILL.md', ok], ['/etc/cron.d/x', 'x']]), /absolute path/],
      [zip([['SKILL.md', ok], ['scripts\\x.bat', 'x']]), /backslash/],
      [zip([['SKILL.md', ok], ['link', '/etc/passwd', 0o120777]]), /"link" is a symlink/],
      [zip([['SKILL.md', ok], ['a.md', '1'], ['a.md', '2']]), /"a\.md" is in the zip twice/],
      [zip([['README.md', 'x']]), /no SKILL\.md/],
      [zip([['evil/SKILL.md', ok], ['other/x', 'x']]), /lies outside the folder "evil\/"/],
      [zip([['wrong-folder/SKILL.md', ok]]), /SKILL\.md: .*folder/],
      [zip([['SKILL.md', { hex: Buffer.from('---\nname: evil\ndescription: caf\xe9\n---\n', 'latin1').toString('hex') }]]), /SKILL\.md:.*UTF-8/],
      [zip(Array.from({ length: 1001 }, (_, i) => (i === 0 ? ['SKILL.md', ok] : [`r/${i}`, 'x']))), /1001 entries \(at most 1000\)/],
      [Buffer.from('---\nname: Evil_Name\ndescription: x\n---\n'), /SKILL\.md: .*name/],
      [Buffer.from('PK\x03\x04 not really a zip'), /not a zip file/],
    ];
    for (const [body, rule] of cases) {
      const r = await upload(alice, body);
      assert.equal(r.status, 400, `${rule}: ${r.text}`);
      assert.equal(r.json.code, 'SKILL_INVALID');
      assert.match(r.json.message, rule);
    }
    // a zip whose file unpacks past 10 MiB
    const big = zip([['SKILL.md', ok], ['big.txt', 'a'.repeat((10 << 20) + 1)]]);
    const rb = await upload(alice, big);
    assert.equal(rb.status, 400, rb.text);
    assert.match(rb.json.message, /a file may have at most 10485760/);
    // more than 20 MiB: refused before it is read (the Content-Length says
    // so; only 1 KiB is sent, so a server reading the body first never answers)
    const huge = await new Promise((resolve, reject) => {
      const u = new URL(base);
      const sock = net.connect(Number(u.port), u.hostname, () => {
        sock.write(`POST /api/skills HTTP/1.1\r\nHost: ${u.host}\r\nAuthorization: ${alice.auth.authorization}\r\nContent-Type: application/zip\r\nContent-Length: ${(20 << 20) + 1}\r\n\r\n`);
        sock.write(Buffer.alloc(1024, 0x41));
      });
      let got = '';
      sock.on('data', (d) => {
        got += d;
        if (/\r\n\r\n[\s\S]*\}/.test(got)) sock.destroy();
      });
      sock.on('close', () => resolve(got));
      sock.on('error', reject);
      setTimeout(() => sock.destroy(), 10000);
    });
    assert.match(huge, /^HTTP\/1\.1 413/);
    // a built-in's name
    const res = await upload(alice, md('presentation'));
    assert.equal(res.status, 409, res.text);
    assert.equal(res.json.code, 'SKILL_NAME_RESERVED');
    assert.equal(rows(alice.id), before, 'nothing stored');
  });

  test("another user's skill is 404 on every route; theirs are their own", async () => {
    for (const [method, p, json] of [
      ['GET', '/api/skills/haiku'],
      ['GET', '/api/skills/haiku/export'],
      ['PATCH', '/api/skills/haiku', { enabled: false }],
      ['DELETE', '/api/skills/haiku'],
    ]) {
      const r = await api(base, p, { method, json, ...as(bob) });
      assert.equal(r.status, 404, `${method} ${p}: ${r.text}`);
    }
    const list = await api(base, '/api/skills', as(bob));
    assert.deepEqual(list.json.skills.map((s) => s.name), BUILTINS);
    // bob may use the same name for his own
    assert.equal((await upload(bob, md('haiku', 'Bob\'s haiku.'))).status, 201);
    assert.equal((await api(base, '/api/skills/haiku', as(alice))).json.version, 2, 'alice keeps hers');
  });

  test('export re-imports to the same digest; built-ins export too', async () => {
    const mine = await api(base, '/api/skills/haiku', as(alice));
    const res = await fetch(`${base}/api/skills/haiku/export`, { headers: alice.auth });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'application/zip');
    assert.equal(res.headers.get('content-disposition'), 'attachment; filename="haiku.skill"');
    const bytes = Buffer.from(await res.arrayBuffer());
    const carol = makeUser(stack.pg);
    const r = await upload(carol, bytes, 'application/zip');
    assert.equal(r.status, 201, r.text);
    assert.equal(r.json.digest, mine.json.digest);
    // a built-in's export has the same digest as the built-in, and its name is reserved
    const b = await fetch(`${base}/api/skills/code-review/export`, { headers: carol.auth });
    assert.equal(b.status, 200);
    assert.equal(b.headers.get('x-skill-digest'), (await api(base, '/api/skills/code-review', as(carol))).json.digest);
    const rr = await upload(carol, Buffer.from(await b.arrayBuffer()));
    assert.equal(rr.status, 409);
  });

  test('an uploaded skill is in the catalogue, activated and its file read in a turn', async () => {
    const sid = await newSession(base, alice);
    const t = await turn(base, alice, sid, 'a poem please #scenario:haiku');
    assert.equal(t.end.state, 'done', JSON.stringify(t.end));
    const recs = ms.requests('haiku').filter((x) => x.last_user.includes('a poem please'));
    assert.match(recs[0].system, /<skill><name>haiku<\/name><description>Writes haiku\. Use for poems\.<\/description><\/skill>/);
    assert.match(recs[1].tool_result, /^<skill_content name="haiku" version="2" digest="[0-9a-f]{64}">\n# Haiku v2\nForms are in references\/forms\.md; the topic: the sea\./);
    assert.match(recs[1].tool_result, /<file>references\/forms\.md<\/file> \(17 bytes\)/);
    assert.equal(recs[2].tool_result, '5-7-5 syllables.\n');
  });

  test('a disabled skill is in neither the catalogue nor reachable; all disabled: no catalogue, no skill tools', async () => {
    const dave = makeUser(stack.pg);
    const off = await api(base, '/api/skills/presentation', { method: 'PATCH', json: { enabled: false }, ...as(dave) });
    assert.equal(off.status, 200, off.text);
    assert.equal(off.json.enabled, false);
    const list = await api(base, '/api/skills', as(dave));
    assert.deepEqual(list.json.skills.filter((s) => !s.enabled).map((s) => s.name), ['presentation']);
    const sid = await newSession(base, dave);
    const t = await turn(base, dave, sid, 'deck? #scenario:activate-disabled');
    const recs = ms.requests('activate-disabled').filter((x) => x.last_user.includes('deck?'));
    assert.doesNotMatch(recs[0].system, /<name>presentation<\/name>/);
    assert.match(recs[0].system, /<name>word-report<\/name>/);
    assert.equal(t.events.find((e) => e.event === 'tool_end').json.ok, false);
    assert.match(recs[1].tool_result, /no enabled skill is called "presentation"/);
    // /presentation is then an ordinary message
    const t2 = await turn(base, dave, sid, '/presentation now #scenario:talk');
    assert.equal(t2.end.state, 'done');
    assert.ok(!ms.requests('talk').at(-1).body.messages.some((m) => m.role === 'tool' && m.content.includes('name="presentation"')));
    // all off
    for (const n of BUILTINS) assert.equal((await api(base, `/api/skills/${n}`, { method: 'PATCH', json: { enabled: false }, ...as(dave) })).status, 200);
    const t3 = await turn(base, dave, sid, 'anything? #scenario:talk');
    assert.equal(t3.end.state, 'done');
    const rec = ms.requests('talk').at(-1);
    assert.doesNotMatch(rec.system, /## Skills|available_skills/);
    for (const tool of ['list_skills', 'activate_skill', 'read_skill_file', 'run_skill_script']) assert.ok(!rec.tools.includes(tool), tool);
    assert.ok(rec.tools.includes('plan_task'));
    // on again
    assert.equal((await api(base, '/api/skills/word-report', { method: 'PATCH', json: { enabled: true }, ...as(dave) })).json.enabled, true);
  });

  test('an admin installs a skill for everyone: every user sees and uses it, may disable it, cannot change it', async () => {
    // alice is the first account, so the admin; bob and erin are users
    const erin = makeUser(stack.pg);
    const body = md('team-style', 'Write in the team style. Use for any text the team publishes.', '# Team style\nShort sentences.\n');
    const no = await api(base, '/api/skills?for=everyone', { method: 'POST', body, headers: { ...bob.auth, 'content-type': 'text/markdown' } });
    assert.equal(no.status, 403, no.text);
    assert.match(no.json.message, /only an admin installs a skill for everyone/);
    assert.equal((await api(base, '/api/skills?for=all', { method: 'POST', body, headers: { ...alice.auth, 'content-type': 'text/markdown' } })).status, 400);
    const up = await api(base, '/api/skills?for=everyone', { method: 'POST', body, headers: { ...alice.auth, 'content-type': 'text/markdown' } });
    assert.equal(up.status, 201, up.text);
    assert.deepEqual([up.json.shared, up.json.mine], [true, true]);
    // bob and erin see it, not as theirs; it is in a turn's catalogue
    for (const u of [bob, erin]) {
      const l = await api(base, '/api/skills', as(u));
      const t = l.json.skills.find((x) => x.name === 'team-style');
      assert.ok(t, 'listed');
      assert.deepEqual([t.shared, t.mine, t.builtin, t.enabled], [true, false, false, true]);
    }
    const sid = await newSession(base, erin);
    await turn(base, erin, sid, 'hello team #scenario:talk');
    assert.match(ms.requests('talk').at(-1).system, /<skill><name>team-style<\/name>/);
    // a user cannot change or delete it, may disable it for themselves only
    const v = await api(base, '/api/skills/team-style', { method: 'PATCH', json: { version: 1 }, ...as(bob) });
    assert.equal(v.status, 403);
    assert.equal(v.json.code, 'SKILL_SHARED');
    assert.equal((await api(base, '/api/skills/team-style', { method: 'DELETE', ...as(bob) })).status, 403);
    const off = await api(base, '/api/skills/team-style', { method: 'PATCH', json: { enabled: false }, ...as(bob) });
    assert.equal(off.status, 200, off.text);
    assert.equal(off.json.enabled, false);
    assert.equal((await api(base, '/api/skills', as(erin))).json.skills.find((x) => x.name === 'team-style').enabled, true);
    // a user's own upload of that name is refused, nothing stored
    const before = rows(bob.id);
    const mine = await upload(bob, body, 'text/markdown');
    assert.equal(mine.status, 409);
    assert.equal(mine.json.code, 'SKILL_NAME_SHARED');
    assert.equal(rows(bob.id), before);
    // exported by a user like any skill they see
    assert.equal((await api(base, '/api/skills/team-style/export', as(erin))).status, 200);
    // the admin deletes it: gone for everyone
    assert.equal((await api(base, '/api/skills/team-style', { method: 'DELETE', ...as(alice) })).status, 204);
    assert.equal((await api(base, '/api/skills/team-style', as(erin))).status, 404);
  });

  test('delete: an own skill goes with its versions and files; a built-in cannot', async () => {
    assert.equal((await api(base, '/api/skills/haiku', { method: 'DELETE', ...as(alice) })).status, 204);
    assert.equal((await api(base, '/api/skills/haiku', as(alice))).status, 404);
    assert.equal(rows(alice.id), '1,1,0');
    const b = await api(base, '/api/skills/presentation', { method: 'DELETE', ...as(alice) });
    assert.equal(b.status, 409);
    assert.equal(b.json.code, 'SKILL_BUILTIN');
  });
});
