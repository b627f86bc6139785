// The web UI with execution on: a real tusko-sandboxd (native runtime, the
// sandbox image) behind tusko. A turn that writes a file and runs it shows the
// spawn notice, the tool cards with their lanes and streamed output; the file
// is in the Files tab, previews and downloads (the bytes are checked); the
// trace shows the spawn span's attributes.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, describe, test } from 'node:test';

import { runProgram, startPostgres, startProgram, stopAll } from '../lib/harness.mjs';
import { dropFiles, lastTurnDone, launchBrowser, newPage, screenshot, send, signIn, startStack } from './lib.mjs';

const SCRIPT = "import csv\nrows = [('city', 'people'), ('Oslo', 709000), ('Lima', 10092000)]\nwith open('cities.csv', 'w', newline='') as f:\n    csv.writer(f).writerows(rows)\nprint('wrote', len(rows) - 1, 'rows')\n";
const scenarios = {
  'ui-write-run': {
    steps: [
      { text: 'I will write a small script and run it.', tool_calls: [{ name: 'write_file', arguments: { path: 'make_csv.py', content: SCRIPT } }] },
      { tool_calls: [{ name: 'execute_command', arguments: { command: 'python3 make_csv.py && echo done >&2' } }] },
      { text: 'The script said: `{{tool_result}}`' },
    ],
  },
  'ui-talk': { steps: [{ text: 'Just talking; no sandbox needed.' }] },
};

let stack, browser;
const EMAIL = 'grace@example.com';

before(async () => {
  stack = await startStack({ sandbox: true, scenarios, tag: 'e2e_sbx' });
  stack.addUser(EMAIL);
  browser = await launchBrowser();
});

after(async () => {
  if (browser) await browser.close();
  if (stack) await stack.stop();
  await stopAll();
});

describe('a turn that writes and runs code', () => {
  let page, context, problems;

  before(async () => {
    ({ page, context, problems } = await newPage(browser, { acceptDownloads: true }));
    await signIn(page, stack.base, EMAIL);
  });
  after(async () => {
    if (!context) return;
    assert.deepEqual(problems.errors, []);
    assert.deepEqual(problems.csp, []);
    await context.close();
  });

  test('no banner; a talking turn starts no sandbox and the Files tab says so', async () => {
    assert.equal(await page.locator('#exec-banner').isVisible(), false);
    await send(page, 'Hi #scenario:ui-talk');
    await lastTurnDone(page);
    assert.equal(await page.locator('.notice.spawn').count(), 0);
    await page.locator('#panel-toggle').click();
    await page.locator('#pane-files .files-status', { hasText: 'Nothing here yet' }).waitFor();
  });

  test('spawn notice, tool cards with lanes, streamed output', async () => {
    // a new chat, answered by the default scenario (so its title has no marker)
    stack.ms.addScenario('default', scenarios['ui-write-run']);
    await page.locator('#new-chat').click();
    await page.locator('.welcome').waitFor();
    await send(page, 'Make me a CSV of cities');
    const notice = page.locator('.notice.spawn');
    await notice.waitFor();
    assert.match(await notice.innerText(), /^sandbox started · (warm pool|cold start) · 1 of 5 live/);
    await lastTurnDone(page);
    // above the call that waited for it
    assert.equal(await notice.evaluate((el) => el.nextElementSibling.dataset.tool), 'write_file');
    const write = page.locator('.card.tool[data-tool="write_file"]');
    const run = page.locator('.card.tool[data-tool="execute_command"]');
    assert.equal(await write.locator('.lane').innerText(), 'sandbox');
    assert.equal(await run.locator('.lane').innerText(), 'sandbox');
    assert.ok(await write.locator('.status.ok').count());
    assert.ok(await run.locator('.status.ok').count());
    assert.match(await run.locator('.args-summary').innerText(), /python3 make_csv\.py/);
    assert.match(await run.locator('.duration').innerText(), /\d+(\.\d+)? (ms|s)$/);
    // the command's output, stdout and stderr apart
    assert.equal(await run.locator('details').getAttribute('open'), '');
    assert.match(await run.locator('.output .stdout').innerText(), /wrote 2 rows/);
    assert.match(await run.locator('.output .stderr').innerText(), /done/);
    await page.locator('.segment', { hasText: 'The script said' }).waitFor();
    // the open Files tab refreshes by itself once the turn wrote files
    await page.locator('#pane-files button.file', { hasText: 'cities.csv' }).waitFor();
    await screenshot(page, 'tools-desktop-light');
  });

  test('the Files tab lists the files, previews them (CSV as a table) and downloads the bytes', async () => {
    await page.locator('#tab-files').click();
    const csv = page.locator('#pane-files button.file', { hasText: 'cities.csv' });
    await csv.waitFor();
    await page.locator('#pane-files button.file', { hasText: 'make_csv.py' }).waitFor();
    await csv.click();
    const table = page.locator('#pane-files table.csv');
    await table.waitFor();
    assert.deepEqual(await table.locator('th').allInnerTexts(), ['city', 'people']);
    assert.deepEqual(await table.locator('tbody tr').first().locator('td').allInnerTexts(), ['Oslo', '709000']);
    await screenshot(page, 'files-desktop-light');
    const [download] = await Promise.all([page.waitForEvent('download'), page.locator('#pane-files .preview-head button', { hasText: 'Download' }).click()]);
    assert.equal(download.suggestedFilename(), 'cities.csv');
    const bytes = fs.readFileSync(await download.path(), 'utf8');
    assert.equal(bytes, 'city,people\r\nOslo,709000\r\nLima,10092000\r\n');
    // code previews are highlighted
    await page.locator('#pane-files button.file', { hasText: 'make_csv.py' }).click();
    await page.locator('#pane-files .preview-text code.hljs').waitFor();
    assert.equal(await page.locator('#pane-files .preview-text code').textContent(), SCRIPT);
  });

  test('a file dropped on the chat lands in /workspace', async () => {
    const notes = 'Notes for the deck:\n- Q3 up 12%\n- ünïcödé ✓\n';
    await dropFiles(page, '#main', [{ name: 'notes.txt', text: notes, type: 'text/plain' }]);
    await page.locator('.upload-chip.ok', { hasText: 'notes.txt · in /workspace' }).waitFor();
    const file = page.locator('#pane-files button.file', { hasText: 'notes.txt' });
    await file.waitFor();
    await file.click();
    await page.locator('#pane-files .preview-text', { hasText: 'Q3 up 12%' }).waitFor();
    const [download] = await Promise.all([page.waitForEvent('download'), page.locator('#pane-files .preview-head button', { hasText: 'Download' }).click()]);
    assert.equal(fs.readFileSync(await download.path(), 'utf8'), notes);
  });

  test("a file dropped on a chat without a sandbox starts it: a notice in the chat, outside any turn", async () => {
    const url = page.url();
    await page.locator('#new-chat').click();
    await send(page, 'Only talk #scenario:ui-talk');
    await lastTurnDone(page);
    await dropFiles(page, '#main', [{ name: 'first.txt', text: 'first\n', type: 'text/plain' }]);
    await page.locator('.upload-chip.ok', { hasText: 'first.txt · in /workspace' }).waitFor();
    const notice = page.locator('.thread > .session-notice > .notice.spawn');
    await notice.waitFor();
    assert.match(await notice.innerText(), /^sandbox started · (warm pool|cold start) · 2 of 5 live/);
    assert.equal(await page.locator('article.turn .notice.spawn').count(), 0);
    await page.goto(url);
    await page.locator('article.turn[data-state="done"]').last().waitFor();
  });

  test('the trace shows the spawn span with its attributes', async () => {
    await page.locator('article.turn').last().locator('.trace-btn').click();
    await page.locator('#tab-trace[aria-selected="true"]').waitFor();
    const spawn = page.locator('.span-row[data-kind="sandbox_spawn"]');
    await spawn.waitFor();
    assert.ok(await page.locator('.span-row[data-kind="llm"]').count() >= 3);
    assert.equal(await page.locator('.span-row[data-kind="tool"]').count(), 2);
    assert.match(await page.locator('.trace-head .sandboxes').innerText(), /sandboxes 1/);
    // the spawn span is chosen first; its attributes in the product's order
    assert.ok(await spawn.evaluate((el) => el.classList.contains('selected')));
    const attrs = page.locator('dl.attrs[data-kind="sandbox_spawn"]');
    const dts = await attrs.locator('dt').allInnerTexts();
    assert.deepEqual(dts.slice(0, 7), ['tier', 'trigger', 'call', 'pool', 'quota', 'credentials', 'idle_ttl']);
    const dd = async (k) => attrs.locator(`dt:text-is("${k}") + dd`).innerText();
    assert.equal(await dd('tier'), 'sandbox');
    assert.equal(await dd('call'), 'getOrCreateOpenSandbox');
    assert.match(await dd('pool'), /^(warm|cold)/);
    assert.equal(await dd('quota'), '1 of 5 live per user');
    assert.equal(await dd('credentials'), 'fail-closed, from env only');
    assert.equal(await dd('idle_ttl'), '30m, then reaped');
    assert.match(await dd('trigger'), /write/);
    await screenshot(page, 'trace-desktop-light');
  });

  test('the same screens in dark and on a phone', async () => {
    const url = page.url();
    for (const [viewport, theme] of [['desktop', 'dark'], ['phone', 'light'], ['phone', 'dark']]) {
      const p = await newPage(browser, { viewport, theme });
      await signIn(p.page, stack.base, EMAIL);
      await p.page.goto(url);
      await p.page.locator('.notice.spawn').waitFor();
      await p.page.locator('article.turn[data-state="done"]').waitFor();
      await p.page.locator('article.turn').last().locator('.trace-btn').click();
      await p.page.locator('dl.attrs[data-kind="sandbox_spawn"]').waitFor();
      await screenshot(p.page, `trace-${viewport}-${theme}`);
      assert.deepEqual(p.problems.errors, []);
      await p.context.close();
    }
  });
});

describe('the per-user sandbox quota', () => {
  test('a spawn over the limit shows the quota message on the card and in the turn', async () => {
    // a tusko of its own (fresh database) on the same sandbox service, 1 sandbox per user
    const pg = await startPostgres('e2e_quota');
    const tusko = await startProgram('tusko', {
      env: { ...stack.tuskoEnv, DATABASE_URL: pg.url, MAX_SANDBOXES_PER_USER: '1' },
    });
    runProgram('tusko', ['user', 'add', '--email', 'q@example.com', '--password-stdin'], { env: { DATABASE_URL: pg.url }, input: 'correct horse battery\n' });
    const { context, page, problems } = await newPage(browser);
    await signIn(page, tusko.url, 'q@example.com');
    await send(page, 'first #scenario:ui-write-run');
    await page.locator('.notice.spawn', { hasText: '1 of 1 live' }).waitFor();
    await lastTurnDone(page);
    await page.locator('#new-chat').click();
    await send(page, 'second #scenario:ui-write-run');
    await lastTurnDone(page);
    const card = page.locator('.card.tool[data-tool="write_file"]');
    const msg = card.locator('.tool-message.quota');
    await msg.waitFor();
    assert.match(await msg.innerText(), /^Sandbox quota reached: .*1 of 1.*MAX_SANDBOXES_PER_USER/);
    // said once, on the refused call (no separate error card for it)
    assert.equal(await page.locator('.turn-error').count(), 0);
    assert.equal(await page.locator('.notice.spawn').count(), 0);
    await screenshot(page, 'quota-desktop-light');
    assert.deepEqual(problems.errors, []);
    await context.close();
    await tusko.stop();
  });
});
