// The Memory tab and subagents in the web UI (execution off: nothing here
// needs a sandbox). Documents: upload (Markdown, CSV, PDF), list, view the
// chunks, delete with a confirmation (cancel, then confirm). Memories and
// facts the agent remembered in a chat: listed when the turn ends, searched,
// deleted; an entity's dated facts drawn as a timeline (the open one marked),
// and deleting the newest reopens the one it had closed. A delegate_subagent
// card shows its subagent nested inside (its own tool card and text). The
// Trace shows the memories offered at the start of a turn.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { stopAll } from '../lib/harness.mjs';
import { launchBrowser, newPage, screenshot, send, signIn, startStack } from './lib.mjs';

const lives = (city, from) => ({ name: 'remember', arguments: { fact: { subject: 'Ada Quist', predicate: 'lives in', object: city, valid_from: from } } });
const scenarios = {
  'ui-remember': {
    steps: [
      {
        text: 'Noting that.',
        tool_calls: [
          lives('Paris', '2019-01-01'),
          lives('Berlin', '2021-06-01'),
          lives('Rome', '2023-03-15'),
          { name: 'remember', arguments: { note: 'Ada drinks green tea every morning.' } },
          { name: 'remember', arguments: { note: 'The quarterly report is due on Fridays.' } },
        ],
      },
      { text: 'Remembered.' },
    ],
  },
  'ui-delegate': {
    steps: [
      { tool_calls: [{ name: 'delegate_subagent', arguments: { role: 'researcher', task: 'What does Ada drink? #scenario:ui-researcher' } }] },
      { text: 'The researcher found it.' },
    ],
  },
  'ui-researcher': {
    steps: [
      { text: 'Looking in memory.', tool_calls: [{ name: 'search_chunks', arguments: { query: 'Ada tea' } }] },
      { text: 'Ada drinks **green tea**.' },
    ],
  },
  'ui-recall-tea': { steps: [{ text: 'You told me about the tea.' }] },
};

const PDF =
  '%PDF-1.4\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n2 0 obj << /Type /Pages /Kids [3 0 R] /Count 1 >> endobj\n' +
  '3 0 obj << /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >> endobj\n' +
  '4 0 obj << /Length 58 >> stream\nBT /F1 18 Tf 72 700 Td (The quokka census was held) Tj ET\nendstream endobj\n' +
  '5 0 obj << /Type /Font /Subtype /Type1 /BaseFont /Helvetica >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n';

let stack, browser;
const EMAIL = 'ada@example.com';

before(async () => {
  stack = await startStack({ scenarios, tag: 'e2e_mem' });
  stack.addUser(EMAIL);
  browser = await launchBrowser();
});

after(async () => {
  if (browser) await browser.close();
  if (stack) await stack.stop();
  await stopAll();
});

describe('the Memory tab', () => {
  let page, context, problems;
  const pane = () => page.locator('#pane-memory');
  const openTab = async (section) => {
    if (!(await page.locator('#panel').isVisible())) await page.locator('#panel-toggle').click();
    await page.locator('#tab-memory').click();
    await pane().locator(`button.seg[data-section="${section}"]`).click();
  };

  // sends a message and waits for ITS turn to end (not an earlier one's)
  const ask = async (text) => {
    const n = await page.locator('article.turn').count();
    await send(page, text);
    await page.waitForFunction((k) => document.querySelectorAll('article.turn').length > k, n);
    await page.waitForFunction(() => [...document.querySelectorAll('article.turn')].pop().dataset.state === 'done');
  };

  before(async () => {
    ({ page, context, problems } = await newPage(browser));
    await signIn(page, stack.base, EMAIL);
  });
  after(async () => {
    if (!context) return;
    assert.deepEqual(problems.errors, []);
    assert.deepEqual(problems.csp, []);
    assert.deepEqual(problems.dialogs, []);
    await context.close();
  });

  test('documents: upload Markdown, CSV and PDF, view the chunks, delete with a confirmation', async () => {
    await openTab('documents');
    await pane().locator('.docs .none', { hasText: 'No documents yet' }).waitFor();
    await pane().locator('input[type="file"]').setInputFiles([
      { name: 'guide.md', mimeType: 'text/markdown', buffer: Buffer.from('# Field guide\n\n## Quokkas\n\nQuokkas live on Rottnest Island and smile a lot.\n') },
      { name: 'counts.csv', mimeType: 'text/csv', buffer: Buffer.from('animal,count\nquokka,12000\nwombat,40\n') },
      { name: 'census.pdf', mimeType: 'application/pdf', buffer: Buffer.from(PDF) },
    ]);
    const items = pane().locator('.docs li.doc');
    await page.waitForFunction(() => document.querySelectorAll('#pane-memory .docs li.doc').length === 3);
    const titles = await items.locator('.doc-title').allInnerTexts();
    assert.ok(titles.includes('Field guide'), titles.join(','));
    assert.match(await items.filter({ hasText: 'Field guide' }).locator('.meta').innerText(), /\d+ chunks?/);
    // view: the chunks with their heading path
    await items.filter({ hasText: 'Field guide' }).locator('.doc-open').click();
    await pane().locator('.chunk-text', { hasText: 'Quokkas live on Rottnest Island' }).waitFor();
    assert.match(await pane().locator('.chunk-heading').first().innerText(), /Field guide > Quokkas/);
    await pane().locator('.doc-view').getByRole('button', { name: 'Back' }).click();
    await pane().locator('.docs li.doc').first().waitFor();
    // the PDF was extracted (in the isolated helper) and is searchable text
    await items.filter({ hasText: 'census' }).locator('.doc-open').click();
    await pane().locator('.chunk-text', { hasText: 'quokka census' }).waitFor();
    await pane().locator('.doc-view').getByRole('button', { name: 'Back' }).click();
    // delete: cancel keeps it, confirm removes it
    const csv = pane().locator('.docs li.doc').filter({ hasText: 'counts' });
    await csv.locator('.icon-btn').click();
    const dialog = page.getByRole('dialog', { name: 'Delete this document?' });
    await dialog.waitFor();
    assert.match(await dialog.locator('.what').innerText(), /chunks will be deleted/);
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await dialog.waitFor({ state: 'hidden' });
    assert.equal(await pane().locator('.docs li.doc').count(), 3);
    await csv.locator('.icon-btn').click();
    await dialog.getByRole('button', { name: 'Delete' }).click();
    await page.waitForFunction(() => document.querySelectorAll('#pane-memory .docs li.doc').length === 2);
    const left = await page.evaluate(() => fetch('/api/utopia/documents').then((r) => r.json()));
    assert.deepEqual(left.documents.map((d) => d.title).sort(), titles.filter((t) => !/counts/.test(t)).sort());
  });

  test('memories and facts the agent remembered: listed, searched, timeline, deleted', async () => {
    await ask('Remember these things about Ada #scenario:ui-remember');
    await openTab('memories');
    const mems = pane().locator('.memories li.memory');
    await page.waitForFunction(() => document.querySelectorAll('#pane-memory .memories li.memory').length === 2);
    // search
    await pane().locator('.mem-section[aria-label="Memories"] input[type="search"]').fill('tea');
    await page.waitForFunction(() => document.querySelectorAll('#pane-memory .memories li.memory').length === 1);
    assert.match(await mems.first().innerText(), /green tea/);
    await pane().locator('.mem-section[aria-label="Memories"] input[type="search"]').fill('');
    await page.waitForFunction(() => document.querySelectorAll('#pane-memory .memories li.memory').length === 2);
    // delete the report note (confirmed)
    await mems.filter({ hasText: 'quarterly report' }).locator('.icon-btn').click();
    await page.getByRole('dialog', { name: 'Delete this memory?' }).getByRole('button', { name: 'Delete' }).click();
    await page.waitForFunction(() => document.querySelectorAll('#pane-memory .memories li.memory').length === 1);

    // facts: one entity, its lives_in timeline: three bars, the last one open
    await openTab('facts');
    const ada = pane().locator('section.entity[data-entity="Ada Quist"]');
    await ada.waitFor();
    const bars = ada.locator('.tl-bar');
    assert.equal(await bars.count(), 3);
    assert.deepEqual(await bars.locator('.tl-label').allInnerTexts(), ['Paris', 'Berlin', 'Rome']);
    assert.equal(await ada.locator('.tl-bar.open').count(), 1);
    assert.equal(await ada.locator('.tl-bar.open .tl-label').innerText(), 'Rome');
    // bars do not overlap and run left to right
    const boxes = await bars.evaluateAll((els) => els.map((e) => e.getBoundingClientRect()).map((r) => [r.left, r.right]));
    for (let i = 1; i < boxes.length; i++) assert.ok(boxes[i][0] >= boxes[i - 1][1] - 1.5, JSON.stringify(boxes));
    const rows = await ada.locator('li.fact').allInnerTexts();
    assert.ok(rows.some((r) => /lives_in Paris/.test(r) && /2019-01-01 → 2021-06-01/.test(r)), rows.join('|'));
    assert.ok(rows.some((r) => /lives_in Rome/.test(r) && /2023-03-15 → now/.test(r)), rows.join('|'));
    await screenshot(page, 'memory-facts-desktop-light');
    // search by entity
    await pane().locator('.mem-section[aria-label="Facts"] input[type="search"]').fill('Ada Quist');
    await ada.waitFor();
    // delete Rome: Berlin is true again (the timeline reopens it)
    await ada.locator('li.fact', { hasText: 'Rome' }).locator('.icon-btn').click();
    await page.getByRole('dialog', { name: 'Delete this fact?' }).getByRole('button', { name: 'Delete' }).click();
    await page.waitForFunction(() => document.querySelectorAll('#pane-memory section.entity .tl-bar').length === 2);
    assert.equal(await pane().locator('section.entity .tl-bar.open .tl-label').innerText(), 'Berlin');
  });

  test('a subagent is shown nested in its delegate_subagent card', async () => {
    await ask('Ask a researcher #scenario:ui-delegate');
    const card = page.locator('article.turn').last().locator('.card.tool[data-tool="delegate_subagent"]');
    await card.waitFor();
    assert.match(await card.locator(':scope > details .args-summary').innerText(), /^researcher: What does Ada drink\?/);
    const sub = card.locator('section.subagent[data-role="researcher"]');
    await sub.waitFor();
    assert.equal(await sub.getAttribute('data-state'), 'done');
    assert.match(await sub.locator('.sub-state').innerText(), /done · 2 steps · 1 tool call/);
    const inner = sub.locator('.card.tool[data-tool="search_chunks"]');
    assert.equal(await inner.count(), 1);
    assert.equal(await inner.locator('.lane').innerText(), 'fast');
    await sub.locator('.sub-text strong', { hasText: 'green tea' }).waitFor();
    // the subagent's text is not the answer's
    const answer = await page.locator('article.turn').last().locator('.turn-body > .segment').allInnerTexts();
    assert.deepEqual(answer, ['The researcher found it.']);
    await screenshot(page, 'subagent-desktop-light');
  });

  test('the trace shows the memories offered at the start of a turn', async () => {
    await ask('What tea does Ada drink? #scenario:ui-recall-tea');
    await page.locator('article.turn').last().locator('.trace-btn').click();
    await page.locator('#tab-trace[aria-selected="true"]').waitFor();
    const chip = page.locator('.trace-head .chip.memories');
    await chip.waitFor();
    assert.match(await chip.innerText(), /^memories 1 · \d+ tokens$/);
    await page.locator('.span-row[data-kind="memory"]').click();
    const offered = page.locator('.span-attrs ol.offered li');
    assert.equal(await offered.count(), 1);
    assert.match(await offered.innerText(), /Ada drinks green tea every morning\. · \d+ tokens/);
  });
});
