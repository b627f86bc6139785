// Skills through the agent loop, against the scripted model server and a real
// Postgres: the first request carries the catalogue of the enabled skills
// (names and descriptions) but no skill's body; after activate_skill the next
// request carries the body and the skill's file list, not the references;
// read_skill_file returns one reference and nothing outside the skill; a
// message starting with "/name args" puts the body (with $ARGUMENTS replaced)
// in the first request, stored so the next turn still has it; each activation
// is a span with the skill's name, version and digest; a talk turn with skills
// starts no sandbox (the sandbox service configured here does not exist, so
// any attempt would show); SKILLS_PROMPT_BUDGET bounds the catalogue, the rest
// named by list_skills.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { ROOT, stopAll } from '../../lib/harness.mjs';
import { api, makeUser, messages, newSession, startModels, startTusko, turn } from './lib.mjs';

const BUILTINS = ['code-review', 'financial-model', 'presentation', 'security-audit', 'word-report'];
const skillMd = (name) => fs.readFileSync(path.join(ROOT, 'skills', name, 'SKILL.md'), 'utf8');
const bodyOf = (name) => skillMd(name).split(/^---$/m).slice(2).join('---').replace(/^\n+/, '');
const descriptionOf = (name) => /^description: (.*)$/m.exec(skillMd(name))[1];

const SCENARIOS = {
  talk: { steps: [{ text: 'Just talking.' }] },
  activate: {
    steps: [
      { tool_calls: [{ name: 'activate_skill', arguments: { name: 'presentation' } }] },
      { tool_calls: [{ name: 'read_skill_file', arguments: { name: 'presentation', path: 'references/deck-schema.md' } }] },
      {
        tool_calls: [
          { name: 'read_skill_file', arguments: { name: 'presentation', path: '../financial-model/SKILL.md' } },
          { name: 'read_skill_file', arguments: { name: 'presentation', path: '/etc/passwd' } },
          { name: 'activate_skill', arguments: { name: 'no-such-skill' } },
        ],
      },
      { text: 'done' },
    ],
  },
  // a "/name" message: the activation is an assistant message already, so the
  // first request the model sees is this scenario's step 1
  invoked: { steps: [{ text: 'not asked' }, { text: 'auditing' }] },
  list: { steps: [{ tool_calls: [{ name: 'list_skills', arguments: {} }] }, { text: 'listed' }] },
};

describe('skills in turns', () => {
  let ms, stack, base, small;

  before(async () => {
    ms = await startModels({ scenarios: SCENARIOS });
    // the sandbox lane on, pointing at nothing: a sandbox asked for would fail the turn
    stack = await startTusko(ms, { env: { OPENSANDBOX_URL: 'http://127.0.0.1:9', OPENSANDBOX_API_KEY: 'k-never-used' }, tag: 'skills' });
    base = stack.tusko.url;
    small = await startTusko(ms, { env: { SKILLS_PROMPT_BUDGET: '700' }, tag: 'skills_small' });
  });
  after(async () => {
    await stopAll();
    await ms.close();
  });

  test('the first request has the catalogue and the skill tools, no body; no sandbox is started', async () => {
    const u = makeUser(stack.pg);
    const sid = await newSession(base, u);
    const t = await turn(base, u, sid, 'hello there #scenario:talk');
    assert.equal(t.end.state, 'done', JSON.stringify(t.end));
    const rec = ms.requests('talk').at(-1);
    assert.match(rec.system, /## Skills\n/);
    const cat = /<available_skills>\n([\s\S]*?)<\/available_skills>/.exec(rec.system);
    assert.ok(cat, rec.system);
    const names = [...cat[1].matchAll(/<skill><name>([a-z-]+)<\/name><description>(.*?)<\/description><\/skill>/g)];
    assert.deepEqual(names.map((m) => m[1]), BUILTINS);
    for (const m of names) assert.equal(m[2], descriptionOf(m[1]));
    for (const n of BUILTINS) assert.ok(!rec.system.includes(bodyOf(n).slice(0, 200)), `no body of ${n}`);
    assert.ok(rec.system.length <= 8000);
    for (const tool of ['list_skills', 'activate_skill', 'read_skill_file', 'run_skill_script']) assert.ok(rec.tools.includes(tool), tool);
    assert.ok(!t.events.some((e) => e.event === 'sandbox_spawn' || e.event === 'error'), t.events.map((e) => e.event).join(','));
    const tr = await api(base, `/api/turns/${t.turnId}/trace`, { headers: u.auth });
    const span = tr.json.spans.find((s) => s.kind === 'skills');
    assert.ok(span, tr.text);
    assert.equal(span.attrs.enabled, 5);
    assert.equal(span.attrs.shown, 5);
    assert.deepEqual(span.attrs.skills, BUILTINS);
    assert.equal(span.attrs.budget, 2500);
    assert.ok(span.attrs.chars <= 2500);
  });

  test('activate_skill hands over the body and the file list; read_skill_file one reference, nothing outside', async () => {
    const u = makeUser(stack.pg);
    const sid = await newSession(base, u);
    const t = await turn(base, u, sid, 'make me a deck #scenario:activate');
    assert.equal(t.end.state, 'done', JSON.stringify(t.end));
    const recs = ms.requests('activate').filter((r) => r.last_user.includes('make me a deck'));
    assert.equal(recs.length, 4);
    const body = bodyOf('presentation');
    const schema = fs.readFileSync(path.join(ROOT, 'skills/presentation/references/deck-schema.md'), 'utf8');
    // request 1: the catalogue, no body
    assert.ok(!JSON.stringify(recs[0].body.messages).includes(body.slice(0, 300)));
    // request 2: the body (front matter stripped) and the files, not the references' text
    const r2 = recs[1].tool_result;
    assert.ok(r2.startsWith('<skill_content name="presentation" version="1" digest="'), r2.slice(0, 200));
    assert.ok(r2.includes(body.trimEnd()), 'the whole body');
    assert.ok(!r2.includes('description: Build a slide deck'), 'no front matter');
    for (const f of ['references/deck-schema.md', 'scripts/build_deck.js', 'scripts/preview_deck.py']) assert.ok(r2.includes(`<file>${f}</file>`), f);
    assert.ok(!r2.includes(schema.slice(0, 200)), 'references are listed, not read');
    // request 3: the reference asked for
    assert.equal(recs[2].tool_result, schema);
    // request 4: a path outside the skill and an unknown skill refused
    // (the three of one answer run in parallel: they end in any order)
    const ends = t.events.filter((e) => e.event === 'tool_end').map((e) => e.json);
    assert.deepEqual(ends.slice(0, 2).map((e) => [e.name, e.ok]), [
      ['activate_skill', true],
      ['read_skill_file', true],
    ]);
    const refused = ends.slice(2);
    assert.deepEqual(refused.map((e) => [e.name, e.ok]).sort(), [
      ['activate_skill', false],
      ['read_skill_file', false],
      ['read_skill_file', false],
    ]);
    assert.ok(refused.some((e) => /has no file "\.\.\/financial-model\/SKILL\.md"/.test(e.result)));
    assert.ok(refused.some((e) => /has no file "\/etc\/passwd"/.test(e.result)));
    const last3 = recs[3].body.messages.slice(-3).map((m) => m.content);
    assert.ok(last3.every((c) => !c.includes('financial model as an Excel') && !c.includes('root:')), JSON.stringify(last3));
    assert.ok(
      refused.some((e) => /no enabled skill is called "no-such-skill" \(enabled: code-review, financial-model, presentation, security-audit, word-report\)/.test(e.result)),
    );
    assert.ok(ends.every((e) => e.lane === 'fast'));
    assert.ok(!t.events.some((e) => e.event === 'sandbox_spawn'));
    // the activation's span: name, version, digest (the one the model was given)
    const digest = /digest="([0-9a-f]{64})"/.exec(r2)[1];
    const tr = await api(base, `/api/turns/${t.turnId}/trace`, { headers: u.auth });
    const spans = tr.json.spans.filter((s) => s.kind === 'skill');
    assert.equal(spans.length, 1, tr.text);
    assert.deepEqual([spans[0].name, spans[0].attrs.skill, spans[0].attrs.version, spans[0].attrs.digest], ['presentation', 'presentation', 1, digest]);
  });

  test('"/name args" activates the skill before the model runs, $ARGUMENTS replaced, kept for the next turn', async () => {
    const u = makeUser(stack.pg);
    const sid = await newSession(base, u);
    const t = await turn(base, u, sid, '/security-audit the upload handler #scenario:invoked');
    assert.equal(t.end.state, 'done', JSON.stringify(t.end));
    const rec = ms.requests('invoked').at(-1);
    assert.equal(rec.step, 1);
    const msgs = rec.body.messages;
    const call = msgs.at(-2);
    assert.equal(call.role, 'assistant');
    assert.equal(call.tool_calls[0].function.name, 'activate_skill');
    assert.deepEqual(JSON.parse(call.tool_calls[0].function.arguments), { name: 'security-audit', arguments: 'the upload handler #scenario:invoked' });
    const res = msgs.at(-1);
    assert.equal(res.role, 'tool');
    assert.equal(res.tool_call_id, call.tool_calls[0].id);
    assert.ok(res.content.startsWith('<skill_content name="security-audit"'));
    assert.ok(res.content.includes('What the user asked to audit: "the upload handler #scenario:invoked".'), res.content.slice(0, 1200));
    assert.ok(!res.content.includes('$ARGUMENTS'));
    assert.ok(res.content.includes('<file>scripts/scan.py</file>'));
    // stored: the next turn's request still has it
    const stored = await messages(base, u, sid);
    assert.deepEqual(stored.map((m) => m.role), ['user', 'assistant', 'tool', 'assistant']);
    const t2 = await turn(base, u, sid, 'and now? #scenario:talk');
    assert.equal(t2.end.state, 'done');
    const rec2 = ms.requests('talk').at(-1);
    assert.ok(rec2.body.messages.some((m) => m.role === 'tool' && m.content.startsWith('<skill_content name="security-audit"')));
    // the span says the user invoked it
    const tr = await api(base, `/api/turns/${t.turnId}/trace`, { headers: u.auth });
    const span = tr.json.spans.find((s) => s.kind === 'skill');
    assert.ok(span, tr.text);
    assert.equal(span.attrs.invoked_by, 'user');
    assert.match(span.attrs.digest, /^[0-9a-f]{64}$/);
    // a "/word" that is no skill is an ordinary message
    const sid2 = await newSession(base, u);
    const t3 = await turn(base, u, sid2, '/presentations are hard #scenario:talk');
    assert.equal(t3.end.state, 'done');
    assert.equal(ms.requests('talk').at(-1).body.messages.filter((m) => m.role === 'tool').length, 0);
  });

  test('SKILLS_PROMPT_BUDGET bounds the catalogue; list_skills names them all', async () => {
    const u = makeUser(small.pg);
    const sid = await newSession(small.tusko.url, u);
    const t = await turn(small.tusko.url, u, sid, 'which skills? #scenario:list');
    assert.equal(t.end.state, 'done', JSON.stringify(t.end));
    const rec = ms.requests('list').find((r) => r.last_user.includes('which skills?'));
    const cat = /<available_skills>\n([\s\S]*?)<\/available_skills>/.exec(rec.system)[0];
    assert.ok(cat.length <= 700, `${cat.length}`);
    const shown = [...cat.matchAll(/<name>([a-z-]+)<\/name>/g)].map((m) => m[1]);
    assert.ok(shown.length >= 1 && shown.length < 5, shown.join());
    assert.match(rec.system, /list_skills names them all/);
    const end = t.events.find((e) => e.event === 'tool_end').json;
    assert.deepEqual(end.data.skills.map((s) => s.name), BUILTINS);
    for (const n of BUILTINS) assert.ok(end.result.includes(`- ${n}: ${descriptionOf(n)}`));
  });
});
