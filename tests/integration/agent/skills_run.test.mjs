// Each built-in skill run end to end in a real sandbox, through the agent loop
// with the scripted model sending the calls a model following the skill's
// SKILL.md would: activate_skill, write_file of the input the skill's
// reference describes, run_skill_script of its scripts, then a download of
// the artefact, checked from outside the sandbox (Info-ZIP reads the office
// files; their parts are counted and looked into):
//   presentation   deck.json -> deck.pptx with six slides and six notes,
//                  preview_deck.py's check of it passing, previewed as six pictures
//   financial-model model.json -> model.xlsx with live formulas, check_model.py passing
//   word-report    report.md -> report.docx with numbered headings and a table
//   security-audit scan.py finds the planted eval() and key in a small project
//   code-review    review_prep.py over two folders names the changed file and the added lines
// A script that fails answers its exit code and stderr as a tool error.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { stopAll, tmpdir } from '../../lib/harness.mjs';
import { KEY, startSandboxd } from '../sandboxd/sbx.mjs';
import { api, makeUser, newSession, startModels, startTusko, turn } from './lib.mjs';

const call = (name, args) => ({ name, arguments: args });
const run = (skill, script, args) => call('run_skill_script', { name: skill, script, args });
const write = (p, content) => call('write_file', { path: p, content });

const DECK = {
  title: 'Q3 review',
  author: 'Tusko',
  slides: [
    { layout: 'title', title: 'Q3 in review', subtitle: 'October 2026', notes: 'Welcome everyone.' },
    { layout: 'bullets', title: 'Revenue grew faster than planned', bullets: ['Revenue up 18% on Q2', 'Two new enterprise customers', '  both in retail'], notes: 'Start with the headline.' },
    { layout: 'chart', title: 'Revenue by month climbed steadily', chart: { type: 'bar', categories: ['Jul', 'Aug', 'Sep'], series: [{ name: 'Revenue', values: [410, 455, 512] }], unit: 'k EUR' }, notes: 'September was the best month.' },
    { layout: 'table', title: 'Costs stayed within budget', table: { header: ['Item', 'Plan', 'Actual'], rows: [['People', '300', '296'], ['Cloud', '80', '77']] }, notes: 'Cloud savings came from reserved instances.' },
    { layout: 'two-column', title: 'What went well and what did not', bullets: ['Sales cycle shorter'], right: ['Hiring slower than planned'], notes: 'Be candid about hiring.' },
    { layout: 'closing', title: 'Questions?', subtitle: 'Thank you', notes: 'Open the floor.' },
  ],
};
const MODEL = {
  title: 'Shop forecast',
  periods: ['2026', '2027', '2028'],
  inputs: [
    { name: 'start_revenue', label: 'Revenue in the first year', unit: 'EUR', base: 100000, upside: 120000, downside: 80000 },
    { name: 'growth', label: 'Growth a year', unit: '%', base: 0.1, upside: 0.2, downside: 0.02 },
    { name: 'margin', label: 'Margin', unit: '%', base: 0.3 },
  ],
  lines: [
    { name: 'revenue', label: 'Revenue', first: 'start_revenue', next: 'prev * (1 + growth)', format: 'money', total: 'sum' },
    { name: 'profit', label: 'Profit', formula: 'revenue * margin', format: 'money', total: 'sum' },
  ],
  chart: { title: 'Revenue and profit', lines: ['revenue', 'profit'] },
};
const REPORT = `---
title: Quarterly report
author: Tusko
---

# Summary

Revenue grew **18%** on the quarter.

# Details

## Costs

Table: Costs against plan

| Item | Plan | Actual |
|---|---:|---:|
| People | 300 | 296 |
| Cloud | 80 | 77 |

## Outlook

- Hire two engineers
- Open the Berlin office
`;

const SCENARIOS = {
  deck: {
    steps: [
      { tool_calls: [call('activate_skill', { name: 'presentation' }), write('deck.json', JSON.stringify(DECK, null, 2))] },
      { tool_calls: [run('presentation', 'scripts/build_deck.js', ['deck.json', 'deck.pptx'])] },
      { tool_calls: [run('presentation', 'scripts/preview_deck.py', ['deck.json', 'preview'])] },
      // the skill's last step: every slide looked at as a picture (the preview tool)
      { tool_calls: [call('preview', { path: 'deck.pptx' })] },
      { text: 'The deck is ready.' },
    ],
  },
  model: {
    steps: [
      { tool_calls: [call('activate_skill', { name: 'financial-model' }), write('model.json', JSON.stringify(MODEL, null, 2))] },
      { tool_calls: [run('financial-model', 'scripts/build_model.py', ['model.json', 'model.xlsx'])] },
      { tool_calls: [run('financial-model', 'scripts/check_model.py', ['model.xlsx'])] },
      { text: 'The model is ready.' },
    ],
  },
  report: {
    steps: [
      { tool_calls: [call('activate_skill', { name: 'word-report' }), write('report.md', REPORT)] },
      { tool_calls: [run('word-report', 'scripts/build_report.py', ['report.md', 'report.docx'])] },
      { text: 'The report is ready.' },
    ],
  },
  audit: {
    steps: [
      {
        tool_calls: [
          call('activate_skill', { name: 'security-audit' }),
          write('app/handler.py', 'import os\n\ndef handle(q):\n    return eval(q)\n'),
          write('app/settings.py', 'AWS_KEY = "AKIAABCDEFGHIJKLMNOP"\n'),
        ],
      },
      { tool_calls: [run('security-audit', 'scripts/scan.py', ['/workspace/app', '--out', '/workspace/audit/scan.json'])] },
      { text: 'Scanned.' },
    ],
  },
  review: {
    steps: [
      {
        tool_calls: [
          call('activate_skill', { name: 'code-review' }),
          write('before/calc.py', 'def add(a, b):\n    return a + b\n'),
          write('after/calc.py', 'def add(a, b):\n    # TODO: overflow\n    print(a, b)\n    return a + b\n'),
        ],
      },
      { tool_calls: [run('code-review', 'scripts/review_prep.py', ['before', 'after'])] },
      { text: 'Prepared.' },
    ],
  },
  failing: {
    steps: [{ tool_calls: [run('word-report', 'scripts/build_report.py', ['missing.md', 'out.docx'])] }, { text: 'It failed.' }],
  },
};

describe('the built-in skills in a real sandbox', () => {
  let ms, sbx, stack, base, user, work;

  before(async () => {
    ms = await startModels({ scenarios: SCENARIOS });
    sbx = await startSandboxd({ env: { SANDBOX_WARM_POOL_SIZE: '1' } });
    stack = await startTusko(ms, { env: { OPENSANDBOX_URL: sbx.url, OPENSANDBOX_API_KEY: KEY, TUSKO_COMMAND_TIMEOUT: '120s', MAX_SANDBOXES_PER_USER: '10' }, tag: 'skills_run' });
    base = stack.tusko.url;
    user = makeUser(stack.pg);
    work = tmpdir('skills-run-');
  });
  after(async () => {
    const r = await sbx.api.list('?pageSize=200');
    for (const s of r.json.items || []) await sbx.api.del(s.id);
    await stopAll();
    await ms.close();
  });

  // runs a scenario in a new chat: the turn's tool_end events by name, in order
  const runSkill = async (scenario) => {
    const sid = await newSession(base, user);
    const t = await turn(base, user, sid, `go #scenario:${scenario}`, {}, { timeoutMs: 240000 });
    assert.equal(t.end.state, 'done', JSON.stringify(t.end));
    const ends = t.events.filter((e) => e.event === 'tool_end').map((e) => e.json);
    return { sid, ends };
  };
  const scriptResults = (ends) => ends.filter((e) => e.name === 'run_skill_script');
  // downloads a workspace file through the API into work/: its local path
  const fetchFile = async (sid, p) => {
    const dl = await api(base, `/api/sessions/${sid}/files/download`, { json: { path: p }, headers: user.auth });
    assert.equal(dl.status, 201, dl.text);
    const got = await fetch(base + dl.json.url, { headers: user.auth });
    assert.equal(got.status, 200);
    const local = path.join(work, `${sid}-${path.basename(p)}`);
    fs.writeFileSync(local, Buffer.from(await got.arrayBuffer()));
    return local;
  };
  const unzipList = (file) => {
    const t = spawnSync('unzip', ['-tq', file], { encoding: 'utf8' });
    assert.equal(t.status, 0, `unzip -t ${file}: ${t.stdout}${t.stderr}`);
    const l = spawnSync('unzip', ['-Z1', file], { encoding: 'utf8' });
    const names = l.stdout.split('\n').filter(Boolean);
    assert.equal(new Set(names).size, names.length, 'no duplicate zip entries');
    return names;
  };
  const member = (file, name) => spawnSync('unzip', ['-p', file, name], { encoding: 'utf8', maxBuffer: 64 << 20 }).stdout;

  test('presentation: a six-slide deck with speaker notes, and its check passes', async () => {
    const { sid, ends } = await runSkill('deck');
    assert.deepEqual(ends.slice(0, 2).map((e) => [e.name, e.ok]), [['activate_skill', true], ['write_file', true]]);
    const [build, check] = scriptResults(ends);
    assert.equal(build.ok, true, build.result);
    assert.match(build.result, /exit code 0/);
    assert.equal(check.ok, true, check.result);
    // the skill is copied into the sandbox by its first script, not again
    assert.match(build.result, /\(copied the skill into \/workspace\/\.skills\/presentation\/\)/);
    assert.doesNotMatch(check.result, /copied the skill/);
    const names = unzipList(await fetchFile(sid, 'deck.pptx'));
    assert.equal(names.filter((n) => /^ppt\/slides\/slide\d+\.xml$/.test(n)).length, 6, names.join(' '));
    assert.equal(names.filter((n) => /^ppt\/notesSlides\/notesSlide\d+\.xml$/.test(n)).length, 6);
    const f = path.join(work, `${sid}-deck.pptx`);
    const notes = names.filter((n) => /^ppt\/notesSlides\/notesSlide\d+\.xml$/.test(n)).map((n) => member(f, n)).join('\n');
    for (const s of DECK.slides) assert.ok(notes.includes(s.notes), `the notes "${s.notes}"`);
    assert.ok(names.some((n) => /^ppt\/charts\/chart\d+\.xml$/.test(n)), 'a native chart');
    // previewed as six pictures, each slide with its notes
    const pv = ends.find((e) => e.name === 'preview');
    assert.equal(pv.ok, true, pv.result);
    assert.equal(pv.data.page_count, 6);
    assert.deepEqual(pv.data.pages.map((p) => p.mime), Array(6).fill('image/png'));
    DECK.slides.forEach((sl, i) => assert.ok(pv.data.pages[i].notes.includes(sl.notes), `slide ${i + 1}'s notes`));
  });

  test('financial-model: a workbook of live formulas over an Inputs sheet, and its check passes', async () => {
    const { sid, ends } = await runSkill('model');
    const [build, check] = scriptResults(ends);
    assert.equal(build.ok, true, build.result);
    assert.equal(check.ok, true, check.result);
    assert.match(check.result, /Model sheet: \d+ formulas, 0 pasted constants/);
    const f = await fetchFile(sid, 'model.xlsx');
    const names = unzipList(f);
    const wb = member(f, 'xl/workbook.xml');
    assert.match(wb, /name="Inputs"/);
    assert.match(wb, /name="Model"/);
    const sheets = names.filter((n) => /^xl\/worksheets\/sheet\d+\.xml$/.test(n)).map((n) => member(f, n)).join('\n');
    assert.match(sheets, /<f>CHOOSE\(/, 'the Selected column chooses by the scenario');
    assert.ok((sheets.match(/<f>/g) || []).length >= 10, 'formulas, not pasted values');
  });

  test('word-report: a document with numbered headings and a captioned table', async () => {
    const { sid, ends } = await runSkill('report');
    const [build] = scriptResults(ends);
    assert.equal(build.ok, true, build.result);
    assert.match(build.result, /wrote report\.docx: 4 headings, 0 figures, 1 tables/);
    const f = await fetchFile(sid, 'report.docx');
    unzipList(f);
    const doc = member(f, 'word/document.xml');
    assert.match(doc, /w:val="Heading1"/);
    assert.match(doc, /w:val="Heading2"/);
    assert.match(doc, /<w:tbl>/);
    assert.ok(doc.includes('Costs against plan'), 'the caption');
    assert.ok(doc.includes('Open the Berlin office'), 'the list');
  });

  test('security-audit: the scan finds the planted eval() and key and writes its JSON', async () => {
    const { sid, ends } = await runSkill('audit');
    const [scan] = scriptResults(ends);
    assert.equal(scan.ok, true, scan.result);
    assert.match(scan.result, /scanned 2 files under \/workspace\/app: \d+ leads/);
    const report = JSON.parse(fs.readFileSync(await fetchFile(sid, 'audit/scan.json'), 'utf8'));
    assert.equal(report.files_scanned, 2);
    const hits = report.leads.map((h) => `${h.rule} ${h.path}:${h.line}`);
    assert.ok(hits.includes('code-eval handler.py:4'), hits.join(', '));
    assert.ok(hits.includes('secret-aws-key settings.py:1'), hits.join(', '));
  });

  test('code-review: the overview names the changed file, its added lines and the markers in them', async () => {
    const { ends } = await runSkill('review');
    const [prep] = scriptResults(ends);
    assert.equal(prep.ok, true, prep.result);
    assert.match(prep.result, /1 files changed, \+2 -0; tests changed: 0/);
    assert.match(prep.result, /calc\.py {2}\+2 -0/);
    assert.match(prep.result, /\[todo\]/);
    assert.match(prep.result, /\[debug-output\]/);
    assert.match(prep.result, /no test file changed/);
  });

  test('a script that fails is a tool error with its exit code and what it printed', async () => {
    const { ends } = await runSkill('failing');
    const [r] = scriptResults(ends);
    assert.equal(r.ok, false);
    assert.match(r.result, /exit code [1-9]/);
    assert.match(r.result, /build_report: .*missing\.md/);
  });
});
