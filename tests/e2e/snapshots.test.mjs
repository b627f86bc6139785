// The Files panel's workspace snapshots: a real tusko-sandboxd (native runtime,
// the sandbox image) and s3rver (npm) behind tusko. A snapshot made with
// "Snapshot now" is listed with its size and time and is in the store; after
// the agent changes the file, a confirmed restore brings the old content back
// (the Files preview shows it); delete removes it from the list and the store.
// A chat without a sandbox says there is nothing to snapshot.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { stopAll } from '../lib/harness.mjs';
import { s3Env, startS3rver } from '../lib/s3.mjs';
import { lastTurnDone, launchBrowser, newPage, screenshot, send, signIn, startStack } from './lib.mjs';

const write = (content) => ({ steps: [{ tool_calls: [{ name: 'write_file', arguments: { path: 'plan.md', content } }] }, { text: 'written' }] });
const scenarios = {
  'snap-v1': write('# Plan\nversion one\n'),
  'snap-v2': write('# Plan\nversion two, changed\n'),
  'snap-talk': { steps: [{ text: 'Only talking.' }] },
};

let stack, browser, rv;
const EMAIL = 'hedy@example.com';

before(async () => {
  rv = await startS3rver();
  stack = await startStack({ sandbox: true, scenarios, env: { ...s3Env(rv), S3_PREFIX: 'e2e' }, tag: 'e2e_snap' });
  stack.addUser(EMAIL);
  for (let i = 0; i < 200 && !/snapshots on/.test(stack.tusko.log()); i++) await new Promise((r) => setTimeout(r, 50));
  assert.match(stack.tusko.log(), /snapshots on/);
  browser = await launchBrowser();
});

after(async () => {
  if (browser) await browser.close();
  if (stack) await stack.stop();
  await stopAll();
  if (rv) await rv.close();
});

describe('snapshots in the Files panel', () => {
  let page, context, problems;
  const pane = () => page.locator('#pane-files');
  const snaps = () => pane().locator('li.snap');
  const status = () => pane().locator('.snap-status');
  const preview = async () => {
    await pane().locator('button[aria-label="Refresh files"]').click();
    await pane().locator('button.file', { hasText: 'plan.md' }).click();
    return pane().locator('.preview-text');
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

  test('a chat without a sandbox: nothing to snapshot, said in the panel', async () => {
    await send(page, 'Hello #scenario:snap-talk');
    await lastTurnDone(page);
    await page.locator('#panel-toggle').click();
    await pane().locator('.snap-empty', { hasText: 'No snapshots' }).waitFor();
    await pane().locator('button', { hasText: 'Snapshot now' }).click();
    await status().locator('text=Nothing to snapshot').waitFor();
    assert.ok(await status().evaluate((el) => el.classList.contains('error')));
    assert.equal(await snaps().count(), 0);
  });

  test('Snapshot now lists the snapshot with its size and time; it is in the store', async () => {
    await page.locator('#new-chat').click();
    await send(page, 'Write the plan #scenario:snap-v1');
    await lastTurnDone(page);
    await pane().locator('button.file', { hasText: 'plan.md' }).waitFor();
    await pane().locator('button', { hasText: 'Snapshot now' }).click();
    await status().locator('text=Snapshot stored: 1 file').waitFor();
    await snaps().first().waitFor();
    assert.equal(await snaps().count(), 1);
    const li = snaps().first();
    assert.equal(await li.getAttribute('data-status'), 'ready');
    assert.match(await li.locator('.size').innerText(), /^\d+(\.\d)? (B|KB) · 1 file$/);
    const dt = await li.locator('time').getAttribute('datetime');
    assert.ok(Math.abs(Date.parse(dt) - Date.now()) < 10 * 60 * 1000, dt);
    // the same snapshot through the API, and its object in the store
    const sid = page.url().split('/').pop();
    const id = await li.getAttribute('data-id');
    const list = await page.evaluate(async (s) => (await fetch(`/api/sessions/${s}/snapshots`)).json(), sid);
    assert.equal(list.snapshots[0].id, id);
    assert.equal((await rv.get(list.snapshots[0].key)).status, 200);
    // a second press with nothing changed stores nothing
    await pane().locator('button', { hasText: 'Snapshot now' }).click();
    await status().locator('text=Nothing changed since the last snapshot').waitFor();
    assert.equal(await snaps().count(), 1);
    await screenshot(page, 'files-snapshots-desktop-light');
  });

  test('restore, after the user confirms, brings the changed file back', async () => {
    await send(page, 'Change the plan #scenario:snap-v2');
    await lastTurnDone(page);
    await (await preview()).locator('text=version two').waitFor();
    // Cancel restores nothing
    await snaps().first().locator('button', { hasText: 'Restore' }).click();
    const dialog = page.locator('#confirm');
    await dialog.waitFor();
    assert.match(await dialog.locator('h2').innerText(), /Restore this snapshot/);
    await dialog.locator('button[value="cancel"]').click();
    await (await preview()).locator('text=version two').waitFor();
    // confirmed, the old content is back
    await snaps().first().locator('button', { hasText: 'Restore' }).click();
    await dialog.locator('button[value="ok"]', { hasText: 'Restore' }).click();
    await status().locator('text=Restored 1 file').waitFor();
    assert.ok(!(await status().evaluate((el) => el.classList.contains('error'))));
    const text = await preview();
    await text.locator('text=version one').waitFor();
    assert.equal(await text.textContent(), '# Plan\nversion one\n');
  });

  test('delete, after the user confirms, removes the snapshot from the list and the store', async () => {
    const sid = page.url().split('/').pop();
    const key = (await page.evaluate(async (s) => (await fetch(`/api/sessions/${s}/snapshots`)).json(), sid)).snapshots[0].key;
    await snaps().first().locator('button[title="Delete"]').click();
    await page.locator('#confirm button[value="ok"]', { hasText: 'Delete' }).click();
    await status().locator('text=Snapshot deleted').waitFor();
    await pane().locator('.snap-empty', { hasText: 'No snapshots' }).waitFor();
    assert.equal(await snaps().count(), 0);
    assert.equal((await rv.get(key)).status, 404);
  });
});
